#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The proxy's URL scheme: `/v/<origin URL, base64url>/<file name>`. The origin URL travels in the
/// path (no server-side table: any vcache serving the same cache understands it, and an HLS
/// playlist rewrite can point each segment URI at the proxy the same way). The file name at the
/// end is the origin's, because players pick the format from it.
public enum ProxyURL {
    /// The proxy URL for `origin` on the server at `base` (`http://127.0.0.1:8080`), ending with
    /// `name` (default: the origin's file name, `Exporter.fileName`).
    public static func make(origin: String, base: String, name: String? = nil) -> String {
        let encoded = base64url(origin)
        let name = name ?? Exporter.fileName(for: origin, key: "video", contentType: nil)
        let safeName = PercentCoding.encode(name, allowed: PercentCoding.urlPathAllowed.subtracting("/?#;".utf8))
        return "\(base)/v/\(encoded)/\(safeName)"
    }

    /// The origin URL a proxy path names, or nil when the path is not one of ours.
    public static func origin(path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[0] == "v" else { return nil }
        var b64 = String(parts[1]).replacing("-", with: "+").replacing("_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard b64.count <= 16 << 10, let data = Data(base64Encoded: b64), let url = String(data: data, encoding: .utf8) else { return nil }
        return url
    }

    /// The ETag the proxy sends: the origin's; when it has none, one made from the entry: strong
    /// when a Last-Modified date stands for the version (it changes with it), weak otherwise
    /// (nothing then proves two responses are one version, so it must never satisfy If-Range).
    static func etag(_ video: ReadThrough.Video) -> String {
        if let e = video.validators.etag { return e }
        if let lm = video.validators.lastModified {
            return "\"vcache-\(SHA256Digest.hash("\(video.key) \(video.length) \(lm)").prefix(16))\""
        }
        return "W/\"vcache-\(video.key.hex.prefix(16))-\(video.length)\""
    }

    /// What the proxy passes on as Content-Type: media, playlists, subtitles and plain data pass;
    /// anything a browser would run or render as a document (HTML, SVG, XML, script) goes out as
    /// application/octet-stream.
    public static func safeContentType(_ type: String) -> String {
        let base = type.split(separator: ";").first.map { $0.trimming(.whitespaces).lowercased() } ?? ""
        let passed: Set<String> = ["application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl",
                                   "application/dash+xml", "application/mp4", "application/octet-stream", "text/vtt", "application/ttml+xml"]
        if passed.contains(base) { return type }
        if (base.hasPrefix("video/") || base.hasPrefix("audio/")) && !base.contains("xml") { return type }
        if base.hasPrefix("image/") && !base.contains("svg") && !base.contains("xml") { return type }
        return "application/octet-stream"
    }

    /// Content-Type for a file name, when the origin's says nothing useful (octet-stream or none).
    public static func contentType(origin: String?, name: String) -> String {
        if let o = origin, !o.isEmpty, !o.lowercased().hasPrefix("application/octet-stream") { return o }
        switch name.fileExtension.lowercased() {
        case "mp4", "m4v": return "video/mp4"
        case "m4a": return "audio/mp4"
        case "mov": return "video/quicktime"
        case "webm": return "video/webm"
        case "mkv": return "video/x-matroska"
        case "ts": return "video/mp2t"
        case "m3u8": return "application/vnd.apple.mpegurl"
        default: return "application/octet-stream"
        }
    }
}

/// A request's `Range` header against a representation of `length` bytes (RFC 9110 §14.1.2).
public enum RangeHeader: Equatable, Sendable {
    /// No Range, or one that is not valid syntax (ignored, as the RFC says): the whole, 200.
    case whole
    /// One span to send as 206. Several ranges are answered with the span that covers them all.
    case span(ByteRange)
    /// No range overlaps the representation: 416 with `Content-Range: bytes */length`.
    case unsatisfiable

    public init(_ header: String?, length: Int64) {
        // Anything that does not parse is ignored (§14.2): a whole response, never a 416.
        guard let header, header.lowercased().hasPrefix("bytes=") else { self = .whole; return }
        func number(_ s: Substring) -> Int64? {
            guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int64(s)  // nil past 2^63: not a valid range either
        }
        var spans: [ByteRange] = []
        var parsed = 0
        for part in header.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false) {
            let t = part.trimming(.whitespaces)
            if t.isEmpty { continue }  // list syntax allows empty elements
            let ends = t.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard ends.count == 2 else { self = .whole; return }
            if ends[0].isEmpty {
                guard let n = number(ends[1]) else { self = .whole; return }
                parsed += 1
                if n > 0 && length > 0 { spans.append(ByteRange(max(0, length - n), length)) }
                continue
            }
            guard let a = number(ends[0]) else { self = .whole; return }
            var b = length - 1
            if !ends[1].isEmpty {
                guard let x = number(ends[1]), x >= a else { self = .whole; return }
                b = min(x, length - 1)
            }
            parsed += 1
            if a < length { spans.append(ByteRange(a, b + 1)) }
        }
        guard parsed > 0 else { self = .whole; return }
        guard let first = spans.min(by: { $0.lowerBound < $1.lowerBound }) else { self = .unsatisfiable; return }
        let last = spans.map(\.upperBound).max() ?? first.upperBound
        self = .span(ByteRange(first.lowerBound, last))
    }
}
