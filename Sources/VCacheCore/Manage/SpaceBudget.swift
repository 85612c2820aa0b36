/// The cap arithmetic of `prefetch` and `serve`, pure (issue 34): how much the cache may hold
/// (the `--max-size` cap, lowered by `min-free`: the disk's free space that must be kept), what
/// to evict down to, and the room left. No I/O: `Prefetcher` and `ReadThrough` measure the disk
/// (`FileSystem.space`), the catalog and the footprint, run the `Evictor`, and ask this for every
/// number. Every figure may come from a hostile origin (a length near 2^63): all arithmetic
/// saturates through `Checked`, and nothing here traps.
///
/// The two commands do not apply min-free the same way, and this keeps both (nothing observable
/// may change), named by `MinFreeRule`:
/// - prefetch (`.shortfall`) keeps the cap at checkpoints, after bytes arrived: the limit comes
///   down only when the disk's free space is already under min-free, by what is missing of it
///   (`usage - (minFree - free)`); with free space at or above min-free the limit is the cap
///   alone (none without `--max-size`).
/// - serve (`.headroom`) decides before a job stores: the cache may grow only by what the disk
///   has beyond min-free (`usage + free - minFree`), always; with free space above min-free that
///   is a limit above today's usage, so it binds with no cap too.
/// Where free space is under min-free both are the same number (up to saturation near 2^63,
/// where each keeps its own order of operations).
struct SpaceBudget: Equatable, Sendable {
    /// How min-free lowers the limit (see the type's comment).
    enum MinFreeRule: Equatable, Sendable {
        /// prefetch: only when free < minFree, by the shortfall: `usage - (minFree - free)`.
        case shortfall
        /// serve: always, to what the disk holds beyond min-free: `usage + free - minFree`.
        case headroom
    }

    /// `--max-size` (or `config max-size`); nil: no cap.
    var maxSize: Int64?
    /// `min-free`; nil: none kept.
    var minFree: Int64?
    var minFreeRule: MinFreeRule

    init(maxSize: Int64?, minFree: Int64?, minFreeRule: MinFreeRule) {
        self.maxSize = maxSize
        self.minFree = minFree
        self.minFreeRule = minFreeRule
    }

    /// Whether the disk's free space enters the limit (the shell measures it only then).
    var measuresFree: Bool { minFree != nil }

    /// Whether the cache's usage enters the limit, given the free space measured (nil: not
    /// measured). The shell reads the catalog and the footprint only then.
    func measuresUsage(free: Int64?) -> Bool {
        guard let minFree, let free else { return false }
        switch minFreeRule {
        case .shortfall: return free < minFree
        case .headroom: return true
        }
    }

    /// The size the cache must stay at or under: the cap, or less when min-free asks it (by
    /// `minFreeRule`), never below 0. Nil: no limit (no cap, and min-free not set or not
    /// measurable). `free`/`usage`: nil when not measured (statvfs or the catalog failed): the
    /// cap alone then.
    func limit(free: Int64?, usage: Int64?) -> Int64? {
        guard measuresUsage(free: free), let minFree, let free, let usage else { return maxSize }
        let room: Int64 = switch minFreeRule {
        case .shortfall: Checked.saturatingSubtract(usage, Checked.saturatingSubtract(minFree, free))
        case .headroom: Checked.saturatingSubtract(Checked.saturatingAdd(usage, free), minFree)
        }
        return min(maxSize ?? .max, max(0, room))
    }

    /// Whether `limit` is min-free's rather than the cap's (it is lower than the cap): the
    /// "does not fit" message then names min-free.
    func isMinFrees(limit: Int64) -> Bool {
        minFree != nil && limit < (maxSize ?? .max)
    }

    // MARK: prefetch

    /// What prefetch evicts down to: the limit, plus `allowance`, the bytes of the run's items
    /// not decided yet (`ItemFit`) that may stand over it meanwhile.
    static func evictionCap(limit: Int64, allowance: Int64) -> Int64 {
        Checked.saturatingAdd(limit, allowance)
    }

    /// Whether a prefetch run stops storing after evicting down to `cap`: not at its end
    /// (`final`), the cache still over `cap`, and only the run's own entries left to evict.
    static func runStops(usageAfter: Int64, cap: Int64, final: Bool, onlyRunEntriesStayed: Bool) -> Bool {
        !final && usageAfter > cap && onlyRunEntriesStayed
    }

    /// What prefetch frees when the disk filled during an item: an eighth of the file system
    /// (`fileSystemSize`; nil: not measured, taken as 512 MiB), at least 1 MiB, at most 64 MiB.
    static func fullDiskChunk(fileSystemSize: Int64?) -> Int64 {
        let size = fileSystemSize ?? Int64(64 << 20) * 8
        return min(64 << 20, max(1 << 20, size / 8))
    }

    /// Whether serve makes room on a full disk for a span of `wanted` bytes: only when the
    /// file system (nil: not measured) is larger than it; a span larger than the whole file
    /// system never fits, and evicting for it would only lose videos.
    static func fullDiskMayFit(wanted: Int64, fileSystemSize: Int64?) -> Bool {
        guard let fileSystemSize else { return false }
        return fileSystemSize > wanted
    }

    /// What either command evicts down to on a full disk to free `freeing` bytes (prefetch:
    /// `fullDiskChunk`; serve: the span wanted), the cap's rules without a cap; never below 0.
    static func fullDiskTarget(usage: Int64, freeing: Int64) -> Int64 {
        max(0, Checked.saturatingSubtract(usage, freeing))
    }

    // MARK: serve

    /// What serve evicts down to before storing `wanted` bytes under `limit`: room for them and
    /// for `growth` (`Evictor.Footprint.growthAllowance`: the entry's folders and the catalog's
    /// journal), never below 0. A `wanted` near 2^63 saturates: "all of the limit".
    static func evictionTarget(limit: Int64, wanted: Int64, growth: Int64) -> Int64 {
        max(0, Checked.saturatingSubtract(Checked.saturatingSubtract(limit, wanted), growth))
    }

    /// The bytes serve may still store under `limit` once eviction left the cache at
    /// `usageAfter` (nil: eviction failed, the cache counted as full), `growth` kept aside.
    /// May be negative (no room: no job).
    static func room(limit: Int64, usageAfter: Int64?, growth: Int64) -> Int64 {
        Checked.saturatingSubtract(Checked.saturatingSubtract(limit, usageAfter ?? limit), growth)
    }
}
