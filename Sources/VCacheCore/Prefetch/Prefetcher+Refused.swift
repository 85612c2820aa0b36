#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Prefetcher {
    /// A playlist prefetch refused before recording its stream (too big to read as one, not one
    /// vcache can parse, unreadable, `--bytes` or `--range` asked of it) is not kept as a plain
    /// entry (Docs/hls.md): it goes alone, its stream rows (if another stream names it) staying.
    /// A stream's root (its stream recorded from an earlier copy) and a pinned entry stay.
    /// A catalog that cannot be read keeps the entry: a failed read is no answer ("no stream")
    /// (it took a stream's root for a plain entry and evicted it: found by a hostile review).
    func forgetRefusedPlaylist(key: CacheKey) {
        let found: (entry: CacheEntry?, stream: Bool)
        do {
            found = (try store.catalog.entry(key: key), try store.catalog.stream(root: key) != nil)
        } catch {
            return
        }
        guard let e = found.entry, !e.pinned, !found.stream else { return }
        var c = Evictor.Criteria()
        c.keys = [key]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
    }

    /// An item whose URL names an MPD (`.mpd`) or a playlist (`.m3u8`) held whole with a body
    /// that is not one (an error page answered with 200, an empty answer): why it is refused,
    /// else nil. Read from the cache: a copy cached before this check came in is judged too.
    /// (A `.m3u8` page is refused as it arrives, `PrefetchJob.notAnMP4Start`; an empty one never
    /// arrives.)
    func notTheManifest(_ r: PrefetchResult, item: PrefetchItem) -> String? {
        // serve (no stream expanded) judges what it answers for a manifest itself.
        let ext = (URL(string: item.url)?.path ?? item.url).fileExtension.lowercased()
        guard options.expandStreams, item.checkSegment == nil, ext == "mpd" || ext == "m3u8",
              let e = (try? store.catalog.entry(key: r.key)) ?? nil, e.isComplete, let length = e.length,
              let head = length == 0 ? [] : store.cachedBytes(of: e, count: min(length, 64 << 10)) else { return nil }
        return PrefetchJob.notTheManifest(url: item.url, mpd: ext == "mpd", head)
    }
}
