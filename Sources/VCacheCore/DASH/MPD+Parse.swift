#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reading an MPD (ISO/IEC 23009-1 §5.3) into `MPD`: inheritance resolved (a lower level's
/// SegmentBase, SegmentList or SegmentTemplate overrides per attribute and inherits the rest,
/// SegmentTimeline included, §5.3.9.1), BaseURLs resolved level by level (RFC 3986 §5.2, never
/// string joining) against the MPD's final URL.
extension MPD {
    public static let namespace = "urn:mpeg:dash:schema:mpd:2011"
    /// The largest MPD vcache reads (`XMLTree.Limits.maxBytes`).
    public static let maxBytes = XMLTree.Limits().maxBytes

    /// Whether the first bytes of a response, or its Content-Type, say it is an MPD: the type
    /// `application/dash+xml`, or an `<MPD` root element in the DASH namespace (never the URL).
    /// Whether a Content-Type is DASH's (any case, parameters ignored): a pure function of the
    /// text, remembered for the types asked last (serve asks it of every answer).
    static func isMPDType(_ contentType: String) -> Bool {
        recentTypes.answer(contentType) { $0.split(separator: ";").first?.trimming(.whitespaces).lowercased() == "application/dash+xml" }
    }
    private static let recentTypes = RecentAnswers<Bool>()

    public static func looksLikeMPD(firstBytes: [UInt8], contentType: String?) -> Bool {
        if let contentType, isMPDType(contentType) { return true }
        // Past a BOM, whitespace, the XML declaration and comments, the first element is the
        // root: `<MPD` or `<prefix:MPD`, whose start tag names the DASH namespace.
        guard let (name, tag) = XMLRoot.startTag(firstBytes), name == "MPD" || name.hasSuffix(":MPD") else { return false }
        return tag.contains(namespace)
    }

    /// `bytes` as an MPD answered from `url` (its final URL after redirects).
    /// `now` (seconds since 1970; nil: this machine's clock) counts a dynamic MPD's segments.
    /// `checkingTotal` false: the segment total is not counted (`checkSegmentTotal`), for a
    /// caller that counts it itself or plans every segment next anyway.
    public static func parse(_ bytes: [UInt8], url: String, limits: XMLTree.Limits = XMLTree.Limits(), now: Double? = nil,
                             checkingTotal: Bool = true) throws(DASHError) -> MPD {
        let root: XMLElement
        do { root = try XMLTree.parse(bytes, limits: limits) } catch { throw .xml(error) }
        guard root.name == "MPD" else { throw .notMPD("its root element is <\(root.name)>, not <MPD>") }
        guard root.namespace == namespace else {
            throw .notMPD("its <MPD> is in the namespace '\(root.namespace ?? "")', not '\(namespace)'")
        }
        var reader = Reader()
        let mpd = try reader.mpd(root, url: url)
        if checkingTotal { try mpd.checkSegmentTotal(now: now) }
        return mpd
    }

    /// Throws when all the Representations together name more than `DASHLimits.maxTotalSegments`
    /// (a dynamic MPD: those available at `now`, seconds since 1970), or (`perRepresentation`, as
    /// serve asks) a static one has a Representation past `DASHLimits.maxSegments`, which
    /// prefetch's planner refuses. Only counted: no URL is built.
    @discardableResult
    public func checkSegmentTotal(now: Double?, perRepresentation: Bool = false) throws(DASHError) -> Int {
        let live = isDynamic ? DASHLiveClock(now: now ?? Date().timeIntervalSince1970) : nil
        var total = 0
        for period in periods {
            for set in period.adaptationSets {
                for rep in set.representations {
                    let plan: DASHSegmentPlan
                    do {
                        plan = try rep.plan(periodDuration: period.duration, live: live.map { ($0, self, period.start) }, naming: false)
                    } catch .tooManySegments(let id, let limit) where perRepresentation && !isDynamic {
                        // A static MPD naming more than a Representation may: refused as prefetch refuses it.
                        throw .tooManySegments(representation: id, limit: limit)
                    } catch {
                        continue
                    }
                    total += plan.segments.count
                    if total > DASHLimits.maxTotalSegments { throw .tooManySegmentsInAll(limit: DASHLimits.maxTotalSegments) }
                }
            }
        }
        return total
    }

