import Testing
@testable import VCacheCore

/// The cap arithmetic of prefetch and serve (`SpaceBudget`), as pure values: a line per case,
/// hostile numbers (2^63 - 1, min-free past the disk, free 0, cap 0) included, each an exact value.
@Suite struct SpaceBudgetTests {
    static let mib: Int64 = 1 << 20
    static let gib: Int64 = 1 << 30
    static let max = Int64.max

    struct LimitCase: CustomTestStringConvertible, Sendable {
        var name: String
        var rule: SpaceBudget.MinFreeRule
        var maxSize: Int64?
        var minFree: Int64?
        var free: Int64?
        var usage: Int64?
        var measuresUsage: Bool
        var limit: Int64?
        var testDescription: String { name }
    }

    static let limitCases: [LimitCase] = [
        // Neither set.
        LimitCase(name: "prefetch: no cap, no min-free: no limit", rule: .shortfall, measuresUsage: false, limit: nil),
        LimitCase(name: "serve: no cap, no min-free: no limit", rule: .headroom, measuresUsage: false, limit: nil),
        LimitCase(name: "prefetch: the cap alone", rule: .shortfall, maxSize: 10 * gib, measuresUsage: false, limit: 10 * gib),
        LimitCase(name: "serve: the cap alone", rule: .headroom, maxSize: 10 * gib, measuresUsage: false, limit: 10 * gib),
        // Free space above min-free: where the two commands differ.
        LimitCase(name: "prefetch: free above min-free: the cap alone", rule: .shortfall, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 5 * gib, usage: 4 * gib, measuresUsage: false, limit: 10 * gib),
        LimitCase(name: "serve: free above min-free: usage + free - min-free", rule: .headroom, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 5 * gib, usage: 4 * gib, measuresUsage: true, limit: 7 * gib),
        LimitCase(name: "prefetch: free above min-free, no cap: no limit", rule: .shortfall, minFree: 2 * gib,
                  free: 5 * gib, usage: 4 * gib, measuresUsage: false, limit: nil),
        LimitCase(name: "serve: free above min-free, no cap: the headroom", rule: .headroom, minFree: 2 * gib,
                  free: 5 * gib, usage: 4 * gib, measuresUsage: true, limit: 7 * gib),
        LimitCase(name: "serve: headroom above the cap: the cap", rule: .headroom, maxSize: 6 * gib, minFree: 2 * gib,
                  free: 5 * gib, usage: 4 * gib, measuresUsage: true, limit: 6 * gib),
        LimitCase(name: "prefetch: free exactly min-free: the cap", rule: .shortfall, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 2 * gib, usage: 4 * gib, measuresUsage: false, limit: 10 * gib),
        LimitCase(name: "serve: free exactly min-free: today's usage", rule: .headroom, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 2 * gib, usage: 4 * gib, measuresUsage: true, limit: 4 * gib),
        // Free space under min-free: the same number for both.
        LimitCase(name: "prefetch: free under min-free: usage less the shortfall", rule: .shortfall, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 3 * gib),
        LimitCase(name: "serve: free under min-free: usage less the shortfall", rule: .headroom, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 3 * gib),
        LimitCase(name: "prefetch: free under min-free, no cap", rule: .shortfall, minFree: 2 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 3 * gib),
        LimitCase(name: "prefetch: the cap below min-free's limit: the cap", rule: .shortfall, maxSize: 2 * gib, minFree: 2 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 2 * gib),
        LimitCase(name: "prefetch: free 0", rule: .shortfall, minFree: 2 * gib, free: 0, usage: 4 * gib, measuresUsage: true, limit: 2 * gib),
        LimitCase(name: "serve: free 0", rule: .headroom, minFree: 2 * gib, free: 0, usage: 4 * gib, measuresUsage: true, limit: 2 * gib),
        LimitCase(name: "prefetch: min-free larger than the disk: 0", rule: .shortfall, maxSize: 10 * gib, minFree: 100 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 0),
        LimitCase(name: "serve: min-free larger than the disk: 0", rule: .headroom, maxSize: 10 * gib, minFree: 100 * gib,
                  free: 1 * gib, usage: 4 * gib, measuresUsage: true, limit: 0),
        LimitCase(name: "prefetch: cap 0", rule: .shortfall, maxSize: 0, minFree: 2 * gib, free: 1 * gib, usage: 4 * gib,
                  measuresUsage: true, limit: 0),
        LimitCase(name: "serve: cap 0", rule: .headroom, maxSize: 0, minFree: 2 * gib, free: 5 * gib, usage: 4 * gib,
                  measuresUsage: true, limit: 0),
        LimitCase(name: "prefetch: an empty cache, free 0: 0", rule: .shortfall, minFree: 1, free: 0, usage: 0, measuresUsage: true, limit: 0),
        // Not measured: the cap alone.
        LimitCase(name: "prefetch: free space not measured: the cap", rule: .shortfall, maxSize: 10 * gib, minFree: 2 * gib,
                  measuresUsage: false, limit: 10 * gib),
        LimitCase(name: "serve: free space not measured, no cap: no limit", rule: .headroom, minFree: 2 * gib,
                  measuresUsage: false, limit: nil),
        LimitCase(name: "prefetch: the catalog unread: the cap", rule: .shortfall, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 1 * gib, measuresUsage: true, limit: 10 * gib),
        LimitCase(name: "serve: the catalog unread: the cap", rule: .headroom, maxSize: 10 * gib, minFree: 2 * gib,
                  free: 1 * gib, measuresUsage: true, limit: 10 * gib),
        // Hostile numbers: nothing traps; saturation near 2^63 keeps each command's order.
        LimitCase(name: "a cap of 2^63 - 1", rule: .shortfall, maxSize: max, measuresUsage: false, limit: max),
        LimitCase(name: "prefetch: min-free 2^63 - 1, free 0: 0", rule: .shortfall, minFree: max, free: 0, usage: 4 * gib,
                  measuresUsage: true, limit: 0),
        LimitCase(name: "serve: min-free 2^63 - 1, free 0: 0", rule: .headroom, minFree: max, free: 0, usage: 4 * gib,
                  measuresUsage: true, limit: 0),
        LimitCase(name: "prefetch: usage 2^63 - 1 under min-free: usage less the shortfall", rule: .shortfall, minFree: 2 * gib,
                  free: 1 * gib, usage: max, measuresUsage: true, limit: max - gib),
        LimitCase(name: "serve: usage 2^63 - 1 under min-free: usage + free saturates first", rule: .headroom, minFree: 2 * gib,
                  free: 1 * gib, usage: max, measuresUsage: true, limit: max - 2 * gib),
        LimitCase(name: "prefetch: everything 2^63 - 1: free not under min-free, no limit", rule: .shortfall, minFree: max,
                  free: max, usage: max, measuresUsage: false, limit: nil),
        LimitCase(name: "serve: everything 2^63 - 1: saturated to 0", rule: .headroom, minFree: max,
                  free: max, usage: max, measuresUsage: true, limit: 0),
        LimitCase(name: "prefetch: min-free 2^63 - 1, one byte short, empty cache: 0", rule: .shortfall, minFree: max,
                  free: max - 1, usage: 0, measuresUsage: true, limit: 0),
        LimitCase(name: "serve: min-free 2^63 - 1, one byte short, empty cache: 0", rule: .headroom, minFree: max,
                  free: max - 1, usage: 0, measuresUsage: true, limit: 0),
    ]

