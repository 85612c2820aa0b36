#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension StreamInventory {
    /// A DASH stream's Representations as its cached MPD names them, Period by Period, each with
    /// the segments and seconds cached (Docs/dash.md): video ones are `variant`s, the others
    /// `audio` or `text`. A SegmentBase file counts its subsegments when its sidx is cached,
    /// else it is one segment.
    func dashRepresentations(_ s: StreamSummary, _ byKey: [CacheKey: CacheEntry]) -> [StreamSummary.Playlist] {
        guard let root = s.rootEntry, let mpd = parseMPD(root) else { return [] }
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
        var out: [StreamSummary.Playlist] = []
        for (p, period) in mpd.periods.enumerated() {
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
                    var label = "Period \(p + 1), \(rep.bandwidth / 1000) kbit/s"
                    if let w = rep.width, let h = rep.height { label += ", \(w)x\(h)" }
                    if let l = set.language { label += ", \(l)" }
                    label += ", id \(rep.id)"
                    let url = plan.initialization?.url ?? rep.baseURL
                    var r = StreamSummary.Playlist(url: url, key: keyRules.key(for: url),
                                                   kind: set.kind == .video ? "variant" : set.kind.rawValue, label: label, cached: false)
                    var leading = true
                    for seg in plan.segments {
                        r.segments += 1
                        let duration = seg.duration ?? 0
                        r.seconds += duration
                        let cached = holds(seg.url, seg.range)
                        if cached { r.segmentsCached += 1 }
                        let plays = cached && initHeld
                        if plays { r.segmentsPlaying += 1 } else { leading = false }
                        if plays && leading { r.secondsCached += duration }
                    }
                    r.cached = initHeld && r.segmentsCached > 0
                    out.append(r)
                }
            }
        }
        return out
    }

    /// A complete MPD entry's cached bytes, parsed against the URL that answered it.
    func parseMPD(_ e: CacheEntry) -> MPD? { store.cachedMPD(e)?.mpd }
}