    /// The parse state: only what is inherited down the levels.
    private struct Reader {
        /// What was left out (`MPD.leftOut`).
        var leftOut: [String] = []

        func value<T>(_ e: XMLElement, _ name: String, _ read: (String) -> T?, _ why: String) throws(DASHError) -> T? {
            guard let s = e[attribute: name] else { return nil }
            guard let v = read(s) else { throw .badValue(element: e.name, attribute: name, value: s, why: why) }
            return v
        }
        func duration(_ e: XMLElement, _ name: String) throws(DASHError) -> Double? {
            try value(e, name, DASHValues.duration, "not a duration vcache reads (PnDTnHnMnS, no years or months)")
        }
        func unsigned(_ e: XMLElement, _ name: String) throws(DASHError) -> Int64? {
            try value(e, name, DASHValues.unsigned, "not a whole number from 0 to 2^63-1")
        }

        mutating func mpd(_ root: XMLElement, url: String) throws(DASHError) -> MPD {
            let type = root[attribute: "type"] ?? "static"
            guard type == "static" || type == "dynamic" else {
                throw .badValue(element: "MPD", attribute: "type", value: type, why: "neither static nor dynamic")
            }
            var mpd = MPD(url: url, isDynamic: type == "dynamic",
                          duration: try duration(root, "mediaPresentationDuration"),
                          minimumUpdatePeriod: try duration(root, "minimumUpdatePeriod"),
                          availabilityStartTime: try value(root, "availabilityStartTime", DASHValues.dateTime, "not an xs:dateTime"),
                          timeShiftBufferDepth: try duration(root, "timeShiftBufferDepth"),
                          periods: [])
            let bases = try baseURLs(root, parents: [url])
            let periods = root.children("Period")
            var starts: [Double?] = []
            var durations: [Double?] = []
            for (i, p) in periods.enumerated() {
                var start = try duration(p, "start")
                if start == nil {
                    if i == 0 { start = mpd.isDynamic ? nil : 0 }
                    else if let s = starts[i - 1], let d = durations[i - 1] { start = s + d }
                }
                starts.append(start)
                durations.append(try duration(p, "duration"))
            }
            for (i, p) in periods.enumerated() {
                guard let start = starts[i] ?? (mpd.isDynamic && i == 0 ? 0 : nil) else {
                    throw .badValue(element: "Period", attribute: "start", value: "", why: "Period \(i + 1) has no start and the one before has no duration")
                }
                var length = durations[i]
                if length == nil {
                    if i + 1 < periods.count, let next = starts[i + 1] { length = next - start }
                    else if i + 1 == periods.count, let total = mpd.duration { length = total - start }
                }
                if let l = length, !(l >= 0) { length = 0 }
                let pb = try baseURLs(p, parents: bases)
                var sets: [AdaptationSet] = []
                for (k, a) in p.children("AdaptationSet").enumerated() {
                    do {
                        sets.append(try adaptationSet(a, bases: pb, inherited: segmentNodes(p), period: i + 1))
                    } catch .badURL(let why) {
                        leftOut.append("AdaptationSet \(a[attribute: "id"].map { "'\($0)'" } ?? String(k + 1)) in Period \(i + 1) left out: \(why)")
                    }
                }
                mpd.periods.append(Period(id: p[attribute: "id"], start: start, duration: length, adaptationSets: sets))
            }
            mpd.leftOut = leftOut
            return mpd
        }

        /// The BaseURLs of `e`, each resolved against the first of its parent's; none: the parent's.
        func baseURLs(_ e: XMLElement, parents: [String]) throws(DASHError) -> [String] {
            let own = e.children("BaseURL").map { $0.text.trimming(.whitespacesAndNewlines) }
            guard !own.isEmpty else { return parents }
            let parent = parents.first ?? ""
            var out: [String] = []
            for b in own {
                let resolved = HLSURI.resolve(b, against: parent)
                guard HLSURI.isHTTP(resolved) else { throw .badURL("BaseURL '\(b.prefix(80))' resolves to '\(resolved.prefix(80))', not an http or https URL") }
                out.append(resolved)
            }
            return out
        }

