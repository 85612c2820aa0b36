#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A manifest the origin answers in other bytes may still be the same stream: a signed-URL CDN
/// signs every URL anew on each answer (a token `--key-strip-param` strips), an MPD rendered per
/// request writes its attributes in another order. Compared as the cache sees them, the two name
/// the same entries with the same meaning, so the members cached stay (Docs/dash.md,
/// Docs/hls.md, "A partly cached stream"). Anything else that differs (a duration, another name,
/// an element, a playlist's comment) is a change.
extension ManifestRevalidation {
    /// Whether `new` and `old`, manifests of the same kind (an MPD when `mpd`, else an HLS
    /// playlist), are the same once every URL they name is put under `rules` (and, for an MPD,
    /// its attributes read in any order, comments and whitespace between elements aside).
    static func sameUnderKeyRules(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> Bool {
        if mpd {
            guard let a = try? XMLTree.parse(new), let b = try? XMLTree.parse(old) else { return false }
            return keyed(a, rules) == keyed(b, rules)
        }
        guard let a = keyedPlaylist(new, rules), let b = keyedPlaylist(old, rules) else { return false }
        return a == b
    }

    /// MPD attributes and elements whose value is a URL (or a URL template), ISO/IEC 23009-1:
    /// SegmentTemplate@media/@initialization/@index, SegmentURL@media/@index,
    /// Initialization@sourceURL, RepresentationIndex@sourceURL, xlink:href; BaseURL, Location.
    private static let urlAttributes: Set<String> = ["media", "initialization", "index", "sourceURL", "href"]
    private static let urlElements: Set<String> = ["BaseURL", "Location"]

    /// `e` with its URLs under `rules` and its attributes in one order.
    private static func keyed(_ e: XMLElement, _ rules: CacheKeyRules) -> XMLElement {
        var out = e
        out.attributes = e.attributes.map { a in
            var a = a
            if urlAttributes.contains(a.name) { a.value = rules.normaliseText(a.value) }
            return a
        }.sorted { ($0.namespace ?? "", $0.name) < ($1.namespace ?? "", $1.name) }
        if urlElements.contains(e.name) { out.text = rules.normaliseText(e.text.trimming(.whitespaces)) }
        out.children = e.children.map { keyed($0, rules) }
        return out
    }

    /// A playlist's lines with every URI (a URI line, a `URI="..."` attribute) under `rules`;
    /// line endings and blank lines aside. Nil when it is not text.
    private static func keyedPlaylist(_ bytes: [UInt8], _ rules: CacheKeyRules) -> [String]? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var out: [String] = []
        for raw in text.split(whereSeparator: { $0.isNewline }) {
            let line = String(raw).trimming(.whitespaces)
            if line.isEmpty { continue }
            guard line.hasPrefix("#") else {
                out.append(rules.normaliseText(line))
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
