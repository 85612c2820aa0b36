/// An entry's writer lock held by this process for several storing jobs at once, as one of those
/// jobs sees it (`PrefetchOptions.sharedLock`): `serve` keeps the spans two players read far
/// apart, each fetched by its own job, instead of streaming one of them unstored. Each job writes
/// its own span of `data` and commits its own ranges (commits merge). A drop replaces `data`: a
/// job still writing the old file would then claim bytes the new one lacks. So a job drops only
/// when it is the only one, and no job joins while a drop runs; a drop that cannot wait (a
/// completion that does not hash as the first) is handed to the last job to leave. `serve`'s
/// `EntryBoard` implements it over its `EntryState` (the `lock` field).
public protocol SharedEntryLock: AnyObject, Sendable {
    /// The calling job may drop the entry's version: it is the only one writing (no job joins
    /// until `endExclusive`). False: other jobs write it.
    func beginExclusive() -> Bool
    func endExclusive()
    /// Runs `drop` now when the calling job is alone (no job joins while it runs; its error is
    /// thrown); otherwise hands it to the last job to leave. True when it ran now.
    @discardableResult
    func dropAlone(_ drop: @escaping @Sendable () throws -> Void) throws -> Bool
}
