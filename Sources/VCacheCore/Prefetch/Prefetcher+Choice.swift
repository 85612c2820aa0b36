#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stream complete for the choices its runs made is not complete for another: a run choosing
/// another Representation or variant (`--variant`, `--audio`) needs members the cache does not
/// hold, and would fetch them (the origin's encode now) under the cached manifest (a re-encode
/// in place: the old one). So before such a run reads the cached static manifest, it asks for
/// it again as for a partly cached stream (`staleManifest`, Docs/dash.md, Docs/hls.md, "A new
/// choice"); a run whose choice is all cached asks for nothing (hostile probe h3, F8).
extension Prefetcher {
    /// Whether item `item`'s choice in the static root manifest `m` (an MPD, an HLS master) names
    /// something not cached: a Representation's init or segment (its byte range, when it has
    /// one) not held, a media playlist not cached whole, or a choice it cannot satisfy at all.
    /// False when the cached manifest cannot be read (the run says why when it reads it).
    func choiceNeedsUncached(_ m: CachedManifest, item: PrefetchItem) -> Bool {
        guard let bytes = store.cachedBytes(of: m.entry), Int64(bytes.count) == m.entry.length else { return false }
        var seconds: Double?
        if case .seconds(let s)? = item.mp4 { seconds = s }
        let base = ((try? store.catalog.finalURL(of: m.key)) ?? nil) ?? m.entry.latestURL
        var needed: [(url: String, span: MPD.ByteSpan?)] = []
        if m.mpd {
            guard let mpd = try? MPD.parse(bytes, url: base), !mpd.isDynamic else { return false }
            // A choice the cached MPD cannot satisfy (a --variant it has no Representation for)
            // may be one the origin's MPD now has: asked again first (hostile probe h9b, F10).
            guard let chosen = try? DASHPlan(variant: options.hlsVariant, audio: options.hlsAudio, seconds: seconds).choose(mpd) else { return true }
            for c in chosen {
                let period = mpd.periods[c.period]
                let until = seconds.map { max(0, $0 - period.start) }
                guard let planned = try? c.representation.plan(periodDuration: period.duration, until: until) else { return false }
                if let index = planned.index, case .base = c.representation.segments {
                    // A SegmentBase file: whole, or (--seconds) its init and sidx first.
                    if seconds == nil || index.range == nil {
                        needed.append((index.url, nil))
                    } else {
                        if let i = planned.initialization { needed.append((i.url, i.range)) }
                        needed.append((index.url, index.range))
                    }
                    continue
                }
                if let i = planned.initialization { needed.append((i.url, i.range)) }
                for s in planned.segments { needed.append((s.url, s.range)) }
            }
        } else {
            guard let playlist = try? HLSPlaylist.parse(bytes, url: base), case .master = playlist else { return false }
            guard let urls = try? HLSPlan(variant: options.hlsVariant, audio: options.hlsAudio, seconds: seconds).playlists(for: playlist).urls else { return true }
            needed = urls.map { ($0, nil) }
        }
        let keys = needed.map { options.keyRules.key(for: $0.url) }
        guard let held = try? store.catalog.entries(keys: keys) else { return false }
        return zip(keys, needed).contains { key, need in
            guard let e = held[key] else { return true }
            if e.isComplete { return false }
            guard let span = need.span else { return true }
            return !e.ranges.contains(ByteRange(span.first, span.last + 1))
        }
    }
}
