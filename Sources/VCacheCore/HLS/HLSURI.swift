/// Reference resolution, RFC 3986 §5.2 (strict): what a playlist's URI lines and `URI="..."`
/// attributes mean, resolved against the playlist's final URL after redirects (RFC 8216 §4.1).
/// Pure string work, no Foundation `URL` (whose parsing differs between platforms); nothing is
/// percent-encoded or decoded but a raw space (`encodingSpaces`).
public enum HLSURI {
    /// The target URI of `reference` against the absolute `base` (§5.2.2, §5.2.4, §5.3).
    public static func resolve(_ reference: String, against base: String) -> String {
        let r = Parts(reference)
        var t = Parts()
        if r.scheme != nil {
            t.scheme = r.scheme
            t.authority = r.authority
            t.path = removeDotSegments(r.path)
            t.query = r.query
        } else {
            let b = Parts(base)
            if r.authority != nil {
                t.authority = r.authority
                t.path = removeDotSegments(r.path)
                t.query = r.query
            } else {
                if r.path.isEmpty {
                    t.path = b.path
                    t.query = r.query ?? b.query
                } else {
                    t.path = removeDotSegments(r.path.hasPrefix("/") ? r.path : merge(base: b, r.path))
                    t.query = r.query
                }
                t.authority = b.authority
            }
            t.scheme = b.scheme
        }
        t.fragment = r.fragment
        return encodingSpaces(t.recomposed)
    }

    /// `url` with each raw space percent-encoded (`%20`). A space is no URI character, yet
    /// playlists written by hand or by a tool that joins folder names hold them, and players
    /// (ffmpeg, hls.js, Safari) encode them and play; so vcache asks for them the same way
    /// rather than refusing the URL.
    static func encodingSpaces(_ url: String) -> String {
        guard url.utf8.contains(0x20) else { return url }
        return String(decoding: url.utf8.flatMap { $0 == 0x20 ? Array("%20".utf8) : [$0] }, as: UTF8.self)
    }

    /// Whether `uri` is absolute with an http or https scheme (what vcache can fetch).
    public static func isHTTP(_ uri: String) -> Bool {
        guard let s = Parts(uri).scheme?.lowercased() else { return false }
        return s == "http" || s == "https"
    }

    /// The components of Appendix B's regular expression.
    struct Parts {
        var scheme: String?
        var authority: String?
        var path = ""
        var query: String?
        var fragment: String?

        init() {}

        /// Split on bytes (every delimiter is ASCII): each segment line of a playlist passes here,
        /// and a `Character` search costs several times more.
        init(_ s: String) {
            var rest = Substring(s)
            if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) {
                fragment = String(rest[rest.utf8.index(after: hash)...])
                rest = rest[..<hash]
            }
            if let q = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
                query = String(rest[rest.utf8.index(after: q)...])
                rest = rest[..<q]
            }
            if let colon = rest.utf8.firstIndex(of: UInt8(ascii: ":")), !rest[..<colon].utf8.contains(UInt8(ascii: "/")),
               Self.isScheme(rest[..<colon]) {
                scheme = String(rest[..<colon])
                rest = rest[rest.utf8.index(after: colon)...]
            }
            if rest.utf8.starts(with: "//".utf8) {
                let afterSlashes = rest[rest.utf8.index(rest.startIndex, offsetBy: 2)...]
                let end = afterSlashes.utf8.firstIndex(of: UInt8(ascii: "/")) ?? afterSlashes.endIndex
                authority = String(afterSlashes[..<end])
                rest = afterSlashes[end...]
            }
            path = String(rest)
        }

        static func isScheme(_ s: Substring) -> Bool {
            guard let first = s.utf8.first, (first | 0x20) >= 0x61, (first | 0x20) <= 0x7A else { return false }
            return s.utf8.allSatisfy { b in
                let l = b | 0x20
                return (l >= 0x61 && l <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "+") || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
            }
        }

        /// §5.3.
        var recomposed: String {
            var out = ""
            if let scheme { out += scheme + ":" }
            if let authority { out += "//" + authority }
            out += path
            if let query { out += "?" + query }
            if let fragment { out += "#" + fragment }
            return out
        }
    }

    /// §5.2.3.
    static func merge(base: Parts, _ path: String) -> String {
        if base.authority != nil && base.path.isEmpty { return "/" + path }
        guard let slash = base.path.lastIndex(of: "/") else { return path }
        return String(base.path[...slash]) + path
    }

    /// §5.2.4, step by step as written there.
    static func removeDotSegments(_ path: String) -> String {
        var input = Substring(path)
        var output = ""
        func dropLastSegment() {
            if let slash = output.lastIndex(of: "/") { output.removeSubrange(slash...) } else { output = "" }
        }
        while !input.isEmpty {
            if input.hasPrefix("../") {
                input = input.dropFirst(3)
            } else if input.hasPrefix("./") {
                input = input.dropFirst(2)
            } else if input.hasPrefix("/./") {
                input = "/" + input.dropFirst(3)
            } else if input == "/." {
                input = "/"
            } else if input.hasPrefix("/../") {
                input = "/" + input.dropFirst(4)
                dropLastSegment()
            } else if input == "/.." {
                input = "/"
                dropLastSegment()
            } else if input == "." || input == ".." {
                input = ""
            } else {
                let from = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[from...].firstIndex(of: "/") ?? input.endIndex
                output += input[..<end]
                input = input[end...]
            }
        }
        return output
    }
}
