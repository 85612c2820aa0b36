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
    func dashRepresentations(_ s: StreamSummary, _ index: CachedURLIndex) -> ([StreamSummary.Playlist], StreamSummary.DASHTotals?) {
        guard let root = s.rootEntry, let mpd = parseMPD(root) else { return ([], nil) }
        var index = index
        func entry(_ url: String) -> CacheEntry? { index.entry(url) }
        func holds(_ url: String, _ range: MPD.ByteSpan?) -> Bool { index.holds(url, range) }
        let named = Set(s.record.keys)
        // Per Period: each Representation's counts there, its kind, and whether the stream names it.
        var perPeriod: [[(id: String, kind: MPD.Kind, playlist: StreamSummary.Playlist, named: Bool)]] = []
        var out: [StreamSummary.Playlist] = []
        var merged: [String: (index: Int, periods: [Int], leading: Bool)] = [:]
        for (p, period) in mpd.periods.enumerated() {
            var here: [(id: String, kind: MPD.Kind, playlist: StreamSummary.Playlist, named: Bool)] = []
            for set in period.adaptationSets where !set.isSkipped && set.kind != .other {
                for rep in set.representations {
                    // A template's segments: only those whose name is a cached entry's are named.
                    let cachedAt = templateSegmentsCached(rep, period: period, index: &index)
                    guard var plan = try? rep.plan(periodDuration: period.duration, naming: cachedAt == nil) else { continue }
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
                    var isNamed = named.contains(r.key)
                    if let cachedAt {
                        // Known from the few cached: the million others only add their seconds.
                        r.segments = plan.segments.count
                        for seg in plan.segments { r.seconds += seg.duration ?? 0 }
                        r.segmentsCached = cachedAt.filter { $0 < plan.segments.count }.count
                        r.segmentsPlaying = initHeld ? r.segmentsCached : 0
                        var i = 0
                        while initHeld, i < plan.segments.count, cachedAt.contains(i) { r.secondsCached += plan.segments[i].duration ?? 0; i += 1 }
                        if r.segmentsCached > 0 { isNamed = true }
                    } else {
                        var leading = true
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

    /// The indices of a SegmentTemplate Representation's segments (as `plan` lists them) that
    /// are cached, found from the cached entries' names (`DASHTemplate.values(namedBy:)`), so
    /// that only those segments' URLs are made and keyed: a million segments' URLs took `ls`
    /// half a minute. Nil when the template is not one that shortcut reads: every URL is named.
    private func templateSegmentsCached(_ rep: MPD.Representation, period: MPD.Period, index: inout CachedURLIndex) -> Set<Int>? {
        guard case .template(let t) = rep.segments, let media = t.media, let names = index.names,
              let (id, values) = media.values(namedBy: names, representationID: rep.id, bandwidth: rep.bandwidth) else { return nil }
        var candidates: [(i: Int, time: Int64)] = []
        if let runs = t.timeline {
            guard let times = try? rep.timelineTimes(runs, timescale: t.timescale, pto: t.presentationTimeOffset, periodDuration: period.duration,
                                                     until: nil, maxCount: nil, live: nil) else { return nil }
            for (i, s) in times.enumerated() {
                let n = t.startNumber.addingReportingOverflow(Int64(i))
                if id == .time ? values.contains(s.time) : (!n.overflow && values.contains(n.partialValue)) { candidates.append((i, s.time)) }
            }
        } else {
            guard let d = t.duration, d > 0 else { return nil }
            for v in values {
                let k: Int64
                if id == .number {
                    let (diff, o) = v.subtractingReportingOverflow(t.startNumber)
                    guard !o, diff >= 0 else { continue }
                    k = diff
                } else {
                    let (diff, o) = v.subtractingReportingOverflow(t.presentationTimeOffset)
                    guard !o, diff >= 0, diff % d == 0 else { continue }
                    k = diff / d
                }
                let (time, o1) = k.multipliedReportingOverflow(by: d)
                let (shifted, o2) = time.addingReportingOverflow(t.presentationTimeOffset)
                guard !o1, !o2, k < Int64(Int.max) else { continue }
                candidates.append((Int(k), shifted))
            }
        }
        var out = Set<Int>()
        for c in candidates {
            let (number, o) = t.startNumber.addingReportingOverflow(Int64(c.i))
            guard !o else { continue }
            let path = media.substitute(representationID: rep.id, bandwidth: rep.bandwidth, number: number, time: c.time)
            if index.holds(HLSURI.resolve(path, against: t.mediaBase), nil) { out.insert(c.i) }
        }
        return out
    }

    /// A complete MPD entry's cached bytes, parsed against the URL that answered it. Its segment
    /// total is not counted again: what is listed here is planned below anyway.
    func parseMPD(_ e: CacheEntry) -> MPD? {
        store.cachedMPD(e).flatMap { try? MPD.parse($0.bytes, url: $0.base, checkingTotal: false) }
    }
}