    @Test(arguments: limitCases)
    func limit(_ c: LimitCase) {
        let budget = SpaceBudget(maxSize: c.maxSize, minFree: c.minFree, minFreeRule: c.rule)
        #expect(budget.measuresFree == (c.minFree != nil))
        #expect(budget.measuresUsage(free: c.free) == c.measuresUsage)
        #expect(budget.limit(free: c.free, usage: c.usage) == c.limit)
    }

    struct MinFreesCase: CustomTestStringConvertible, Sendable {
        var name: String
        var maxSize: Int64?
        var minFree: Int64?
        var limit: Int64
        var minFrees: Bool
        var testDescription: String { name }
    }

    static let minFreesCases: [MinFreesCase] = [
        MinFreesCase(name: "min-free brought the limit under the cap", maxSize: 10 * gib, minFree: 2 * gib, limit: 3 * gib, minFrees: true),
        MinFreesCase(name: "the limit is the cap", maxSize: 10 * gib, minFree: 2 * gib, limit: 10 * gib, minFrees: false),
        MinFreesCase(name: "no min-free: the cap's", maxSize: 10 * gib, limit: 3 * gib, minFrees: false),
        MinFreesCase(name: "no cap: min-free's", minFree: 2 * gib, limit: 0, minFrees: true),
        MinFreesCase(name: "no cap, a limit of 2^63 - 1: not min-free's", minFree: 2 * gib, limit: max, minFrees: false),
        MinFreesCase(name: "cap 0, limit 0: the cap's", maxSize: 0, minFree: 2 * gib, limit: 0, minFrees: false),
    ]

    @Test(arguments: minFreesCases)
    func minFrees(_ c: MinFreesCase) {
        #expect(SpaceBudget(maxSize: c.maxSize, minFree: c.minFree, minFreeRule: .shortfall).isMinFrees(limit: c.limit) == c.minFrees)
    }

