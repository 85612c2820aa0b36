#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The DASH side of a prefetch run (Docs/dash.md): an MPD, recognised by its content or its
/// Content-Type, names the segments of the Representations `DASHPlan` chooses; they join the run
/// as items under the same rules as any other (resume, validators, retries, the cap, the hosts
/// rule, `-j`), each checked to be a segment before it is kept. A SegmentBase Representation is
/// one file: for the whole presentation, the file; for `--seconds`, its init and `sidx` first,
/// then the subsegments the sidx gives (`followDASHIndex`), byte ranges of the one entry.
extension Prefetcher {
    /// The items an MPD names, as `expand` returns them for a playlist.
    func expandDASH(_ r: PrefetchResult, item: PrefetchItem, root: CacheKey, entry e: CacheEntry, bytes: [UInt8],
                    seconds: Double?) -> (items: [PrefetchItem], error: PrefetchError?) {
        func refuse(_ e: PrefetchError) -> (items: [PrefetchItem], error: PrefetchError?) {
            forgetRefusedPlaylist(key: r.key)
            return ([], e)
        }
        if case .moov? = item.mp4 {
            return refuse(.stream("\(r.url) is a DASH MPD: --bytes does not apply to a stream; give --seconds N, or neither for the whole presentation"))
        }
        if item.mp4 == nil, item.requests.contains(where: { $0 != .whole }) {
            return refuse(.stream("\(r.url) is a DASH MPD: --range does not apply to a stream; give --seconds N, or neither for the whole presentation"))
        }
        if let length = r.length, length > Int64(MPD.maxBytes) {
            return refuse(.stream("\(r.url) is a DASH MPD of \(Units.formatSize(length)), larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one"))
        }
        // BaseURLs resolve against the URL that answered it (after redirects): this run's, kept
        // for offline reads, else the one recorded when it was fetched.
        if let final = r.finalURL { try? store.catalog.recordFinalURL(key: r.key, url: final) }
        let base = r.finalURL ?? ((try? store.catalog.finalURL(of: r.key)) ?? nil) ?? e.latestURL
        let mpd: MPD
        do { mpd = try MPD.parse(bytes, url: base) } catch { return refuse(.stream("\(r.url): \(error)")) }
        // A Representation no URL of which is http(s) (a hostile `$RepresentationID$`): left out,
        // one line each, and the rest fetched, as serve answers the MPD without it.
        for why in mpd.leftOut { events(.note(url: r.url, message: "\(why); the rest of the MPD is fetched")) }
        let plan = DASHPlan(variant: options.hlsVariant, audio: options.hlsAudio, seconds: seconds)
        let chosen: [DASHPlan.Chosen]
        do { chosen = try plan.choose(mpd) } catch { return refuse(.stream("\(r.url): \(error)")) }
        guard !chosen.isEmpty else { return refuse(.stream("\(r.url): the MPD has no video, audio or text Representation to fetch")) }
        let live = mpd.isDynamic ? DASHLiveClock(now: Date().timeIntervalSince1970) : nil
        if mpd.isDynamic {
            events(.note(url: r.url, message: "a dynamic (live) MPD: the segments available now are fetched (its timeline, or its availabilityStartTime and this machine's clock); the next run fetches the MPD again and the segments added since"))
        }
        if chosen.contains(where: { mpd.periods[$0.period].adaptationSets[$0.set].isProtected }) {
            events(.note(url: r.url, message: "its content is protected (ContentProtection, DRM): cached as the origin sends it, it plays only in a player holding its licence, which vcache does not fetch"))
        }

        // Each URL once: a whole resource, or its byte ranges; with the role it has in the stream.
        var order: [String] = []
        var ranges: [String: [RangeRequest]] = [:]
        var whole = Set<String>()
        var roles: [String: StreamRole] = [:]
        var named: [StreamRecord.Member] = []
        var indexes: [String: DASHIndexFollowUp] = [:]
        var mirrors: [String: DASHMirrors] = [:]
        var bases: [String] = []
        func add(_ url: String, _ range: MPD.ByteSpan?, _ role: StreamRole) {
            if ranges[url] == nil {
                order.append(url)
                ranges[url] = []
                mirrors[url] = DASHMirrors.of(url, baseURLs: bases)
            }
            if let range { ranges[url]?.append(.span(first: range.first, last: range.last)) } else { whole.insert(url) }
            if roles[url] != .segment { roles[url] = role }
        }
        for c in chosen {
            let period = mpd.periods[c.period]
            let until = seconds.map { max(0, $0 - period.start) }
            let rep = c.representation
            bases = rep.baseURLs
            let planned: DASHSegmentPlan
            do {
                planned = try rep.plan(periodDuration: period.duration, until: until, live: live.map { ($0, mpd, period.start) })
            } catch {
                return refuse(.stream("\(r.url): \(error)"))
            }
            // What the stream names: the whole Representation (so `ls` counts what `--seconds` left
            // out). One that cannot be listed whole (past a limit, time going back later on) is
            // refused as the whole prefetch refuses it: `ls` would call a stream of 0 segments complete.
            let all: DASHSegmentPlan
            if seconds == nil {
                all = planned
            } else {
                do { all = try rep.plan(periodDuration: period.duration, live: live.map { ($0, mpd, period.start) }) } catch { return refuse(.stream("\(r.url): \(error)")) }
            }
            for s in all.segments { named.append(.init(key: options.keyRules.key(for: s.url), role: .segment)) }
            if let i = all.initialization { named.append(.init(key: options.keyRules.key(for: i.url), role: .initSection)) }
            if let index = planned.index, case .base(let b) = rep.segments, let range = index.range {
                named.append(.init(key: options.keyRules.key(for: index.url), role: .segment))
                if seconds == nil {
                    // The whole presentation: the whole file, one request.
                    add(index.url, nil, .segment)
                } else {
                    if let i = planned.initialization { add(i.url, i.range, .initSection) }
                    add(index.url, range, .segment)
                    indexes[index.url] = DASHIndexFollowUp(indexRange: range, until: until, presentationTimeOffset: b.presentationTimeOffset, timescale: b.timescale)
                }
                continue
            }
            if let i = planned.initialization { add(i.url, i.range, .initSection) }
            for s in planned.segments { add(s.url, s.range, .segment) }
        }
        // Its own URL as a member would make the MPD its own segment (its XML exported as video).
        if let own = named.first(where: { $0.key == r.key }) {
            return refuse(.stream("\(r.url): the MPD names itself as a\(own.role == .initSection ? "n init section" : " segment"): refused; fix the MPD"))
        }
        // A dynamic MPD fetched again kept its stream rows: the segments its earlier runs kept stay
        // members (as a live HLS playlist's do), so those that left its window do not become loose entries.
        do {
            try store.catalog.recordStream(root: root, format: "dash", members: named, via: r.key)
        } catch {
            events(.note(url: r.url, message: "its stream could not be recorded in the catalog (its entries stay, each on its own): \(error)"))
        }
        return (order.map { url in
            // A resource asked for whole and by ranges is fetched whole.
            let requests = whole.contains(url) ? [] : ranges[url] ?? []
            var it = PrefetchItem(url: url, requests: requests, checkSegment: .dashSegment)
            it.rangesMustFit = !requests.isEmpty
            it.memberOrigins = AllowedOrigins()  // the stream's hosts: `runUnique` fills them in
            it.mirrors = mirrors[url]
            if !whole.contains(url) { it.dashIndex = indexes[url] }
            return it
        }, nil)
    }

