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
/// `Location` and `xlink:href` become `/v/` proxy URLs. A reference that can only resolve off
/// the proxy (a scheme other than http or https, `data:`, `javascript:`, a `$RepresentationID$`
/// that makes one: `Reach.offProxy`) takes out the element it is in: a Representation, an
/// AdaptationSet, a Period (at the MPD level, every Period), a Location, an element naming it by
/// `xlink:href`. Everything else (namespaces, unknown elements and attributes, comments) is
/// written back as it was.
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
                    if HLSURI.isHTTP(target) { e.setText(ProxyURL.make(origin: target, base: proxy)) } else { e.remove() }
                }
            }
            hrefs(root, base: url)
            let (mpdBase, baseOff) = level(root, parent: url, insertIfNone: true)
            guard !baseOff, !references(root, base: mpdBase) else {
                for period in root.children("Period") { period.remove() }
                return
            }
            for period in root.children("Period") where !self.period(period, base: mpdBase) { period.remove() }
        }
    }

    /// Elements an MPD may name by `xlink:href` (ISO/IEC 23009-1 §5.5), whose remote document
    /// serve answers rewritten (`rewriteRemote`).
    public static let remoteElements: Set<String> = ["Period", "AdaptationSet", "EventStream", "SegmentList"]

    /// Whether the first bytes are a remote element's document: its root one of `remoteElements`,
    /// its start tag naming the DASH namespace.
    public static func looksLikeRemoteElement(_ firstBytes: [UInt8]) -> Bool {
        guard let (name, tag) = XMLRoot.startTag(firstBytes) else { return false }
        return remoteElements.contains(String(name.split(separator: ":").last ?? "")) && tag.contains(MPD.namespace)
    }

    /// A remote element (a Period, AdaptationSet or SegmentList an MPD names by `xlink:href`), its
    /// URLs rewritten as the MPD's are, with `url` (where it was fetched) as its base. Players put
    /// it in the MPD in place of the element naming it, so a relative reference or BaseURL that
    /// stays under the MPD's proxied base is left as it is; an absolute, `/`-rooted or climbing one
    /// is made absolute to the proxy (resolved against `url`, the only base the proxy knows of it).
    public func rewriteRemote(_ bytes: [UInt8]) throws(XMLTree.Error) -> [UInt8] {
        try XMLTree.edit(bytes) { root in
            guard root.namespace == MPD.namespace else { return }
            hrefs(root, base: url)
            // A root that can only resolve off the proxy keeps nothing a player could fetch.
            var off = false
            switch root.name {
            case "Period": off = !period(root, base: url, remote: true)
            case "AdaptationSet": off = !adaptationSet(root, base: url, inherited: [:], remote: true)
            case "SegmentList":
                for c in root.children where c.namespace == MPD.namespace {
                    for a in c.name == "SegmentURL" ? ["media", "index"] : ["sourceURL"] {
                        guard let v = c.attribute(a) else { continue }
                        switch reach(v, base: url) {
                        case .stays: break
                        case .proxied(let fixed): c.setAttribute(a, fixed)
                        case .offProxy: off = true
                        }
                    }
                }
            default: break
            }
            if off { for c in root.children { c.remove() } }
        }
    }

    /// Whether the Period keeps anything a player can fetch through the proxy (false: the caller
    /// takes it out). An AdaptationSet or Representation that cannot is taken out here.
    private func period(_ period: XMLEditNode, base: String, remote: Bool = false) -> Bool {
        let (periodBase, baseOff) = level(period, parent: base, remote: remote)
        // Read before `references` edits them: what each Representation inherits.
        let periodTemplates = templateURLs(period, base: periodBase, over: [:])
        guard !baseOff, !references(period, base: periodBase) else { return false }
        for set in period.children("AdaptationSet") where !adaptationSet(set, base: periodBase, inherited: periodTemplates, remote: remote) {
            set.remove()
        }
        return true
    }

    private func adaptationSet(_ set: XMLEditNode, base: String, inherited: [String: (value: String, base: String)], remote: Bool) -> Bool {
        let (setBase, baseOff) = level(set, parent: base, remote: remote)
        let setTemplates = templateURLs(set, base: setBase, over: inherited)
        guard !baseOff, !references(set, base: setBase) else { return false }
        for rep in set.children("Representation") {
            let (repBase, repOff) = level(rep, parent: setBase, remote: remote)
            if repOff || !representationTemplate(rep, inherited: setTemplates, base: repBase) || references(rep, base: repBase, templates: false) {
                rep.remove()
            }
        }
        return true
    }

    /// The element's BaseURLs rewritten; the base in force inside it (its first BaseURL resolved),
    /// and whether one of them can only resolve off the proxy (a scheme other than http(s)).
    /// `remote`: in a remote element, only those that would not stay under the MPD's proxied base.
    private func level(_ e: XMLEditNode, parent: String, insertIfNone: Bool = false, remote: Bool = false) -> (base: String, offProxy: Bool) {
        let bases = e.children("BaseURL")
        var first: String?, off = false
        for b in bases {
            let text = b.text.trimming(.whitespacesAndNewlines)
            let resolved = HLSURI.resolve(text, against: parent)
            if first == nil { first = resolved }
            if remote {
                switch reach(text, base: parent) {
                case .stays: break
                case .proxied(let proxied): b.setText(proxied)
                case .offProxy: off = true
                }
            } else if let proxied = folderForm(resolved) { b.setText(proxied) } else { off = true }
        }
        if bases.isEmpty && insertIfNone, let proxied = folderForm(HLSURI.resolve("./", against: parent)) {
            // After ProgramInformation, where the schema has BaseURL.
            let before = e.children.first { $0.name != "ProgramInformation" }
            e.insertChild("BaseURL", text: proxied, before: before)
        }
        return (first ?? parent, off)
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

    static let templateAttributes = ["media", "initialization", "index", "bitstreamSwitching"]

    /// The URL attributes of `e`'s SegmentTemplate as the document has them, each with the base
    /// in force where it is written, over those `e` inherits (ISO/IEC 23009-1 §5.3.9.1: per attribute).
    private func templateURLs(_ e: XMLEditNode, base: String, over inherited: [String: (value: String, base: String)]) -> [String: (value: String, base: String)] {
        var out = inherited
        guard let t = e.children("SegmentTemplate").first else { return out }
        for a in Self.templateAttributes {
            if let v = t.attribute(a), v != "true", v != "false" { out[a] = (v, base) }
        }
        return out
    }

    /// The Representation's template URLs, its own and those it inherits, as it resolves them:
    /// against its own base, which may not be the base of the level that wrote them (a
    /// Representation with a BaseURL of its own under an AdaptationSet's template), and with its
    /// id in place of `$RepresentationID$` when that id is not a plain name (an absolute URL, a
    /// `//host`, a `..`: the player would form a URL off the proxy from it). An inherited one made
    /// absolute at its own level is pushed down into the Representation's own SegmentTemplate
    /// (made when it has none), fixed against the Representation's base. False when one of them
    /// can only resolve off the proxy (an id `javascript:x`, `data:...`, `mailto:a@b`, `C:\w`,
    /// or one that makes the template's first segment a scheme): the caller takes the
    /// Representation out, never writes such a URL.
    private func representationTemplate(_ rep: XMLEditNode, inherited: [String: (value: String, base: String)], base: String) -> Bool {
        let id = rep.attribute("id") ?? ""
        var own = rep.children("SegmentTemplate").first
        for a in Self.templateAttributes {
            let mine = own?.attribute(a).flatMap { $0 == "true" || $0 == "false" ? nil : $0 }
            guard let v = mine ?? inherited[a]?.value else { continue }
            let named = Self.withRepresentationID(v, id: id)
            let value: String?
            switch reach(named, base: base) {
            case .offProxy: return false
            case .proxied(let fixed): value = fixed
            case .stays: value = named != v ? named : nil
            }
            if mine == nil, let from = inherited[a], named == v, value == fixed(v, base: from.base) { continue }  // the parent's, as written there
            guard let value else { continue }
            if own == nil { own = rep.insertChild("SegmentTemplate", text: "", before: nil) }
            own?.setAttribute(a, value)
        }
        return true
    }

    /// `template` with each `$RepresentationID$` replaced by `id` (its `$` written `$$`), when the id
    /// is not a plain name: anything but letters, digits and `-._~!&'()*+,;=@` (no `/`, `:`, `%`, `?`,
    /// `#`, `\`), or `.`, `..`, empty. A plain one is left for the player to substitute.
    static func withRepresentationID(_ template: String, id: String) -> String {
        let plain = !id.isEmpty && id != "." && id != ".." && id.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-._~!&'()*+,;=@".unicodeScalars.contains($0)
        }
        let pieces = template.split(separator: "$", omittingEmptySubsequences: false)
        guard !plain, pieces.count % 2 == 1, pieces.enumerated().contains(where: { $0.offset % 2 == 1 && $0.element == "RepresentationID" }) else { return template }
        var out = ""
        for (i, p) in pieces.enumerated() {
            if i % 2 == 0 { out += p } else if p == "RepresentationID" { out += id.replacing("$", with: "$$") } else { out += "$" + p + "$" }
        }
        return out
    }

    /// The segment descriptions directly in `e`: each URL attribute that would not resolve to the
    /// proxy through the rewritten BaseURLs, made absolute to it (a Representation's template
    /// attributes: `representationTemplate`). True when one can only resolve off the proxy: the
    /// caller takes `e` out.
    private func references(_ e: XMLEditNode, base: String, templates: Bool = true) -> Bool {
        var off = false
        func apply(_ node: XMLEditNode, _ a: String, _ v: String) {
            switch reach(v, base: base) {
            case .stays: break
            case .proxied(let fixed): node.setAttribute(a, fixed)
            case .offProxy: off = true
            }
        }
        for t in e.children("SegmentTemplate") where templates {
            for a in Self.templateAttributes {
                guard let v = t.attribute(a), v != "true", v != "false" else { continue }
                apply(t, a, v)
            }
        }
        for kind in ["SegmentTemplate", "SegmentList", "SegmentBase"] {
            for s in e.children(kind) {
                for c in s.children where c.namespace == MPD.namespace {
                    let names = c.name == "SegmentURL" ? ["media", "index"]
                        : ["Initialization", "RepresentationIndex", "BitstreamSwitching"].contains(c.name) ? ["sourceURL"] : []
                    for a in names {
                        guard let v = c.attribute(a) else { continue }
                        apply(c, a, v)
                    }
                }
            }
        }
        return off
    }

    /// What the rewrite does with a reference (`reach`).
    enum Reach: Equatable {
        /// A player's relative resolution against the rewritten BaseURL names it exactly: left as it is.
        case stays
        /// Made absolute to the proxy.
        case proxied(String)
        /// It names something no proxy URL stands for (a scheme other than http or https, or a
        /// base that has one): never written; the element it is in is taken out.
        case offProxy
    }

    /// `reference` made absolute to the proxy when a player's relative resolution against the
    /// rewritten BaseURL would not name it exactly; nil when it does (left as it is) or cannot
    /// (`reach` says which).
    func fixed(_ reference: String, base: String) -> String? {
        if case .proxied(let s) = reach(reference, base: base) { return s }
        return nil
    }

    func reach(_ reference: String, base: String) -> Reach {
        let r = reference.trimming(.whitespacesAndNewlines)
        let parts = HLSURI.Parts(r)
        let segments = parts.path.split(separator: "/", omittingEmptySubsequences: false)
        // A `%` of an identifier's format (`$Number%05d$`) is the player's, not the URL's.
        let outside = r.split(separator: "$", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 0 }.map(\.element).joined()
        let escapes = parts.scheme != nil || parts.authority != nil || parts.path.hasPrefix("/") || outside.contains("%") || r.contains("?")
            || r.contains("\\") || segments.contains { $0 == "." || $0 == ".." } || r.isEmpty
        // A scheme of its own other than http(s) (`data:`, `javascript:`, `init-streamhttp:`):
        // what it names is no origin URL the proxy can stand for.
        if let scheme = parts.scheme?.lowercased(), scheme != "http", scheme != "https" { return .offProxy }
        guard HLSURI.isHTTP(base) else { return .offProxy }
        guard escapes else { return .stays }
        // The part before the first identifier (or query) is fixed: resolved, it is the folder.
        let limit = r.firstIndex { $0 == "$" || $0 == "?" || $0 == "#" } ?? r.endIndex
        let slash = r[..<limit].lastIndex(of: "/")
        let folder = HLSURI.resolve(slash.map { String(r[...$0]) } ?? "./", against: base)
        guard HLSURI.isHTTP(folder), folder.hasSuffix("/") else { return .offProxy }
        let rest = slash.map { String(r[r.index(after: $0)...]) } ?? r
        return .proxied(ProxyURL.makeFolder(folder, base: proxy) + ProxyURL.folderReference(rest))
    }

    /// `xlink:href` of remote elements, as `/v/` proxy URLs; an element whose href names anything
    /// but http(s) (`file:`, `data:`) is taken out (the root keeps itself, without the href).
    private func hrefs(_ e: XMLEditNode, base: String, isRoot: Bool = true) {
        if let href = e.attribute("href", namespace: Self.xlink), href.trimming(.whitespacesAndNewlines) != "urn:mpeg:dash:resolve-to-zero:2013" {
            let target = HLSURI.resolve(href.trimming(.whitespacesAndNewlines), against: base)
            if HLSURI.isHTTP(target) {
                e.setAttribute("href", namespace: Self.xlink, ProxyURL.make(origin: target, base: proxy))
            } else if isRoot {
                e.removeAttribute("href", namespace: Self.xlink)
            } else {
                e.remove()
                return
            }
        }
        for c in e.children { hrefs(c, base: base, isRoot: false) }
    }
}
