#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Rewrites a playlist's text so a player asks the proxy for everything it names: every URI line
/// and every `URI="..."` attribute of every tag (EXT-X-KEY, EXT-X-MAP, EXT-X-MEDIA,
/// EXT-X-I-FRAME-STREAM-INF, EXT-X-SESSION-KEY, EXT-X-SESSION-DATA, EXT-X-PRELOAD-HINT,
/// EXT-X-RENDITION-REPORT, and any other, known or not) becomes `proxy(absolute URL)`, the URL
/// resolved against the playlist's final URL (RFC 8216 §4.1). Only `skd://` and `data:` URIs of
/// attributes stay as written (the player's key handling; nothing is fetched from them); any
/// other URI that does not resolve to http(s) (`file:`, `javascript:`, ...) goes to the proxy
/// too, which refuses it, so a player never follows a playlist anywhere but the proxy. A tag
/// whose attribute list does not parse and that still names a URI the rewriter cannot find
/// (an unterminated quote, spaces around `=`) is dropped, for the same reason.
///
/// Every other byte stays as written (§4.2: quoting, attribute order, `BYTERANGE="n@o"` quoted,
/// line ends CRLF or LF, a BOM, comments, unknown tags); EXT-X-MEDIA-SEQUENCE is never touched,
/// since an AES-128 key without IV uses the sequence number (§5.2). A tag whose attribute list
/// does not parse (§4.2) and EXTINF titles are left as written.
///
/// `keep` drops what a master lists but the cache does not hold (an offline master, an export):
/// an EXT-X-STREAM-INF line together with its URI line, an EXT-X-I-FRAME-STREAM-INF line, and
/// an EXT-X-MEDIA line with a URI, when `keep` says no for the resolved URL. A group whose every
/// rendition went is no longer named by the variants kept (their AUDIO, VIDEO or SUBTITLES
/// attribute goes with it: §4.3.4.2 wants a group named to exist).
public struct HLSRewriter: Sendable {
    /// The playlist's final URL, after redirects.
    public var url: String
    /// The URL a player should ask for, given the origin's absolute URL (`ProxyURL.make`) and
    /// what the tag naming it says it is (for its file name).
    public var proxy: @Sendable (String, HLSURIContext) -> String
    /// Whether to keep the variant or I-frame playlist at this absolute URL.
    public var keep: @Sendable (String) -> Bool

    public init(url: String, proxy: @escaping @Sendable (String) -> String, keep: @escaping @Sendable (String) -> Bool = { _ in true }) {
        self.init(url: url, naming: { u, _ in proxy(u) }, keep: keep)
    }

    public init(url: String, naming proxy: @escaping @Sendable (String, HLSURIContext) -> String, keep: @escaping @Sendable (String) -> Bool = { _ in true }) {
        self.url = url
        self.proxy = proxy
        self.keep = keep
    }

