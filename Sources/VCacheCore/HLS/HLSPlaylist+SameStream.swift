#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one rule for "the origin answers a playlist in other bytes: is it still the cached
/// stream?", used by prefetch when it asks for a cached manifest again
/// (`ManifestRevalidation.sameUnderKeyRules`) and by serve when a VOD media playlist it answers
/// differs from the cached copy (`Proxy.dropIfChanged`). The same stream keeps every member
/// cached; anything else drops what the old copy named.
extension HLSPlaylist {
    /// Whether the playlists `new` and `old` are the same stream as the cache sees it: their
    /// lines equal once every URI (a URI line, a `URI="..."` attribute) is put under `rules`,
    /// with what cannot change a member's bytes left aside: line endings, blank lines, comments
    /// (a `#` line that is no `#EXT` tag, RFC 8216 §4.1), an `EXTINF` title and
    /// `EXT-X-PROGRAM-DATE-TIME`. Any other difference (a duration, another name, a tag added,
    /// an attribute) is a change. False when either is not UTF-8 text.
    static func sameUnderKeyRules(_ new: [UInt8], _ old: [UInt8], rules: CacheKeyRules) -> Bool {
        guard let a = keyedLines(new, rules), let b = keyedLines(old, rules) else { return false }
        return a == b
    }

    /// The lines `sameUnderKeyRules` compares. Nil when the bytes are not UTF-8 text.
    static func keyedLines(_ bytes: [UInt8], _ rules: CacheKeyRules) -> [String]? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var out: [String] = []
        // (Swift reads CR LF as one Character: `isNewline` splits it as one line end.)
        for raw in text.split(whereSeparator: { $0.isNewline }) {
            let line = String(raw).trimming(.whitespaces)
            if line.isEmpty { continue }
            guard line.hasPrefix("#") else {
                out.append(rules.normaliseText(line))
                continue
            }
            guard line.hasPrefix("#EXT") else { continue }  // a comment
            if line.hasPrefix("#EXT-X-PROGRAM-DATE-TIME:") { continue }
            if line.hasPrefix("#EXTINF:") {
                out.append(String(line.prefix { $0 != "," }))
                continue
            }
            var rest = Substring(line)
            var keyedLine = ""
            while let r = rest.firstRange(of: "URI=\"") {
                keyedLine += rest[..<r.upperBound]
                rest = rest[r.upperBound...]
                guard let close = rest.firstIndex(of: "\"") else { break }
                keyedLine += rules.normaliseText(String(rest[..<close]))
                rest = rest[close...]
            }
            out.append(keyedLine + rest)
        }
        return out
    }
}
