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
    /// copy the run read (`Prefetcher.changedDuringRun`): the same under `rules`, or, for an
    /// MPD, once what names no member is put aside: the attributes that carry the answer's own
    /// time (`publishTime`, which a just-in-time packager stamps on every answer of a static
    /// MPD) and the query of a URL that names no member (`Location`, a
    /// `moreInformationURL`, an event's or a tracking URL: hostile probe h10a, F10). A member
    /// URL is compared as its key under `rules` and nothing looser: a query the key rules keep
    /// (a cache-busting `?v=2`, or a signed-URL CDN's token the rules do not strip) is another
    /// encode (h10a, F1-F12: no answer from the origin tells a token from a version soundly;
    /// the key rules are the user's word for which parameters are tokens). A changed path,
    /// duration, segment list, Representation, bandwidth, codec or key is another encode.
    static func sameEncode(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> Bool {
        if sameUnderKeyRules(new, old, mpd: mpd, rules: rules) { return true }
        guard mpd else { return HLSPlaylist.sameUnderKeyRules(withoutSessionDataQueries(new), withoutSessionDataQueries(old), rules: rules) }
        guard let a = try? XMLTree.parse(new), let b = try? XMLTree.parse(old) else { return false }
        return keyed(withoutAnswerTime(a), rules, structural: true) == keyed(withoutAnswerTime(b), rules, structural: true)
    }

    /// A playlist's `EXT-X-SESSION-DATA` lines name no member: their `URI="..."` without its
    /// query (a session id signed anew on each answer is no re-encode).
    private static func withoutSessionDataQueries(_ bytes: [UInt8]) -> [UInt8] {
        guard let text = String(validating: bytes, as: UTF8.self), text.contains("#EXT-X-SESSION-DATA:") else { return bytes }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { raw -> String in
            guard raw.hasPrefix("#EXT-X-SESSION-DATA:"), let r = raw.firstRange(of: "URI=\""),
                  let close = raw[r.upperBound...].firstIndex(of: "\"") else { return String(raw) }
            return String(raw[..<r.upperBound]) + withoutQuery(String(raw[r.upperBound..<close])) + String(raw[close...])
        }
        return Array(lines.joined(separator: "\n").utf8)
    }

    /// `outcome`, the origin's answer about the cached manifest `cached` (answered at
    /// `cachedBase`), as a run takes it: the one rule of the start of a run, a new choice and
    /// the end check. An answer in other bytes that is the same encode (`sameEncode`) but cannot
    /// take the cached copy's place (its `publishTime`, a query of a URL that names no member;
    /// it was answered from another folder, a per-answer redirect) is `.unchanged`: the cached
    /// copy stays, and every member it names. One the same under the key rules from the same
    /// folder stays `.changed`, to be stored in the cached copy's place (`Prefetcher.stands`);
    /// any other is another encode.
    static func judged(_ outcome: Outcome, cached: [UInt8], cachedBase: String, mpd: Bool, rules: CacheKeyRules) -> Outcome {
        guard case .changed(let body, _, _, let finalURL) = outcome else { return outcome }
        let moved = finalURL.map { folder(of: $0) != folder(of: cachedBase) } ?? false
        if !moved && sameUnderKeyRules(body, cached, mpd: mpd, rules: rules) { return outcome }
        return sameEncode(body, cached, mpd: mpd, rules: rules) ? .unchanged : outcome
    }

    /// When `new` is another encode than `old` (`sameEncode`) only by the query parameters of
    /// its member URLs that `rules` keep, and each of them looks like a token (its differing
    /// values `tokenLength` characters or more on both sides: a signature, an expiry time):
    /// their names, sorted (what `key-strip-param` would have to strip for the two to be one: the
    /// hint of the error). Empty when anything else differs too, or when a short value differs (a
    /// `v=2`: a version, and stripping it would make a re-encode look the same: hostile probe h10c, F5).
    static func keptQueryParameters(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> [String] {
        var loose = rules
        loose.ignoreQuery = true
        guard !sameEncode(new, old, mpd: mpd, rules: rules), sameEncode(new, old, mpd: mpd, rules: loose),
              let a = urls(in: new, mpd: mpd), let b = urls(in: old, mpd: mpd), a.count == b.count else { return [] }
        var names = Set<String>()
        for (n, o) in zip(a, b) {
            let (nq, oq) = (parameters(rules.normaliseText(n)), parameters(rules.normaliseText(o)))
            for name in Set(nq.keys).union(oq.keys) where nq[name] != oq[name] {
                let values = (nq[name] ?? [""]) + (oq[name] ?? [""])
                guard values.allSatisfy({ $0.count - name.count - 1 >= tokenLength }) else { return [] }
                names.insert(name)
            }
        }
        return names.sorted()
    }

    /// The words naming the key rule that would make `new` and `old` one encode, when token-like
    /// query parameters the key rules keep are all they differ in (`keptQueryParameters`): what
    /// prefetch's note and serve's log line add; nil otherwise.
    static func tokenHint(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules) -> String? {
        let differing = keptQueryParameters(new, old, mpd: mpd, rules: rules)
        return differing.isEmpty ? nil : PrefetchError.onlyParametersDiffer(differing, stripped: rules.stripParameters)
    }

    /// The shortest value a query parameter named in the hint has.
    static let tokenLength = 8

    /// A URL's query parameters, each name with its values in order.
    private static func parameters(_ url: String) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for item in split(url).1.split(separator: "&") {
            let name = String(item.prefix { $0 != "=" })
            out[name, default: []].append(String(item))
        }
        return out
    }

    /// `url` before its `?`, and its query (empty when none).
    static func split(_ url: String) -> (String, String) {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
    }

    /// The member URLs a manifest names, in document order (an MPD's URL attributes, by name
    /// within an element, and BaseURL texts; a playlist's URI lines and `URI=` attributes but
    /// `EXT-X-SESSION-DATA`'s).
    private static func urls(in bytes: [UInt8], mpd: Bool) -> [String]? {
        if mpd {
            guard let tree = try? XMLTree.parse(bytes) else { return nil }
            var out: [String] = []
            func walk(_ e: XMLElement) {
                for a in e.attributes.sorted(by: { $0.name < $1.name }) where urlAttributes.contains(a.name) { out.append(a.value) }
                if e.name == "BaseURL" { out.append(e.text.trimming(.whitespaces)) }
                e.children.forEach(walk)
            }
            walk(tree)
            return out
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var out: [String] = []
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = String(raw).trimming(.whitespaces)
            if line.isEmpty || line.hasPrefix("#EXT-X-SESSION-DATA:") { continue }
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
    /// Initialization@sourceURL, RepresentationIndex@sourceURL, xlink:href; and BaseURL's text
    /// (`Location` names the MPD, no member: under the key rules, its query put aside by `sameEncode`).
    private static let urlAttributes: Set<String> = ["media", "initialization", "index", "sourceURL", "href"]

    /// `e` with its URLs under `rules` and its attributes in one order. `structural`: what
    /// names no member (any other attribute's or element's value that reads as a URL with a
    /// query, `Location`'s included) without its query.
    private static func keyed(_ e: XMLElement, _ rules: CacheKeyRules, structural: Bool = false) -> XMLElement {
        var out = e
        out.attributes = e.attributes.map { a in
            var a = a
            if urlAttributes.contains(a.name) { a.value = rules.normaliseText(a.value) } else if structural { a.value = withoutQuery(a.value) }
            return a
        }.sorted { ($0.namespace ?? "", $0.name) < ($1.namespace ?? "", $1.name) }
        if e.name == "BaseURL" || (e.name == "Location" && !structural) {
            out.text = rules.normaliseText(e.text.trimming(.whitespaces))
        } else if structural {
            out.text = withoutQuery(e.text.trimming(.whitespaces))
        }
        out.children = e.children.map { keyed($0, rules, structural: structural) }
        return out
    }

    /// `value` without its query when it reads as a URL (one word, a `?` after a path or a
    /// host); else as it is.
    private static func withoutQuery(_ value: String) -> String {
        guard let mark = value.firstIndex(of: "?"), !value.contains(where: \.isWhitespace) else { return value }
        let before = value[..<mark]
        guard before.contains("/") || before.contains(".") else { return value }
        return String(before)
    }
}
