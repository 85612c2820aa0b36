#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension StreamInventory {
    /// A DASH stream's Representations as its cached MPD names them, each with the segments and
    /// seconds cached (Docs/dash.md): video ones are `variant`s, the others `audio` or `text`. A
    /// Representation in several Periods (the same kind, id and language) is one, its counts summed
    /// over them. A SegmentBase file counts its subsegments when its sidx is cached, else it is
    /// one segment. With them, the stream's totals (`StreamSummary.DASHTotals`).
    func dashRepresentations(_ s: StreamSummary, _ byKey: [CacheKey: CacheEntry]) -> ([StreamSummary.Playlist], StreamSummary.DASHTotals?) {
        guard let root = s.rootEntry, let mpd = parseMPD(root) else { return ([], nil) }
        var entries: [String: CacheEntry?] = [:]
        func entry(_ url: String) -> CacheEntry? {
            if let known = entries[url] { return known }
            let key = keyRules.key(for: url)
            let found = byKey[key] ?? ((try? store.catalog.entry(key: key)) ?? nil)
            entries[url] = found
            return found
        }
        func holds(_ url: String, _ range: MPD.ByteSpan?) -> Bool {
            guard let e = entry(url) else { return false }
            if let range { return e.ranges.contains(ByteRange(range.first, range.last + 1)) }
            return e.isComplete
        }
        let named = Set(s.record.keys)
        // Per Period: each Representation's counts there, its kind, and whether the stream names it.
        var perPeriod: [[(id: String, kind: MPD.Kind, playlist: StreamSummary.Playlist, named: Bool)]] = []
        var out: [StreamSummary.Playlist] = []
        var merged: [String: (index: Int, periods: [Int], leading: Bool)] = [:]
        for (p, period) in mpd.periods.enumerated() {
            var here: [(id: String, kind: MPD.Kind, playlist: StreamSummary.Playlist, named: Bool)] = []
            for set in period.adaptationSets where !set.isSkipped && set.kind != .other {
                for rep in set.representations {
                    guard var plan = try? rep.plan(periodDuration: period.duration) else { continue }
                    if let index = plan.index, let range = index.range, holds(index.url, range), let e = entry(index.url),
                       let bytes = store.cachedBytes(of: e, at: range.first, count: range.count), case .base(let b) = rep.segments,
                       let subs = try? DASHSidx.subsegments(bytes, indexRange: range, url: index.url, presentationTimeOffset: b.presentationTimeOffset, timescale: b.timescale) {
                        plan.segments = subs
                    } else if let index = plan.index {
                        plan.segments = [DASHSegment(url: index.url, range: nil, start: 0, duration: period.duration)]
                    }
                    let initHeld = plan.initialization.map { holds($0.url, $0.range) } ?? true
                    var label = "\(rep.bandwidth / 1000) kbit/s"
                    if let w = rep.width, let h = rep.height { label += ", \(w)x\(h)" }
                    if let l = set.language { label += ", \(l)" }
                    label += ", id \(rep.id)"
                    let url = plan.initialization?.url ?? rep.baseURL
                    var r = StreamSummary.Playlist(url: url, key: keyRules.key(for: url),
                                                   kind: set.kind == .video ? "variant" : set.kind.rawValue, label: label, cached: false)
                    var leading = true
                    var isNamed = named.contains(r.key)
                    for seg in plan.segments {
                        r.segments += 1
                        let duration = seg.duration ?? 0
                        r.seconds += duration
                        let cached = holds(seg.url, seg.range)
                        if cached { r.segmentsCached += 1 }
                        if !isNamed && !seg.url.isEmpty && named.contains(keyRules.key(for: seg.url)) { isNamed = true }
                        let plays = cached && initHeld
                        if plays { r.segmentsPlaying += 1 } else { leading = false }
                        if plays && leading { r.secondsCached += duration }
                    }
                    r.cached = initHeld && r.segmentsCached > 0
                    here.append((rep.id, set.kind, r, isNamed))
                    // The same Representation in an earlier Period: one, its counts summed.
                    let identity = "\(set.kind.rawValue)\u{0}\(rep.id)\u{0}\(set.language ?? "")"
                    if let m = merged[identity], m.periods.last != p {
                        var sum = out[m.index]
                        sum.cached = sum.cached || r.cached
                        sum.segments += r.segments
                        sum.segmentsCached += r.segmentsCached
                        sum.segmentsPlaying += r.segmentsPlaying
                        if m.leading { sum.secondsCached += r.secondsCached }
                        sum.seconds += r.seconds
                        let periods = m.periods + [p]
                        sum.label = "Periods " + periods.map { String($0 + 1) }.joined(separator: ", ") + ", " + label
                        out[m.index] = sum
                        merged[identity] = (m.index, periods, m.leading && r.secondsCached >= r.seconds - 0.001)
                    } else {
                        var first = r
                        first.label = "Period \(p + 1), " + label
                        merged[identity] = (out.count, [p], r.secondsCached >= r.seconds - 0.001)
                        out.append(first)
                    }
                }
            }
            perPeriod.append(here)
        }
        return (out, Self.dashTotals(perPeriod))
    }

    /// The stream's counts over every Period, of the Representations the stream names (its runs
    /// chose; all when it names none): segments that play (their init cached too), the
    /// presentation's seconds (each Period's longest video), and the seconds that play from the
    /// start, each Period's with its video and its audio both (never video without its sound).
    static func dashTotals(_ periods: [[(id: String, kind: MPD.Kind, playlist: StreamSummary.Playlist, named: Bool)]]) -> StreamSummary.DASHTotals {
        var t = StreamSummary.DASHTotals()
        let anyNamed = periods.contains { $0.contains(where: \.named) }
        var leading = true
        for reps in periods {
            let counted = reps.filter { $0.named || !anyNamed }
            t.segments += counted.reduce(0) { $0 + $1.playlist.segments }
            t.segmentsPlaying += counted.reduce(0) { $0 + $1.playlist.segmentsPlaying }
            let video = reps.filter { $0.kind == .video }
            let length = (video.isEmpty ? reps : video).map(\.playlist.seconds).max() ?? 0
            t.seconds += length
            guard leading else { continue }
            let kinds = Set(reps.map(\.kind)).intersection([.video, .audio])
            let plays = kinds.isEmpty ? (counted.map(\.playlist.secondsCached).max() ?? 0)
                : kinds.map { k in counted.filter { $0.kind == k }.map(\.playlist.secondsCached).max() ?? 0 }.min() ?? 0
            t.secondsCached += plays
            if plays < length - 0.001 { leading = false }
        }
        return t
    }

    /// A complete MPD entry's cached bytes, parsed against the URL that answered it.
    func parseMPD(_ e: CacheEntry) -> MPD? { store.cachedMPD(e)?.mpd }
}
