import Testing
@testable import VCacheCore

/// How `--connections N` cuts an entry's missing bytes, one line per situation.
@Suite struct ConnectionSplitTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var missing: [ByteRange]
        var connections: Int
        /// Each piece's ranges.
        var expected: [[ByteRange]]
        var testDescription: String { name }
    }

    static let mib: Int64 = 1 << 20
    static func r(_ a: Int64, _ b: Int64) -> ByteRange { ByteRange(a, b) }
    static func m(_ a: Int64, _ b: Int64) -> ByteRange { ByteRange(a * mib, b * mib) }

    static let cases: [Case] = [
        Case(name: "nothing missing: no piece", missing: [], connections: 4, expected: []),
        Case(name: "one connection: all of it, one piece", missing: [m(0, 40)], connections: 1, expected: [[m(0, 40)]]),
        Case(name: "a 2 MiB head stays one request", missing: [m(0, 2)], connections: 8, expected: [[m(0, 2)]]),
        Case(name: "under two minimum pieces (7 MiB): one", missing: [m(0, 7)], connections: 4, expected: [[m(0, 7)]]),
        Case(name: "10 MiB over 4 connections: two pieces of 5 MiB", missing: [m(0, 10)], connections: 4, expected: [[m(0, 5)], [m(5, 10)]]),
        Case(name: "40 MiB over 4: four pieces of 10 MiB", missing: [m(0, 40)], connections: 4,
             expected: [[m(0, 10)], [m(10, 20)], [m(20, 30)], [m(30, 40)]]),
        Case(name: "gaps: a piece takes consecutive missing bytes across them",
             missing: [m(10, 20), m(50, 100)], connections: 4,
             expected: [[m(10, 20), m(50, 55)], [m(55, 70)], [m(70, 85)], [m(85, 100)]]),
        Case(name: "a cut inside a gap moves up to the next 64 KiB boundary",
             missing: [r(1000, 1000 + 10 * mib)], connections: 2,
             expected: [[r(1000, 5 * mib + 65_536)], [r(5 * mib + 65_536, 1000 + 10 * mib)]]),
        Case(name: "a cut that would move past its gap's end stays at that end",
             missing: [r(0, 5 * mib + 1000), r(20 * mib, 25 * mib - 990)], connections: 2,
             expected: [[r(0, 5 * mib + 1000)], [r(20 * mib, 25 * mib - 990)]]),
        Case(name: "more connections than pieces of 4 MiB (and a block to spare): as many as fit",
             missing: [m(0, 13)], connections: 64, expected: [[r(0, 4_587_520)], [r(4_587_520, 9_109_504)], [r(9_109_504, 13 * mib)]]),
        Case(name: "under two minimum pieces and a block (8 MiB): one", missing: [m(0, 8)], connections: 4, expected: [[m(0, 8)]]),
        Case(name: "near 2^63: no overflow, at most N pieces",
             missing: [r(0, Int64.max - 1)], connections: 2,
             expected: [[r(0, 4_611_686_018_427_387_904)], [r(4_611_686_018_427_387_904, Int64.max - 1)]]),
    ]

    @Test(arguments: cases)
    func pieces(_ c: Case) {
        let got = ConnectionSplit.pieces(c.missing, connections: c.connections).map(\.ranges)
        #expect(got == c.expected)
    }

    @Test(arguments: [1, 2, 3, 4, 7, 16, 64])
    func piecesCoverTheMissingBytesOnceInOrder(_ n: Int) {
        let missing = [Self.r(0, 3 * Self.mib + 17), Self.r(5 * Self.mib, 41 * Self.mib + 5), Self.r(60 * Self.mib, 61 * Self.mib)]
        let pieces = ConnectionSplit.pieces(missing, connections: n)
        #expect(pieces.count <= n)
        #expect(pieces.allSatisfy { $0.count >= ConnectionSplit.minimumPiece || pieces.count == 1 })
        var all = RangeSet()
        for p in pieces {
            #expect(!all.ranges.contains { a in p.ranges.contains { b in a.lowerBound < b.upperBound && b.lowerBound < a.upperBound } })
            #expect(all.ranges.last.map { $0.upperBound <= p.ranges[0].lowerBound } ?? true)
            all.formUnion(p)
        }
        #expect(all == RangeSet(missing))
    }

    @Test func jobsTimesConnectionsStaysWithin64() {
        #expect(PrefetchOptions.connectionsPerEntry(4, jobs: 4) == 4)
        #expect(PrefetchOptions.connectionsPerEntry(64, jobs: 4) == 16)
        #expect(PrefetchOptions.connectionsPerEntry(16, jobs: 8) == 8)
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: 64) == 1)
        #expect(PrefetchOptions.connectionsPerEntry(1, jobs: 1) == 1)
        #expect(PrefetchOptions.connectionsPerEntry(64, jobs: 1) == 64)
    }

    /// Further connections get only the descriptors `ulimit -n` leaves beyond 32 for the run and 4
    /// for each download: under `ulimit -n 32` with `-j 8` they would take the sockets other
    /// videos' own transfers need.
    @Test func furtherConnectionsTakeOnlyTheDescriptorsTheDownloadsLeave() {
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: 8, descriptors: 32) == 1)
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: 8, descriptors: 64) == 1)   // 64 - 32 - 32 = 0 spare
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: 8, descriptors: 72) == 2)   // 8 spare: one more each
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: 8, descriptors: 256) == 8)
        #expect(PrefetchOptions.connectionsPerEntry(64, jobs: 1, descriptors: 20) == 1)
        #expect(PrefetchOptions.connectionsPerEntry(64, jobs: 1, descriptors: 46) == 11)  // 46 - 36 = 10 spare
        #expect(PrefetchOptions.connectionsPerEntry(16, jobs: 4, descriptors: 1024) == 16)
        #expect(PrefetchOptions.connectionsPerEntry(64, jobs: 4, descriptors: 1 << 20) == 16)
        #expect(PrefetchOptions.connectionsPerEntry(8, jobs: .max, descriptors: .max) == 1)
        #expect(PrefetchOptions.connectionsPerEntry(1, jobs: 1, descriptors: 0) == 1)
    }
}
