/// NSString's path operations on a String, with NSString's results (Tests: PathTextTests compares
/// them with swift-corelibs-foundation's): vcache's product targets import only
/// FoundationEssentials, which has no NSString (Docs/performance.md, A lean binary).
package enum PathText {
    /// Runs of "/" as one, and no trailing "/" (except the root itself).
    static func fixingSlashes(_ path: String) -> String {
        var out = ""
        out.reserveCapacity(path.utf8.count)
        var previousSlash = false
        for c in path {
            if c == "/" {
                if previousSlash { continue }
                previousSlash = true
            } else {
                previousSlash = false
            }
            out.append(c)
        }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }

    /// `/a/b.mp4` -> `b.mp4`; `/` -> `/`.
    package static func lastPathComponent(_ path: String) -> String {
        let p = fixingSlashes(path)
        if p.count <= 1 { return p }
        guard let slash = p.lastIndex(of: "/") else { return p }
        return String(p[p.index(after: slash)...])
    }

    /// `/a/b.mp4` -> `/a`; `/a` -> `/`; `a` -> "".
    package static func deletingLastPathComponent(_ path: String) -> String {
        let p = fixingSlashes(path)
        if p == "/" || p.isEmpty { return p }
        guard let slash = p.lastIndex(of: "/") else { return "" }
        if slash == p.startIndex { return "/" }
        return String(p[..<slash])
    }

    /// The start of the extension (after its dot) in an already fixed path, or nil: none when the
    /// last component has no dot, starts with its only one, or is `..` (a trailing dot: an empty
    /// extension).
    private static func extensionStart(_ p: String) -> String.Index? {
        var position = p.endIndex
        let componentStart = p.lastIndex(of: "/").map { p.index(after: $0) } ?? p.startIndex
        if p[componentStart...] == ".." { return nil }
        while position > componentStart {
            let previous = p.index(before: position)
            if p[previous] == "." {
                if previous == componentStart { return nil }
                return position
            }
            position = previous
        }
        return nil
    }

    /// `/a/b.mp4` -> `mp4`; "" when there is none.
    package static func pathExtension(_ path: String) -> String {
        let p = fixingSlashes(path)
        if p.count <= 1 { return "" }
        return extensionStart(p).map { String(p[$0...]) } ?? ""
    }

    /// `/a/b.mp4` -> `/a/b`.
    package static func deletingPathExtension(_ path: String) -> String {
        let p = fixingSlashes(path)
        if p.count <= 1 { return p }
        return extensionStart(p).map { String(p[..<p.index(before: $0)]) } ?? p
    }

    /// `a` + `b` -> `a/b`; the slashes of either are left as they are.
    package static func appendingPathComponent(_ path: String, _ component: String) -> String {
        if component.isEmpty { return path }
        if path.isEmpty { return component }
        return path.hasSuffix("/") ? path + component : path + "/" + component
    }
}
