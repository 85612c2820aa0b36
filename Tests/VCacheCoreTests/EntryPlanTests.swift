import Testing
@testable import VCacheCore

/// What an entry asks for next, one line per situation.
@Suite struct EntryPlanTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var requests: [RangeRequest] = []
        var length: Int64?
        var held: [ByteRange] = []
        var mp4: [ByteRange] = []
        var stop: Int64?
        var coalesceGap: Int64 = 0
        /// The Range asked (`bytes=` omitted); nil: nothing more to ask.
        var expected: String?
        var testDescription: String { name }
    }

    static func r(_ a: Int64, _ b: Int64) -> ByteRange { ByteRange(a, b) }

    static let cases: [Case] = [
        Case(name: "length unknown, nothing held: the whole video from 0, open-ended", expected: "0-"),
        Case(name: "length unknown, a prefix held: from where it ends", held: [r(0, 500)], expected: "500-"),
        Case(name: "length unknown, the first 100 bytes half held: the rest of them",
             requests: [.head(100)], held: [r(0, 50)], expected: "50-99"),
        Case(name: "length unknown, the first 100 bytes held: nothing", requests: [.head(100)], held: [r(0, 100)], expected: nil),
        Case(name: "length unknown, a suffix: asked as is, held or not", requests: [.suffix(100)], held: [r(0, 100)], expected: "-100"),
        Case(name: "length unknown, the first request held: the second's gap",
             requests: [.head(100), .span(first: 200, last: 299)], held: [r(0, 100)], expected: "200-299"),
        Case(name: "length unknown, the MP4's ranges and the stop point wait for the length",
             requests: [.head(100)], held: [r(0, 100)], mp4: [r(900, 1000)], stop: 50, expected: nil),
        Case(name: "length known, nothing held: the whole video in one request", length: 1000, expected: "0-999"),
        Case(name: "length known, the middle held: the first gap",
             length: 1000, held: [r(100, 900)], expected: "0-99"),
        Case(name: "gaps closer than the coalescing distance go in one request",
             length: 1000, held: [r(100, 200)], coalesceGap: 101, expected: "0-999"),
        Case(name: "gaps exactly the coalescing distance apart go one by one",
             length: 1000, held: [r(100, 200)], coalesceGap: 100, expected: "0-99"),
        Case(name: "what the MP4's structure needs beyond the requests",
             requests: [.head(100)], length: 1000, held: [r(0, 100)], mp4: [r(900, 1000)], expected: "900-999"),
        Case(name: "nothing from the stop point on",
             length: 1000, held: [r(0, 500)], stop: 500, expected: nil),
        Case(name: "a stop point inside a gap cuts it",
             length: 1000, stop: 300, expected: "0-299"),
        Case(name: "a negative stop point wants nothing",
             length: 1000, stop: -5, expected: nil),
        Case(name: "a span past the end: nothing", requests: [.span(first: 2000, last: 2999)], length: 1000, expected: nil),
        Case(name: "a suffix with the length known: its bytes", requests: [.suffix(100)], length: 1000, expected: "900-999"),
        Case(name: "the first 100 bytes of a 60-byte video: all of it", requests: [.head(100)], length: 60, expected: "0-59"),
    ]

    static func plan(_ c: Case) -> EntryPlan {
        var p = EntryPlan(requests: c.requests, coalesceGap: c.coalesceGap)
        p.addMP4(RangeSet(c.mp4))
        return p
    }

    @Test(arguments: cases)
    func nextRequest(_ c: Case) {
        #expect(Self.plan(c).next(length: c.length, held: RangeSet(c.held), stop: c.stop)?.spec == c.expected)
    }

    struct End: CustomTestStringConvertible, Sendable {
        var name: String
        var requests: [RangeRequest]
        var length: Int64?
        var stop: Int64?
        var expected: Int64?
        var testDescription: String { name }
    }

    static let ends: [End] = [
        End(name: "length unknown, bounded requests: the farthest end", requests: [.head(100), .span(first: 200, last: 299)], expected: 300),
        End(name: "length unknown, an open request: no end", requests: [.head(100), .span(first: 200, last: nil)], expected: nil),
        End(name: "length unknown, the whole video: no end", requests: [], expected: nil),
        End(name: "length known: the end of the last wanted range", requests: [.head(100)], length: 1000, expected: 100),
        End(name: "length known, a stop point: no farther", requests: [], length: 1000, stop: 400, expected: 400),
        End(name: "length known, nothing wanted: 0", requests: [.span(first: 2000, last: nil)], length: 1000, expected: 0),
    ]

    @Test(arguments: ends)
    func whereA200MayStop(_ e: End) {
        #expect(EntryPlan(requests: e.requests, coalesceGap: 0).wantedEnd(length: e.length, stop: e.stop) == e.expected)
    }

    @Test func aNewVersionWalksTheMP4Again() {
        var p = EntryPlan(requests: [.head(100)], coalesceGap: 0)
        p.addMP4(RangeSet([Self.r(900, 1000)]))
        p.settleMP4()
        p.restartMP4()
        #expect(p.mp4Ranges.isEmpty && !p.mp4Settled)
        #expect(p.target(length: 1000, stop: nil) == RangeSet([Self.r(0, 100)]))
    }
}
