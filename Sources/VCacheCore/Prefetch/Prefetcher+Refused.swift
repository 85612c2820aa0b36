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
}
