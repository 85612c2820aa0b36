import Foundation
import Testing
@testable import VCacheCore

/// The eviction order as a pure choice: rows, filters, pins, exclusions and a cap in, victims out.
@Suite struct EvictionChoiceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// An entry `name` of `disk` bytes last used `age` seconds ago.
    static func row(_ name: CacheKey, disk: Int64 = 100, age: Double, pinned: Bool = false, complete: Bool = true) -> CacheEntry {
        CacheEntry(key: name, url: "http://o/\(name)", latestURL: "http://o/\(name)", length: disk, etag: nil, lastModified: nil,
                   contentType: nil, created: now - age, lastUsed: now - age, completed: complete ? now - age : nil, sha256: nil,
                   pinned: pinned, cachedBytes: disk, diskBytes: disk, ranges: RangeSet())
    }

    static let rows = [row("a", age: 50), row("b", age: 40, pinned: true), row("c", age: 30, complete: false),
                       row("d", age: 20), row("e", age: 10)]
    // fixed 10 + 5 entries x (100 + 4) = 530 in all.
    static let footprint = Evictor.Footprint(fixed: 10, perEntry: 4)

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var criteria: Evictor.Criteria
        var excluded: [CacheKey: String] = [:]
        var victims: [CacheKey]
        var skipped: [CacheKey] = []
        var usageAfter: Int64
        var testDescription: String { name }
    }

    static func criteria(_ edit: (inout Evictor.Criteria) -> Void) -> Evictor.Criteria {
        var c = Evictor.Criteria()
        edit(&c)
        return c
    }

    static let cases: [Case] = [
        Case(name: "under the cap: nothing", criteria: criteria { $0.maxSize = 530 }, victims: [], usageAfter: 530),
        Case(name: "one byte over: the oldest", criteria: criteria { $0.maxSize = 529 }, victims: ["a"], usageAfter: 426),
        Case(name: "a pinned entry stays, the next goes", criteria: criteria { $0.maxSize = 400 },
             victims: ["a", "c"], skipped: ["b"], usageAfter: 322),
        Case(name: "include pinned", criteria: criteria { $0.maxSize = 400; $0.includePinned = true },
             victims: ["a", "b"], usageAfter: 322),
        Case(name: "an excluded entry (in use) stays", criteria: criteria { $0.maxSize = 426 }, excluded: ["a": "in use"],
             victims: ["c"], skipped: ["a", "b"], usageAfter: 426),
        Case(name: "this run's entries are protected", criteria: criteria { $0.maxSize = 0; $0.protected = ["e"] },
             victims: ["a", "c", "d"], skipped: ["b", "e"], usageAfter: 218),
        Case(name: "cap 0 with pinned: all that can go", criteria: criteria { $0.maxSize = 0; $0.includePinned = true },
             victims: ["a", "b", "c", "d", "e"], usageAfter: 10),
        Case(name: "older than 25 s", criteria: criteria { $0.olderThan = 25 }, victims: ["a", "c"], skipped: ["b"], usageAfter: 322),
        Case(name: "partial only", criteria: criteria { $0.partialOnly = true }, victims: ["c"], usageAfter: 426),
        Case(name: "named: pinned goes too", criteria: criteria { $0.keys = ["b", "d"] }, victims: ["b", "d"], usageAfter: 322),
        Case(name: "all", criteria: criteria { $0.all = true }, victims: ["a", "c", "d", "e"], skipped: ["b"], usageAfter: 114),
        Case(name: "filters and a cap: only matching, only until it fits",
             criteria: criteria { $0.maxSize = 420; $0.olderThan = 15 }, victims: ["a", "c"], skipped: ["b"], usageAfter: 322),
    ]

    @Test(arguments: cases)
    func choice(_ t: Case) {
        let out = EvictionChoice.choose(Self.rows.shuffled(), t.criteria, footprint: Self.footprint, excluded: t.excluded, now: Self.now)
        #expect(out.victims == t.victims)
        #expect(out.skipped.map(\.key) == t.skipped)
        #expect(out.usageAfter == t.usageAfter)
    }

    @Test func tiesInLastUseGoByKey() {
        let rows = [Self.row("z", age: 5), Self.row("m", age: 5), Self.row("q", age: 5)]
        let out = EvictionChoice.choose(rows, Self.criteria { $0.all = true }, footprint: Self.footprint, now: Self.now)
        #expect(out.victims == ["m", "q", "z"])
    }
}