        mutating func adaptationSet(_ a: XMLElement, bases: [String], inherited: [String: SegmentNode], period: Int) throws(DASHError) -> AdaptationSet {
            let ab = try baseURLs(a, parents: bases)
            let nodes = segmentNodes(a, over: inherited)
            var reps: [Representation] = []
            var protected = !a.children("ContentProtection").isEmpty
            for r in a.children("Representation") {
                if !r.children("ContentProtection").isEmpty { protected = true }
                do {
                    reps.append(try representation(r, set: a, bases: ab, nodes: segmentNodes(r, over: nodes)))
                } catch .badURL(let why) {
                    // No URL of it can be fetched (nor proxied): left out, as serve leaves it out.
                    leftOut.append("Representation '\(r[attribute: "id"] ?? "")' in Period \(period) left out: \(why)")
                }
            }
            let skipped = a.children("EssentialProperty").contains { p in
                !Self.harmlessEssential.contains(p[attribute: "schemeIdUri"] ?? "")
            }
            let roles = a.children("Role").filter { $0[attribute: "schemeIdUri"] == "urn:mpeg:dash:role:2011" }.compactMap { $0[attribute: "value"] }
            return AdaptationSet(id: a[attribute: "id"], kind: kind(a, reps), language: a[attribute: "lang"],
                                 isProtected: protected, isSkipped: skipped, roles: roles, representations: reps)
        }

        /// EssentialProperty schemes that change nothing about whether a player can play the set.
        static let harmlessEssential: Set<String> = [
            "urn:mpeg:mpegB:cicp:ColourPrimaries", "urn:mpeg:mpegB:cicp:TransferCharacteristics", "urn:mpeg:mpegB:cicp:MatrixCoefficients",
        ]

        func kind(_ a: XMLElement, _ reps: [Representation]) -> Kind {
            if let t = a[attribute: "contentType"] ?? a.child("ContentComponent")?[attribute: "contentType"] {
                switch t { case "video": return .video; case "audio": return .audio; case "text": return .text; default: return .other }
            }
            let mime = (a[attribute: "mimeType"] ?? reps.first?.mimeType ?? "").lowercased()
            let codecs = (a[attribute: "codecs"] ?? reps.first?.codecs ?? "").lowercased()
            if mime.hasPrefix("video/") { return .video }
            if mime.hasPrefix("audio/") { return .audio }
            if mime.hasPrefix("text/") || mime == "application/ttml+xml" || codecs.hasPrefix("stpp") || codecs.hasPrefix("wvtt") { return .text }
            return .other
        }

        func representation(_ r: XMLElement, set a: XMLElement, bases: [String], nodes: [String: SegmentNode]) throws(DASHError) -> Representation {
            guard let id = r[attribute: "id"], !id.isEmpty else {
                throw .badValue(element: "Representation", attribute: "id", value: "", why: "missing (§5.3.5.2: it is mandatory)")
            }
            guard let bandwidth = try unsigned(r, "bandwidth") else {
                throw .badValue(element: "Representation", attribute: "bandwidth", value: "", why: "missing (§5.3.5.2: it is mandatory)")
            }
            func inherited(_ name: String) throws(DASHError) -> Int? {
                var v = try unsigned(r, name)
                if v == nil { v = try unsigned(a, name) }
                return v.map { Int(clamping: $0) }
            }
            let rb = try baseURLs(r, parents: bases)
            var rep = Representation(id: id, bandwidth: bandwidth, width: try inherited("width"), height: try inherited("height"),
                                     codecs: r[attribute: "codecs"] ?? a[attribute: "codecs"],
                                     mimeType: r[attribute: "mimeType"] ?? a[attribute: "mimeType"],
                                     baseURLs: rb, segments: .single)
            rep.segments = try segmentInfo(nodes, rep: rep)
            return rep
        }

