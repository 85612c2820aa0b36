#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a request path names (Docs/serve.md, "Proxy URLs"): exactly one origin URL, or nothing.
/// Two forms:
/// - `/v/<origin URL, base64url>/<name>`: the origin URL itself, `name` being one serve gives it
///   (its own file name, or that with an extension added, `nameFits`); any other name is refused,
///   so a player that resolves a relative URL against a proxy URL (`/v/<MPD>/init.m4s`) is told
///   404, never handed the bytes of the resource the token names.
/// - `/d/<origin folder URL, base64url>/<path>`: the folder (http or https, ending in `/`, no
///   query or fragment) joined with the path, which keeps a player's `$Number$` or `$Time$`
///   substitution under a proxied base (a DASH BaseURL or SegmentTemplate). The path has no `.` or
///   `..` segment (in any encoding), no empty first segment, no backslash or `#`: it cannot leave
///   the folder. The server hands the path percent-decoded; the MPD rewrite writes `%` and `?`
///   encoded (`folderReference`), so the decoded path is the reference as the origin wrote it
///   (a `?` in it is the origin URL's query).
extension ProxyURL {
    public enum Lookup: Equatable, Sendable {
        /// The one origin URL the path names.
        case origin(String)
        /// A proxy path that names nothing (why, for the 404's log line).
        case refused(String)
        /// Not a proxy path at all.
        case notOurs
    }

    /// What `path` (percent-decoded, as the server hands it) names. A pure function of the path,
    /// remembered for the paths asked last (`recentLookups`): a player asks the same few URLs
    /// again and again, and working the answer out (base64, the name check) was a fifth of
    /// serve's own work on a cached request (Docs/performance.md).
    public static func lookup(path: String) -> Lookup {
        recentLookups.answer(path, work)
    }

    /// The answers to the paths asked last: at most `recentCount` paths of at most
    /// `recentPathBytes` each (all forgotten at once when full).
    private static let recentLookups = RecentAnswers<Lookup>(count: recentCount, textBytes: recentPathBytes)
    static let recentCount = 256
    static let recentPathBytes = 2048

    private static func work(_ path: String) -> Lookup {
        if path.hasPrefix("/d/") { return folderLookup(path) }
        guard path.hasPrefix("/v/") else { return .notOurs }
        guard let origin = origin(path: path) else { return .refused("not a vcache proxy path (/v/ORIGIN/NAME)") }
        let name = String(path.split(separator: "/", omittingEmptySubsequences: true).last ?? "")
        guard nameFits(name, origin: origin) || nameFits(PercentCoding.decode(name) ?? name, origin: origin) else {
            return .refused("'\(name)' is not the name of \(origin) (a URL resolved against a proxy URL names another resource: not served)")
        }
        return .origin(origin)
    }

    /// `url` with a request's raw `query` added: after `?`, or after `&` when `url` has a query of
    /// its own (the reference's, written `%3F` in the MPD); `url` itself when there is none.
    public static func appendingQuery(_ url: String, _ query: String?) -> String {
        guard let query, !query.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + query
    }

    /// The proxy URL of the folder `folder` (an absolute http(s) URL ending in `/`), ending in `/`.
    public static func makeFolder(_ folder: String, base: String) -> String {
        "\(base)/d/\(base64url(folder))/"
    }

    /// `reference` (a path relative to a folder, maybe with `$...$` template identifiers) as it
    /// is written after `makeFolder`'s URL: `%` and `?` percent-encoded outside identifiers, so
    /// the server's decoding gives back the reference as written; a fragment is dropped.
    public static func folderReference(_ reference: String) -> String {
        var out = ""
        var inIdentifier = false
        for c in reference {
            if c == "#" && !inIdentifier { break }
            if c == "$" { inIdentifier.toggle() }
            switch c {
            case "%" where !inIdentifier: out += "%25"
            case "?" where !inIdentifier: out += "%3F"
            default: out.append(c)
            }
        }
        return out
    }

    /// Whether `name` is a name serve gives `origin` (`make`'s default, `Exporter.fileName`; an
    /// HLS member's, `Exporter.memberFileName`): the origin's own file name; its stem or own name
    /// with an extension of 1 to 8 letters or digits added; or, for a name cut to 200 bytes, a
    /// beginning of those with such an extension.
    public static func nameFits(_ name: String, origin: String) -> Bool {
        let (stem, ext) = Exporter.fileNameParts(for: origin, key: "video")
        let own = ext.isEmpty ? stem : stem + "." + ext
        if name == own { return true }
        guard let dot = name.lastIndex(of: ".") else { return false }
        let head = String(name[..<dot]), added = name[name.index(after: dot)...]
        guard (1...8).contains(added.count), added.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return false }
        if head == stem || head == own { return true }
        return name.utf8.count >= 190 && !head.isEmpty && (stem.hasPrefix(head) || own.hasPrefix(head))
    }

    private static func folderLookup(_ path: String) -> Lookup {
        let afterPrefix = path.dropFirst(3)
        guard let slash = afterPrefix.firstIndex(of: "/") else { return .refused("not a vcache folder path (/d/FOLDER/PATH)") }
        let token = afterPrefix[..<slash], rest = String(afterPrefix[afterPrefix.index(after: slash)...])
        guard let folder = decode(token), HLSURI.isHTTP(folder), folder.hasSuffix("/"),
              !folder.contains("?"), !folder.contains("#") else {
            return .refused("not a vcache folder path (/d/FOLDER/PATH): the folder is no http(s) URL ending in /")
        }
        let dots: Set<String> = [".", "..", "%2e", ".%2e", "%2e.", "%2e%2e"]
        guard !HLSURI.Parts(folder).path.split(separator: "/").contains(where: { dots.contains($0.lowercased()) }) else {
            return .refused("not a vcache folder path (/d/FOLDER/PATH): the folder has a . or .. segment")
        }
        let pathPart = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let segments = pathPart.split(separator: "/", omittingEmptySubsequences: false)
        guard !pathPart.isEmpty, !pathPart.hasPrefix("/"), !rest.contains("\\"), !rest.contains("#"),
              !segments.contains(where: { dots.contains($0.lowercased()) }) else {
            return .refused("'\(rest)' is no path under \(folder) (empty, or a . or .. segment, a backslash or a fragment): not served")
        }
        return .origin(folder + rest)
    }

    /// base64url without padding, byte by byte (Foundation's replacing goes through NSString on
    /// Linux, slow for a playlist of many thousand URIs).
    static func base64url(_ s: String) -> String {
        String(decoding: Data(s.utf8).base64EncodedData().compactMap { b -> UInt8? in
            switch b {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            case UInt8(ascii: "="): nil
            default: b
            }
        }, as: UTF8.self)
    }

    static func decode(_ token: Substring) -> String? {
        var b64 = String(token).replacing("-", with: "+").replacing("_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard b64.count <= 16 << 10, let data = Data(base64Encoded: b64) else { return nil }
        return String(data: data, encoding: .utf8)
    }
}