/// A stream is one unit to eviction (issue 24): least recently used by its most recent member,
/// removed whole or kept whole, never half of it for the cap.
@Suite struct StreamEvictionChoiceTests {
    typealias T = EvictionChoiceTests
    static let now = T.now
    // A stream m (its playlist p, segments s1 s2) whose oldest members are older than the lone
    // entry x, but whose segment s2 was used after x.
    static let rows = [T.row("m", age: 60), T.row("p", age: 55), T.row("s1", age: 50), T.row("s2", age: 5), T.row("x", age: 30)]
    // s3: named by the stream, not cached yet.
    static let streams: [CacheKey: [CacheKey]] = ["m": ["m"], "p": ["m"], "s1": ["m"], "s2": ["m"], "s3": ["m"]]
    // 10 + 5 x 104 = 530.
    static let footprint = T.footprint

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var rows: [CacheEntry] = StreamEvictionChoiceTests.rows
        var criteria: Evictor.Criteria
        var excluded: [CacheKey: String] = [:]
        var victims: [CacheKey]
        var skipped: [CacheKey] = []
        var usageAfter: Int64
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "the stream was used after x: x goes first, not the stream's old segments",
             criteria: T.criteria { $0.maxSize = 500 }, victims: ["x"], usageAfter: 426),
        Case(name: "still over: the whole stream, root first", criteria: T.criteria { $0.maxSize = 400 },
             victims: ["x", "m", "p", "s1", "s2"], usageAfter: 10),
        Case(name: "one pinned member keeps the stream", rows: rows.map { $0.key == "s1" ? T.row("s1", age: 50, pinned: true) : $0 },
             criteria: T.criteria { $0.maxSize = 0 }, victims: ["x"], skipped: ["s1"], usageAfter: 426),
        Case(name: "a member in use keeps the stream", criteria: T.criteria { $0.maxSize = 0 }, excluded: ["p": "in use"],
             victims: ["x"], skipped: ["p"], usageAfter: 426),
        Case(name: "a member this run fills keeps the stream", criteria: T.criteria { $0.maxSize = 0; $0.protected = ["s2"] },
             victims: ["x"], skipped: ["s2"], usageAfter: 426),
        Case(name: "older than 20 s: the stream is as recent as its last use", criteria: T.criteria { $0.olderThan = 20 },
             victims: ["x"], usageAfter: 426),
        Case(name: "a partial member makes the stream partial", rows: rows.map { $0.key == "s2" ? T.row("s2", age: 5, complete: false) : $0 },
             criteria: T.criteria { $0.partialOnly = true }, victims: ["m", "p", "s1", "s2"], usageAfter: 114),
        Case(name: "the root named: the whole stream", criteria: T.criteria { $0.keys = ["m"] }, victims: ["m", "p", "s1", "s2"], usageAfter: 114),
        Case(name: "a member named: it alone", criteria: T.criteria { $0.keys = ["s1"] }, victims: ["s1"], usageAfter: 426),
        Case(name: "alone: the root named goes by itself", criteria: T.criteria { $0.keys = ["m"]; $0.alone = true }, victims: ["m"], usageAfter: 426),
        Case(name: "a segment not cached yet that this run fills (serve plays it) keeps its whole stream",
             criteria: T.criteria { $0.maxSize = 0; $0.protected = ["s3"] }, victims: ["x"], skipped: ["m"], usageAfter: 426),
    ]

    /// Two streams naming one audio rendition (its playlist a, segment a1): each stream is a unit,
    /// and what both name goes with the last of them (never for the first).
    static let sharedRows = [T.row("m", age: 60), T.row("v1", age: 58), T.row("a", age: 57), T.row("a1", age: 56),
                             T.row("n", age: 40), T.row("v2", age: 39)]
    static let shared: [CacheKey: [CacheKey]] = ["m": ["m"], "v1": ["m"], "a": ["m", "n"], "a1": ["m", "n"], "n": ["n"], "v2": ["n"], "s3": ["m"]]

    static let sharedCases: [Case] = [
        Case(name: "the older stream goes, what the other names stays", rows: sharedRows,
             criteria: T.criteria { $0.maxSize = 500 }, victims: ["m", "v1"], usageAfter: 426),
        Case(name: "both go: the shared members with the last", rows: sharedRows,
             criteria: T.criteria { $0.maxSize = 0 }, victims: ["m", "v1", "n", "a", "a1", "v2"], usageAfter: 10),
        Case(name: "named: the stream's own members, the shared ones stay", rows: sharedRows,
             criteria: T.criteria { $0.keys = ["n"] }, victims: ["n", "v2"], usageAfter: 426),
        Case(name: "a shared member pinned by the other stream does not keep this one", rows: sharedRows.map { $0.key == "a" ? T.row("a", age: 57, pinned: true) : $0 },
             criteria: T.criteria { $0.maxSize = 500 }, victims: ["m", "v1"], usageAfter: 426),
        Case(name: "a shared member in use does not keep the stream that would not take it", rows: sharedRows,
             criteria: T.criteria { $0.maxSize = 500 }, excluded: ["a1": "in use"], victims: ["m", "v1"], usageAfter: 426),
    ]

    @Test(arguments: sharedCases)
    func sharedChoice(_ t: Case) {
        let out = EvictionChoice.choose(t.rows.shuffled(), t.criteria, footprint: Self.footprint, excluded: t.excluded, streams: Self.shared, now: Self.now)
        #expect(out.victims == t.victims)
        #expect(out.skipped.map(\.key) == t.skipped)
        #expect(out.usageAfter == t.usageAfter)
    }

    @Test(arguments: cases)
    func choice(_ t: Case) {
        let out = EvictionChoice.choose(t.rows.shuffled(), t.criteria, footprint: Self.footprint, excluded: t.excluded, streams: Self.streams, now: Self.now)
        #expect(out.victims == t.victims)
        #expect(out.skipped.map(\.key) == t.skipped)
        #expect(out.usageAfter == t.usageAfter)
    }
}

/// Whether an item can fit at all, before anything is evicted for it (ItemFit).
@Suite struct ItemFitTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var sizes: [Int64?]
        var verdict: ItemFit.Verdict
        var testDescription: String { name }
    }

    // fixed 100, 10 a part, limit 1000.
    static let cases: [Case] = [
        Case(name: "every size known, under the limit", sizes: [200, 300], verdict: .fits),
        Case(name: "exactly the limit", sizes: [400, 480], verdict: .fits),
        Case(name: "one byte over", sizes: [400, 481], verdict: .neverFits(needs: 1001)),
        Case(name: "a size unknown: undecided, holding what is known", sizes: [200, nil], verdict: .undecided(holds: 220)),
        Case(name: "what is known already too much: never, unknown parts or not", sizes: [900, nil, nil], verdict: .neverFits(needs: 1030)),
        Case(name: "nothing yet", sizes: [], verdict: .fits),
    ]

    @Test(arguments: cases)
    func verdict(_ t: Case) {
        #expect(ItemFit.verdict(t.sizes, fixed: 100, perPart: 10, limit: 1000) == t.verdict)
    }
}