        // MARK: segment descriptions

        /// One of SegmentBase, SegmentList, SegmentTemplate with what it inherited merged in.
        struct SegmentNode {
            var attributes: [String: String] = [:]
            var timeline: XMLElement?
            var initialization: XMLElement?
            var segmentURLs: [XMLElement]?
        }

        static let segmentKinds = ["SegmentBase", "SegmentList", "SegmentTemplate"]

        /// The segment descriptions in force at `e`: its own merged over `parent`'s (per attribute;
        /// a timeline, Initialization or SegmentURL list given replaces the inherited one).
        func segmentNodes(_ e: XMLElement, over parent: [String: SegmentNode] = [:]) -> [String: SegmentNode] {
            var out = parent
            for kind in Self.segmentKinds {
                guard let own = e.child(kind) else { continue }
                var n = parent[kind] ?? SegmentNode()
                for attr in own.attributes where attr.namespace == nil { n.attributes[attr.name] = attr.value }
                if let t = own.child("SegmentTimeline") { n.timeline = t }
                if let i = own.child("Initialization") { n.initialization = i }
                let urls = own.children("SegmentURL")
                if !urls.isEmpty { n.segmentURLs = urls }
                out[kind] = n
                // The innermost level's kind wins: an outer kind that differs stops applying.
                for other in Self.segmentKinds where other != kind && e.child(other) == nil { out[other] = nil }
            }
            return out
        }