    /// A line of a two-input function: `a`, `b` in, `out` out.
    struct Pair: CustomTestStringConvertible, Sendable {
        var name: String
        var a: Int64
        var b: Int64
        var out: Int64
        var testDescription: String { name }
    }

    static let evictionCapCases: [Pair] = [
        Pair(name: "no allowance: the limit", a: 10 * gib, b: 0, out: 10 * gib),
        Pair(name: "undecided items stand over the limit", a: 10 * gib, b: gib, out: 11 * gib),
        Pair(name: "cap 0", a: 0, b: 0, out: 0),
        Pair(name: "a limit of 2^63 - 1 and an allowance: saturated", a: max, b: 1, out: max),
        Pair(name: "an allowance of 2^63 - 1: saturated", a: 10 * gib, b: max, out: max),
    ]

    @Test(arguments: evictionCapCases)
    func evictionCap(_ c: Pair) {
        #expect(SpaceBudget.evictionCap(limit: c.a, allowance: c.b) == c.out)
    }

    struct StopCase: CustomTestStringConvertible, Sendable {
        var name: String
        var usageAfter: Int64
        var cap: Int64
        var final: Bool
        var onlyRunEntriesStayed: Bool
        var stops: Bool
        var testDescription: String { name }
    }

    static let stopCases: [StopCase] = [
        StopCase(name: "over, only the run's own entries left: stops", usageAfter: 11 * gib, cap: 10 * gib, final: false,
                 onlyRunEntriesStayed: true, stops: true),
        StopCase(name: "at the cap: goes on", usageAfter: 10 * gib, cap: 10 * gib, final: false, onlyRunEntriesStayed: true, stops: false),
        StopCase(name: "over, others stayed (pinned, in use): goes on", usageAfter: 11 * gib, cap: 10 * gib, final: false,
                 onlyRunEntriesStayed: false, stops: false),
        StopCase(name: "over at the run's end: nothing to stop", usageAfter: 11 * gib, cap: 10 * gib, final: true,
                 onlyRunEntriesStayed: true, stops: false),
        StopCase(name: "cap 0, one byte: stops", usageAfter: 1, cap: 0, final: false, onlyRunEntriesStayed: true, stops: true),
        StopCase(name: "a cap of 2^63 - 1: never over", usageAfter: max, cap: max, final: false, onlyRunEntriesStayed: true, stops: false),
    ]

    @Test(arguments: stopCases)
    func runStops(_ c: StopCase) {
        #expect(SpaceBudget.runStops(usageAfter: c.usageAfter, cap: c.cap, final: c.final, onlyRunEntriesStayed: c.onlyRunEntriesStayed) == c.stops)
    }

    struct ChunkCase: CustomTestStringConvertible, Sendable {
        var name: String
        var size: Int64?
        var chunk: Int64
        var testDescription: String { name }
    }

    static let chunkCases: [ChunkCase] = [
        ChunkCase(name: "not measured: 64 MiB", size: nil, chunk: 64 * mib),
        ChunkCase(name: "a large disk: at most 64 MiB", size: 100 * gib, chunk: 64 * mib),
        ChunkCase(name: "512 MiB: exactly 64 MiB", size: 512 * mib, chunk: 64 * mib),
        ChunkCase(name: "80 MiB: an eighth", size: 80 * mib, chunk: 10 * mib),
        ChunkCase(name: "4 MiB: at least 1 MiB", size: 4 * mib, chunk: mib),
        ChunkCase(name: "an empty file system: 1 MiB", size: 0, chunk: mib),
        ChunkCase(name: "2^63 - 1: 64 MiB", size: max, chunk: 64 * mib),
    ]

    @Test(arguments: chunkCases)
    func fullDiskChunk(_ c: ChunkCase) {
        #expect(SpaceBudget.fullDiskChunk(fileSystemSize: c.size) == c.chunk)
    }

    struct MayFitCase: CustomTestStringConvertible, Sendable {
        var name: String
        var wanted: Int64
        var size: Int64?
        var mayFit: Bool
        var testDescription: String { name }
    }

