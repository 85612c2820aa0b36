#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An MPD as serve answers it (Docs/dash.md, "Through serve"): every URL a player can form from
/// it resolves to the proxy. Each BaseURL (MPD, Period, AdaptationSet, Representation level) is
/// resolved as prefetch resolves it and written as the proxy's folder form of its folder
/// (`ProxyURL.makeFolder`) plus its last segment, and an MPD without one gets one for the MPD's
/// own folder, so a relative `SegmentTemplate@media` still substitutes `$Number$`/`$Time$` under a
/// proxied base. A reference a relative resolution would carry out of that folder or lose part of
/// (absolute, `/`-rooted, with `.`/`..` segments, a `%` or a `?`) is made absolute to the proxy
/// the same way: the part before its first template identifier is resolved to a folder.
/// `Location` and `xlink:href` become `/v/` proxy URLs. Everything else (namespaces, unknown
/// elements and attributes, comments) is written back as it was.
public struct DASHRewriter {
    /// The MPD's final URL (after redirects): the root of its BaseURLs.
    public var url: String
    /// The proxy's base (`http://127.0.0.1:8089`).
    public var proxy: String

    public init(url: String, proxy: String) {
        self.url = url
        self.proxy = proxy
    }

    static let xlink = "http://www.w3.org/1999/xlink"

    public func rewrite(_ bytes: [UInt8], edit: (XMLEditNode) -> Void = { _ in }) throws(XMLTree.Error) -> [UInt8] {
        try XMLTree.edit(bytes) { root in
            guard root.name == "MPD", root.namespace == MPD.namespace else { return }
            edit(root)
            for name in ["Location", "PatchLocation"] {
                for e in root.children(name) {
                    let target = HLSURI.resolve(e.text.trimming(.whitespacesAndNewlines), against: url)
                    if HLSURI.isHTTP(target) { e.setText(ProxyURL.make(origin: target, base: proxy)) }
                }
            }
            let mpdBase = level(root, parent: url, insertIfNone: true)
            references(root, base: mpdBase)
            for period in root.children("Period") {
                let periodBase = level(period, parent: mpdBase)
                references(period, base: periodBase)
                for set in period.children("AdaptationSet") {
                    let setBase = level(set, parent: periodBase)
                    references(set, base: setBase)
                    for rep in set.children("Representation") {
                        references(rep, base: level(rep, parent: setBase))
                    }
                }
            }
            hrefs(root, base: url)
        }
    }

    /// The element's BaseURLs rewritten; the base in force inside it (its first BaseURL resolved).
    private func level(_ e: XMLEditNode, parent: String, insertIfNone: Bool = false) -> String {
        let bases = e.children("BaseURL")
        var first: String?
        for b in bases {
            let resolved = HLSURI.resolve(b.text.trimming(.whitespacesAndNewlines), against: parent)
            if first == nil { first = resolved }
            if let proxied = folderForm(resolved) { b.setText(proxied) }
        }
        if bases.isEmpty && insertIfNone, let proxied = folderForm(HLSURI.resolve("./", against: parent)) {
            // After ProgramInformation, where the schema has BaseURL.
            let before = e.children.first { $0.name != "ProgramInformation" }
            e.insertChild("BaseURL", text: proxied, before: before)
        }
        return first ?? parent
    }

    /// The absolute http(s) `target` as the proxy's folder form: its folder, then the rest.
    func folderForm(_ target: String) -> String? {
        guard HLSURI.isHTTP(target) else { return nil }
        var parts = HLSURI.Parts(target)
        parts.fragment = nil
        if parts.path.isEmpty { parts.path = "/" }
        guard let slash = parts.path.lastIndex(of: "/") else { return nil }
        var rest = String(parts.path[parts.path.index(after: slash)...])
        if let q = parts.query { rest += "?" + q }
        parts.path = String(parts.path[...slash])
        parts.query = nil
        return ProxyURL.makeFolder(parts.recomposed, base: proxy) + ProxyURL.folderReference(rest)
    }

    /// The segment descriptions directly in `e`: each URL attribute that would not resolve to the
    /// proxy through the rewritten BaseURLs, made absolute to it.
    private func references(_ e: XMLEditNode, base: String) {
        for t in e.children("SegmentTemplate") {
            for a in ["media", "initialization", "index", "bitstreamSwitching"] {
                guard let v = t.attribute(a), v != "true", v != "false", let fixed = fixed(v, base: base) else { continue }
                t.setAttribute(a, fixed)
            }
        }
        for kind in ["SegmentTemplate", "SegmentList", "SegmentBase"] {
            for s in e.children(kind) {
                for c in s.children where c.namespace == MPD.namespace {
                    let names = c.name == "SegmentURL" ? ["media", "index"]
                        : ["Initialization", "RepresentationIndex", "BitstreamSwitching"].contains(c.name) ? ["sourceURL"] : []
                    for a in names {
                        guard let v = c.attribute(a), let fixed = fixed(v, base: base) else { continue }
                        c.setAttribute(a, fixed)
                    }
                }
            }
        }
    }

    /// `reference` made absolute to the proxy when a player's relative resolution against the
    /// rewritten BaseURL would not name it exactly; nil when it does (left as it is).
    func fixed(_ reference: String, base: String) -> String? {
        let r = reference.trimming(.whitespacesAndNewlines)
        let parts = HLSURI.Parts(r)
        let segments = parts.path.split(separator: "/", omittingEmptySubsequences: false)
        // A `%` of an identifier's format (`$Number%05d$`) is the player's, not the URL's.
        let outside = r.split(separator: "$", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 0 }.map(\.element).joined()
        let escapes = parts.scheme != nil || parts.authority != nil || parts.path.hasPrefix("/") || outside.contains("%") || r.contains("?")
            || r.contains("\\") || segments.contains { $0 == "." || $0 == ".." } || r.isEmpty
        guard escapes else { return nil }
        // The part before the first identifier (or query) is fixed: resolved, it is the folder.
        let limit = r.firstIndex { $0 == "$" || $0 == "?" || $0 == "#" } ?? r.endIndex
        let slash = r[..<limit].lastIndex(of: "/")
        let folder = HLSURI.resolve(slash.map { String(r[...$0]) } ?? "./", against: base)
        guard HLSURI.isHTTP(folder), folder.hasSuffix("/") else { return nil }
        let rest = slash.map { String(r[r.index(after: $0)...]) } ?? r
        return ProxyURL.makeFolder(folder, base: proxy) + ProxyURL.folderReference(rest)
    }

    /// `xlink:href` of remote elements, as `/v/` proxy URLs.
    private func hrefs(_ e: XMLEditNode, base: String) {
        if let href = e.attribute("href", namespace: Self.xlink), href != "urn:mpeg:dash:resolve-to-zero:2013" {
            let target = HLSURI.resolve(href, against: base)
            if HLSURI.isHTTP(target) { e.setAttribute("href", namespace: Self.xlink, ProxyURL.make(origin: target, base: proxy)) }
        }
        for c in e.children { hrefs(c, base: base) }
    }
}