    public func rewrite(_ text: String) -> String {
        let lines = HLSPlaylist.Line.split(text)
        let (dropped, emptied) = droppedLinesAndGroups(lines)
        var out = text.hasPrefix("\u{FEFF}") ? "\u{FEFF}" : ""
        out.reserveCapacity(text.utf8.count * 2)
        // What a URI line names: a media playlist in a master, else a segment (fMP4 once an
        // EXT-X-MAP is in force).
        let master = lines.contains { $0.tag.map { ["EXT-X-STREAM-INF", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-MEDIA"].contains(String($0.name)) } ?? false }
        var fragmented = false, encrypted = false
        for (i, line) in lines.enumerated() {
            if dropped.contains(i) { continue }
            if line.isURI {
                out += rewriteURILine(line.text, context: master ? .playlist : .segment(fragmented: fragmented, encrypted: encrypted))
            } else if let (name, value) = line.tag, name != "EXTINF", let value {
                if name == "EXT-X-MAP" { fragmented = true }
                if name == "EXT-X-KEY" { encrypted = (try? HLSAttributeList(parsing: value))?.enumerated("METHOD") == "AES-128" }
                if name == "EXT-X-STREAM-INF", !emptied.isEmpty {
                    out += withoutEmptiedGroups(line.text, value: value, emptied: emptied) + line.terminator
                    continue
                }
                out += rewriteAttributes(line.text, value: value, context: Self.context(tag: String(name), value: value, fragmented: fragmented, encrypted: encrypted))
            } else {
                out += line.text
            }
            out += line.terminator
        }
        return out
    }

    /// Indices of the lines `keep` drops: a variant's EXT-X-STREAM-INF and its URI line, an
    /// EXT-X-I-FRAME-STREAM-INF, an EXT-X-MEDIA with a URI.
    func droppedLines(_ lines: [HLSPlaylist.Line]) -> Set<Int> {
        droppedLinesAndGroups(lines).lines
    }

    /// `droppedLines`, and the rendition groups (`TYPE` and `GROUP-ID`, upper-cased type) left
    /// with no rendition.
    func droppedLinesAndGroups(_ lines: [HLSPlaylist.Line]) -> (lines: Set<Int>, emptied: Set<String>) {
        var dropped = Set<Int>()
        var kept = Set<String>(), gone = Set<String>()
        for (i, line) in lines.enumerated() {
            guard let (name, value) = line.tag else { continue }
            if name == "EXT-X-MEDIA", let value, let list = try? HLSAttributeList(parsing: value),
               let type = list.enumerated("TYPE"), let group = list.string("GROUP-ID") {
                let id = type + " " + group
                if let uri = list.string("URI"), !keep(HLSURI.resolve(uri, against: url)) {
                    dropped.insert(i)
                    gone.insert(id)
                } else {
                    kept.insert(id)
                }
                continue
            }
            if name == "EXT-X-STREAM-INF" {
                // Its URI is the next URI line, unless another tag of the kind comes first.
                guard let j = lines[(i + 1)...].firstIndex(where: { $0.isURI || $0.tag?.name == "EXT-X-STREAM-INF" }),
                      lines[j].isURI else { continue }
                if !keep(HLSURI.resolve(lines[j].text.trimmingBlanks, against: url)) {
                    dropped.insert(i)
                    dropped.insert(j)
                }
            } else if name == "EXT-X-I-FRAME-STREAM-INF", let value,
                      let uri = (try? HLSAttributeList(parsing: value))?.string("URI"),
                      !keep(HLSURI.resolve(uri, against: url)) {
                dropped.insert(i)
            }
        }
        return (dropped, gone.subtracting(kept))
    }

    /// An EXT-X-STREAM-INF's text without the group attributes (AUDIO, VIDEO, SUBTITLES) that
    /// name an emptied group; every other byte as written.
    func withoutEmptiedGroups(_ text: Substring, value: Substring, emptied: Set<String>) -> String {
        guard let list = try? HLSAttributeList(parsing: value) else { return String(text) }
        var out = String(text)
        let offset = text.distance(from: text.startIndex, to: value.startIndex)
        // Last first, so the earlier offsets hold.
        for (k, a) in list.attributes.enumerated().reversed() where ["AUDIO", "VIDEO", "SUBTITLES"].contains(a.name) && emptied.contains(a.name + " " + a.value) {
            let valueStart = value.distance(from: value.startIndex, to: a.valueRange.lowerBound)
            let valueEnd = value.distance(from: value.startIndex, to: a.valueRange.upperBound) + (a.isQuoted ? 1 : 0)
            var start = valueStart - (a.isQuoted ? 1 : 0) - a.name.utf8.count - 1
            var end = valueEnd
            if k > 0 {
                // From the comma after the previous attribute.
                let before = value[..<value.index(value.startIndex, offsetBy: start)]
                if let comma = before.lastIndex(of: ",") { start = value.distance(from: value.startIndex, to: comma) }
            } else if let comma = value[value.index(value.startIndex, offsetBy: end)...].firstIndex(of: ",") {
                end = value.distance(from: value.startIndex, to: comma) + 1
            }
            let lo = out.index(out.startIndex, offsetBy: offset + start), hi = out.index(out.startIndex, offsetBy: offset + end)
            out.replaceSubrange(lo..<hi, with: "")
        }
        return out
    }

    /// What the `URI` attribute of the tag `name` names.
    static func context(tag name: String, value: Substring, fragmented: Bool, encrypted: Bool) -> HLSURIContext {
        switch name {
        case "EXT-X-KEY", "EXT-X-SESSION-KEY": return .key
        case "EXT-X-MAP": return .initSection(encrypted: encrypted)
        case "EXT-X-MEDIA", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-RENDITION-REPORT": return .playlist
        case "EXT-X-PART": return .segment(fragmented: fragmented, encrypted: encrypted)
        case "EXT-X-PRELOAD-HINT":
            let type = (try? HLSAttributeList(parsing: value))?.enumerated("TYPE")
            return type == "MAP" ? .initSection(encrypted: encrypted) : .segment(fragmented: fragmented, encrypted: encrypted)
        default: return .other
        }
    }

    /// The URI between any spaces around it, replaced.
    func rewriteURILine(_ text: Substring, context: HLSURIContext) -> String {
        let u = text.utf8
        guard let first = u.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
              let last = u.lastIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return String(text) }
        let end = u.index(after: last)
        guard let proxied = proxied(String(text[first..<end]), attribute: false, context: context) else { return String(text) }
        return String(text[..<first]) + proxied + String(text[end...])
    }

    /// The value of the `URI` attribute replaced, inside its quotes; the rest as written.
    func rewriteAttributes(_ text: Substring, value: Substring, context: HLSURIContext) -> String {
        if let list = try? HLSAttributeList(parsing: value), let uri = list["URI"] {
            guard let proxied = proxied(uri.value, attribute: true, context: context) else { return String(text) }
            let r = uri.valueRange
            return String(text[..<r.lowerBound]) + proxied + String(text[r.upperBound...])
        }
        // An attribute list this parser refuses (a repeated name, an empty value) that players
        // still accept: no quoted URI="..." of it may be left pointing at the origin.
        var out = String(text)
        let offset = text.distance(from: text.startIndex, to: value.startIndex)
        let quoted = Self.quotedURIs(in: value)
        // Whatever else of the value could be read as a URI attribute: the line goes.
        var rest = String(value)
        for r in quoted.reversed() {
            let lo = rest.index(rest.startIndex, offsetBy: value.distance(from: value.startIndex, to: r.lowerBound))
            let hi = rest.index(rest.startIndex, offsetBy: value.distance(from: value.startIndex, to: r.upperBound))
            rest.replaceSubrange(lo..<hi, with: "")
        }
        let unread = rest.uppercased().replacing("URI=\"\"", with: "")
        if Self.hasURIAssignment(unread) { return "" }
        for r in quoted.reversed() {
            guard let proxied = proxied(String(value[r]), attribute: true, context: context) else { continue }
            let lo = out.index(out.startIndex, offsetBy: offset + value.distance(from: value.startIndex, to: r.lowerBound))
            let hi = out.index(out.startIndex, offsetBy: offset + value.distance(from: value.startIndex, to: r.upperBound))
            out.replaceSubrange(lo..<hi, with: proxied)
        }
        return out
    }

    /// `text` holds `URI`, white space (Unicode's White_Space) and `=`: the regular expression
    /// `URI\s*=` of Foundation, which needs ICU.
    static func hasURIAssignment(_ text: String) -> Bool {
        let s = Array(text.unicodeScalars)
        var i = 0
        while i + 2 < s.count {
            if s[i] == "U" && s[i + 1] == "R" && s[i + 2] == "I" {
                var j = i + 3
                while j < s.count && s[j].properties.isWhitespace { j += 1 }
                if j < s.count && s[j] == "=" { return true }
            }
            i += 1
        }
        return false
    }

    /// The ranges of the values of quoted `URI="..."` attributes (at the start or after a comma).
    static func quotedURIs(in value: Substring) -> [Range<Substring.Index>] {
        var found: [Range<Substring.Index>] = []
        var search = value.startIndex
        while let m = value[search...].firstRange(of: "URI=\"") {
            let atStart = m.lowerBound == value.startIndex || value[value.index(before: m.lowerBound)] == ","
            guard let close = value[m.upperBound...].firstIndex(of: "\"") else { break }
            if atStart { found.append(m.upperBound..<close) }
            search = value.index(after: close)
        }
        return found
    }

    /// The proxy's URL for a URI as written; nil for an attribute's `skd:` or `data:` URI (left
    /// as written). Any other URI goes to the proxy, http(s) or not (the proxy refuses what is not).
    func proxied(_ written: String, attribute: Bool, context: HLSURIContext) -> String? {
        let absolute = HLSURI.resolve(written, against: url)
        if HLSURI.isHTTP(absolute) { return proxy(absolute, context) }
        let scheme = absolute.prefix(while: { $0 != ":" }).lowercased()
        if attribute && (scheme == "skd" || scheme == "data") { return nil }
        return proxy(absolute, context)
    }
}