        func segmentInfo(_ nodes: [String: SegmentNode], rep: Representation) throws(DASHError) -> SegmentInfo {
            func attr(_ n: SegmentNode, _ element: String, _ name: String, _ read: (String) -> Int64?, _ why: String) throws(DASHError) -> Int64? {
                guard let s = n.attributes[name] else { return nil }
                guard let v = read(s) else { throw .badValue(element: element, attribute: name, value: s, why: why) }
                return v
            }
            func common(_ n: SegmentNode, _ element: String) throws(DASHError) -> (timescale: Int64, pto: Int64) {
                let ts = try attr(n, element, "timescale", DASHValues.unsigned, "not a whole number from 1 to 2^63-1") ?? 1
                guard ts > 0 else { throw .badValue(element: element, attribute: "timescale", value: "0", why: "a timescale of 0 ticks per second") }
                let pto = try attr(n, element, "presentationTimeOffset", DASHValues.unsigned, "not a whole number from 0 to 2^63-1") ?? 0
                return (ts, pto)
            }
            func initialization(_ n: SegmentNode, _ element: String) throws(DASHError) -> URLRange? {
                if let i = n.initialization {
                    let range = try i[attribute: "range"].map { (s) throws(DASHError) in
                        guard let r = DASHValues.byteSpan(s) else { throw .badValue(element: "Initialization", attribute: "range", value: s, why: "not a byte range first-last") }
                        return r
                    }
                    let url = try i[attribute: "sourceURL"].map { (s) throws(DASHError) in try resolve(s, rep) } ?? rep.baseURL
                    return URLRange(url: url, range: range)
                }
                return nil
            }
            func duration(_ n: SegmentNode, _ element: String) throws(DASHError) -> Int64? {
                guard let d = try attr(n, element, "duration", DASHValues.unsigned, "not a whole number from 1 to 2^63-1") else { return nil }
                guard d > 0 else { throw .badValue(element: element, attribute: "duration", value: "0", why: "a segment duration of 0") }
                return d
            }
            if let t = nodes["SegmentTemplate"] {
                let (ts, pto) = try common(t, "SegmentTemplate")
                var media: DASHTemplate?
                if let s = t.attributes["media"] {
                    let tpl: DASHTemplate
                    do { tpl = try DASHTemplate(s) } catch { throw .badTemplate(error) }
                    // `$RepresentationID$` may turn the template's first segment into a scheme
                    // (`javascript:`, `init-streamhttp:`): checked once, the number and time
                    // being digits that cannot.
                    _ = try resolve(tpl.substitute(representationID: rep.id, bandwidth: rep.bandwidth, number: 1, time: 0), rep)
                    media = tpl
                }
                var initURL: String?
                if let s = t.attributes["initialization"] {
                    let tpl: DASHTemplate
                    do { tpl = try DASHTemplate(s) } catch { throw .badTemplate(error) }
                    guard tpl.identifiers.isSubset(of: [.representationID, .bandwidth]) else {
                        throw .badTemplate(.init(template: s, why: "@initialization may use only $RepresentationID$ and $Bandwidth$"))
                    }
                    initURL = try resolve(tpl.substitute(representationID: rep.id, bandwidth: rep.bandwidth), rep)
                } else if let i = try initialization(t, "SegmentTemplate") {
                    initURL = i.url
                }
                return .template(SegmentTemplate(
                    timescale: ts, presentationTimeOffset: pto, duration: try duration(t, "SegmentTemplate"),
                    startNumber: try attr(t, "SegmentTemplate", "startNumber", DASHValues.unsigned, "not a whole number from 0 to 2^63-1") ?? 1,
                    endNumber: try attr(t, "SegmentTemplate", "endNumber", DASHValues.unsigned, "not a whole number from 0 to 2^63-1"),
                    timeline: try timeline(t.timeline), media: media, initialization: initURL, mediaBase: rep.baseURL))
            }
            if let l = nodes["SegmentList"] {
                let (ts, pto) = try common(l, "SegmentList")
                var segments: [URLRange] = []
                for u in l.segmentURLs ?? [] {
                    let range = try u[attribute: "mediaRange"].map { (s) throws(DASHError) in
                        guard let r = DASHValues.byteSpan(s) else { throw .badValue(element: "SegmentURL", attribute: "mediaRange", value: s, why: "not a byte range first-last") }
                        return r
                    }
                    segments.append(URLRange(url: try u[attribute: "media"].map { (s) throws(DASHError) in try resolve(s, rep) } ?? rep.baseURL, range: range))
                }
                return .list(SegmentList(
                    timescale: ts, presentationTimeOffset: pto, duration: try duration(l, "SegmentList"),
                    startNumber: try attr(l, "SegmentList", "startNumber", DASHValues.unsigned, "not a whole number from 0 to 2^63-1") ?? 1,
                    timeline: try timeline(l.timeline), initialization: try initialization(l, "SegmentList"), segments: segments))
            }
            if let b = nodes["SegmentBase"] {
                let (ts, pto) = try common(b, "SegmentBase")
                let index = try b.attributes["indexRange"].map { (s) throws(DASHError) in
                    guard let r = DASHValues.byteSpan(s) else { throw .badValue(element: "SegmentBase", attribute: "indexRange", value: s, why: "not a byte range first-last") }
                    return r
                }
                return .base(SegmentBase(timescale: ts, presentationTimeOffset: pto, indexRange: index, initialization: try initialization(b, "SegmentBase")))
            }
            return .single
        }

        func resolve(_ reference: String, _ rep: Representation) throws(DASHError) -> String {
            let url = HLSURI.resolve(reference.trimming(.whitespacesAndNewlines), against: rep.baseURL)
            guard HLSURI.isHTTP(url) else { throw .badURL("'\(reference.prefix(80))' resolves to '\(url.prefix(80))', not an http or https URL") }
            return url
        }

        func timeline(_ t: XMLElement?) throws(DASHError) -> [TimelineRun]? {
            guard let t else { return nil }
            var runs: [TimelineRun] = []
            for s in t.children("S") {
                guard let d = try unsigned(s, "d"), d > 0 else {
                    throw .badValue(element: "S", attribute: "d", value: s[attribute: "d"] ?? "", why: "a segment duration must be a whole number from 1 to 2^63-1")
                }
                let r = try value(s, "r", DASHValues.integer, "not a whole number") ?? 0
                guard r >= -1 else { throw .badValue(element: "S", attribute: "r", value: String(r), why: "a repeat count below -1") }
                runs.append(TimelineRun(time: try unsigned(s, "t"), duration: d, repeatCount: r))
            }
            return runs
        }
    }
}
