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
/// an element, an HLS tag) is a change; a playlist is compared by `HLSPlaylist.sameUnderKeyRules`,
/// the rule serve applies too.
extension ManifestRevalidation {
    /// Whether `new` and `old`, manifests of the same kind (an MPD when `mpd`, else an HLS
    /// playlist), are the same once every URL they name is put under `rules` (and, for an MPD,
    /// its attributes read in any order, comments and whitespace between elements aside).
    static func sameUnderKeyRules(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> Bool {
        if mpd {
            guard let a = try? XMLTree.parse(new), let b = try? XMLTree.parse(old) else { return false }
            return keyed(a, rules) == keyed(b, rules)
        }
        return HLSPlaylist.sameUnderKeyRules(new, old, rules: rules)
    }

    /// Whether `new`, the origin's answer at the end of a run, is the same encode as `old`, the
    /// copy the run read (`Prefetcher.changedDuringRun`): the same under `rules`, or once every
    /// URL's query is put aside (a signed-URL CDN's tokens, new on each answer, whatever the key
    /// rules) and, for an MPD, the attributes that carry the answer's own time (`publishTime`,
    /// which a just-in-time packager stamps on every answer of a static MPD). A changed path,
    /// duration, segment list, Representation, bandwidth or codec is another encode.
    /// `queriesAreTokens` false (prefetch, when a member asked at its new URL did not prove the
    /// new queries tokens: `ManifestRevalidation.MemberProbe`) keeps the queries: a
    /// cache-busting `?v=2` is another encode (hostile probe h9d, F4).
    static func sameEncode(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules, queriesAreTokens: Bool = true) -> Bool {
        if sameUnderKeyRules(new, old, mpd: mpd, rules: rules) { return true }
        var loose = rules
        loose.ignoreQuery = rules.ignoreQuery || queriesAreTokens
        if mpd {
            guard let a = try? XMLTree.parse(new), let b = try? XMLTree.parse(old) else { return false }
            return keyed(withoutAnswerTime(a), loose) == keyed(withoutAnswerTime(b), loose)
        }
        return HLSPlaylist.sameUnderKeyRules(new, old, rules: loose)
    }

    /// `outcome`, the origin's answer about the cached manifest `cached` (answered at
    /// `cachedBase`), as a run takes it: the one rule of the start of a run, a new choice and
    /// the end check. An answer in other bytes that is the same encode (`sameEncode`) but cannot
    /// take the cached copy's place (its URLs' query strings differ, a signed-URL CDN's tokens;
    /// its `publishTime`; it was answered from another folder, a per-answer redirect) is
    /// `.unchanged`: the cached copy stays, and every member it names. One the same under the
    /// key rules from the same folder stays `.changed`, to be stored in the cached copy's place
    /// (`Prefetcher.stands`); any other is another encode.
    static func judged(_ outcome: Outcome, cached: [UInt8], cachedBase: String, mpd: Bool, rules: CacheKeyRules) -> Outcome {
        guard case .changed(let body, _, _, let finalURL, let tokens) = outcome else { return outcome }
        let moved = finalURL.map { folder(of: $0) != folder(of: cachedBase) } ?? false
        if !moved && sameUnderKeyRules(body, cached, mpd: mpd, rules: rules) { return outcome }
        return sameEncode(body, cached, mpd: mpd, rules: rules, queriesAreTokens: tokens) ? .unchanged : outcome
    }

    /// Whether `new` is the same encode as `old` only if its URLs' queries are tokens: what a
    /// member asked at its new URL decides (`MemberProbe`).
    static func onlyQueriesDiffer(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> Bool {
        !sameEncode(new, old, mpd: mpd, rules: rules, queriesAreTokens: false) && sameEncode(new, old, mpd: mpd, rules: rules, queriesAreTokens: true)
    }

    /// For each URL `old` names whose query `new` names otherwise (the same place in the
    /// manifest, the same URL before its `?`): the old query and the new one. Nil when the two
    /// name their URLs in other numbers, or one old query has two new ones.
    static func queryChanges(_ new: [UInt8], _ old: [UInt8], mpd: Bool) -> [String: String]? {
        guard let a = urls(in: new, mpd: mpd), let b = urls(in: old, mpd: mpd), a.count == b.count else { return nil }
        var out: [String: String] = [:]
        for (n, o) in zip(a, b) where n != o {
            let (np, nq) = split(n), (op, oq) = split(o)
            guard np == op else { return nil }
            if let known = out[oq], known != nq { return nil }
            out[oq] = nq
        }
        return out
    }

    /// `url` before its `?`, and its query (empty when none).
    static func split(_ url: String) -> (String, String) {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
    }

    /// The URLs a manifest names, in document order (an MPD's URL attributes, by name within an
    /// element, and BaseURL/Location texts; a playlist's URI lines and `URI=` attributes).
    private static func urls(in bytes: [UInt8], mpd: Bool) -> [String]? {
        if mpd {
            guard let tree = try? XMLTree.parse(bytes) else { return nil }
            var out: [String] = []
            func walk(_ e: XMLElement) {
                for a in e.attributes.sorted(by: { $0.name < $1.name }) where urlAttributes.contains(a.name) { out.append(a.value) }
                if urlElements.contains(e.name) { out.append(e.text.trimming(.whitespaces)) }
                e.children.forEach(walk)
            }
            walk(tree)
            return out
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var out: [String] = []
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = String(raw).trimming(.whitespaces)
            if line.isEmpty { continue }
            if !line.hasPrefix("#") { out.append(line); continue }
            for piece in line.split(separator: "URI=\"", omittingEmptySubsequences: false).dropFirst() {
                if let end = piece.firstIndex(of: "\"") { out.append(String(piece[..<end])) }
            }
        }
        return out
    }

    /// MPD attributes that say when an answer was made, not what the stream is.
    private static let answerTimeAttributes: Set<String> = ["publishTime"]

    private static func withoutAnswerTime(_ e: XMLElement) -> XMLElement {
        var out = e
        if e.name == "MPD" { out.attributes = e.attributes.filter { !answerTimeAttributes.contains($0.name) } }
        return out
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
}