    static let mayFitCases: [MayFitCase] = [
        MayFitCase(name: "a span smaller than the disk", wanted: gib, size: 100 * gib, mayFit: true),
        MayFitCase(name: "a span the disk's size: never fits", wanted: 100 * gib, size: 100 * gib, mayFit: false),
        MayFitCase(name: "2^63 - 1 on a disk of 2^63 - 1: never fits", wanted: max, size: max, mayFit: false),
        MayFitCase(name: "2^63 - 1 wanted: never fits", wanted: max, size: 100 * gib, mayFit: false),
        MayFitCase(name: "the disk not measured: no room made", wanted: 1, size: nil, mayFit: false),
        MayFitCase(name: "nothing wanted, a disk of 0: no room made", wanted: 0, size: 0, mayFit: false),
        MayFitCase(name: "nothing wanted, a disk of 1 byte", wanted: 0, size: 1, mayFit: true),
    ]

    @Test(arguments: mayFitCases)
    func fullDiskMayFit(_ c: MayFitCase) {
        #expect(SpaceBudget.fullDiskMayFit(wanted: c.wanted, fileSystemSize: c.size) == c.mayFit)
    }

    static let fullDiskTargetCases: [Pair] = [
        Pair(name: "prefetch's chunk off the usage", a: 10 * gib, b: 64 * mib, out: 10 * gib - 64 * mib),
        Pair(name: "more to free than the cache holds: 0", a: 10 * mib, b: 64 * mib, out: 0),
        Pair(name: "an empty cache: 0", a: 0, b: 0, out: 0),
        Pair(name: "a span of 2^63 - 1: 0", a: 4 * gib, b: max, out: 0),
        Pair(name: "usage 2^63 - 1, one byte", a: max, b: 1, out: max - 1),
        Pair(name: "usage 0, a span of 2^63 - 1: 0", a: 0, b: max, out: 0),
    ]

    @Test(arguments: fullDiskTargetCases)
    func fullDiskTarget(_ c: Pair) {
        #expect(SpaceBudget.fullDiskTarget(usage: c.a, freeing: c.b) == c.out)
    }

    struct ServeCase: CustomTestStringConvertible, Sendable {
        var name: String
        var limit: Int64
        var wanted: Int64
        var growth: Int64
        var target: Int64
        var usageAfter: Int64?
        var room: Int64
        var testDescription: String { name }
    }

    static let serveCases: [ServeCase] = [
        ServeCase(name: "room for the span and the growth", limit: 10 * gib, wanted: gib, growth: 8 * mib,
                  target: 9 * gib - 8 * mib, usageAfter: 4 * gib, room: 6 * gib - 8 * mib),
        ServeCase(name: "eviction reached its target: room for the span exactly", limit: 10 * gib, wanted: gib, growth: 8 * mib,
                  target: 9 * gib - 8 * mib, usageAfter: 9 * gib - 8 * mib, room: gib),
        ServeCase(name: "eviction failed: counted as full, no room", limit: 10 * gib, wanted: gib, growth: 8 * mib,
                  target: 9 * gib - 8 * mib, usageAfter: nil, room: -8 * mib),
        ServeCase(name: "still over the limit: negative room", limit: 10 * gib, wanted: gib, growth: 0,
                  target: 9 * gib, usageAfter: 12 * gib, room: -2 * gib),
        ServeCase(name: "a span the limit's size: evict all", limit: 10 * gib, wanted: 10 * gib, growth: 0,
                  target: 0, usageAfter: 0, room: 10 * gib),
        ServeCase(name: "cap 0: nothing stored", limit: 0, wanted: gib, growth: 8 * mib,
                  target: 0, usageAfter: 0, room: -8 * mib),
        ServeCase(name: "a span of 2^63 - 1: all of the limit", limit: 10 * gib, wanted: max, growth: 8 * mib,
                  target: 0, usageAfter: 0, room: 10 * gib - 8 * mib),
        ServeCase(name: "a growth of 2^63 - 1: evict all, no room", limit: 10 * gib, wanted: gib, growth: max,
                  target: 0, usageAfter: 0, room: 10 * gib - max),
        ServeCase(name: "a limit of 2^63 - 1, nothing wanted", limit: max, wanted: 0, growth: 0,
                  target: max, usageAfter: 0, room: max),
        ServeCase(name: "a limit of 2^63 - 1, a span of 2^63 - 1", limit: max, wanted: max, growth: 0,
                  target: 0, usageAfter: nil, room: 0),
        ServeCase(name: "limit 0, usage 2^63 - 1 and growth 2^63 - 1: saturated", limit: 0, wanted: max, growth: max,
                  target: 0, usageAfter: max, room: .min),
    ]

    @Test(arguments: serveCases)
    func serveRoom(_ c: ServeCase) {
        #expect(SpaceBudget.evictionTarget(limit: c.limit, wanted: c.wanted, growth: c.growth) == c.target)
        #expect(SpaceBudget.room(limit: c.limit, usageAfter: c.usageAfter, growth: c.growth) == c.room)
    }
}