    /// A SegmentBase file whose init and `sidx` are held: the item of its subsegments that start
    /// before `until` (all without it), byte ranges of the same entry; nil when none is needed.
    func followDASHIndex(_ r: PrefetchResult, _ follow: DASHIndexFollowUp) -> (item: PrefetchItem?, error: PrefetchError?) {
        let span = follow.indexRange
        guard let e = (try? store.catalog.entry(key: r.key)) ?? nil, span.count <= 16 << 20,
              let bytes = store.cachedBytes(of: e, at: span.first, count: span.count), Int64(bytes.count) == span.count else {
            return (nil, .stream("\(r.url): its sidx (bytes \(span.first)-\(span.last)) cannot be read back from the cache"))
        }
        let subsegments: [DASHSegment]
        do {
            subsegments = try DASHSidx.subsegments(bytes, indexRange: span, url: r.url, presentationTimeOffset: follow.presentationTimeOffset, timescale: follow.timescale)
        } catch {
            return (nil, .stream("\(r.url): \(error)"))
        }
        let wanted = subsegments.filter { s in follow.until.map { s.start < $0 } ?? true }
        guard !wanted.isEmpty else { return (nil, nil) }
        // Adjacent subsegments are one request (the fetch coalesces neighbouring spans).
        var item = PrefetchItem(url: r.url, requests: wanted.compactMap { $0.range.map { .span(first: $0.first, last: $0.last) } }, checkSegment: .dashSegment)
        item.rangesMustFit = true
        return (item, nil)
    }
}
