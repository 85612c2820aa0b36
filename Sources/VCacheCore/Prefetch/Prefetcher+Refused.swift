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

    /// An item whose URL names an MPD (`.mpd`) held whole with a body that is not one (an error
    /// page answered with 200): why it is refused, as a `.m3u8` is (`PrefetchJob.notAnMP4Start`),
    /// else nil. Read from the cache: a copy cached before this check came in is judged too.
    func notAnMPD(_ r: PrefetchResult, item: PrefetchItem) -> String? {
        // serve (no stream expanded) judges what it answers for a manifest itself.
        guard options.expandStreams, item.checkSegment == nil, (URL(string: item.url)?.path ?? item.url).fileExtension.lowercased() == "mpd",
              let e = (try? store.catalog.entry(key: r.key)) ?? nil, e.isComplete, let length = e.length,
              let head = store.cachedBytes(of: e, count: min(length, 64 << 10)) else { return nil }
        return PrefetchJob.notTheManifest(url: item.url, mpd: true, head)
    }
}
