import Foundation

extension Prefetcher {
    /// A playlist prefetch refused before recording its stream (too big to read as one, not one
    /// vcache can parse, unreadable, `--bytes` or `--range` asked of it) is not kept as a plain
    /// entry (Docs/hls.md): it goes alone, its stream rows (if another stream names it) staying.
    /// A stream's root (its stream recorded from an earlier copy) and a pinned entry stay.
    func forgetRefusedPlaylist(key: String) {
        guard let e = (try? store.catalog.entry(key: key)) ?? nil, !e.pinned,
              ((try? store.catalog.stream(root: key)) ?? nil) == nil else { return }
        var c = Evictor.Criteria()
        c.keys = [key]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
    }
}
