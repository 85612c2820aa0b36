import Testing
@testable import VCacheCore

/// Where serve's storing jobs run and when they stop, as pure values: no origin, no process.
@Suite struct ServeJobRulesTests {
    static let mib: Int64 = 1 << 20

    struct SpanCase: CustomTestStringConvertible, Sendable {
        var name: String
        var wanted: ByteRange
        var running: [ByteRange] = []
        var room: Int64?
        var overtaken: [Int] = []
        var span: ByteRange?
        var testDescription: String { name }
    }

    static let spanCases: [SpanCase] = [
        SpanCase(name: "no job running: the whole span wanted",
                 wanted: ByteRange(4 * mib, 16 * mib), span: ByteRange(4 * mib, 16 * mib)),
        SpanCase(name: "a later job: the new one stops where it begins",
                 wanted: ByteRange(0, 16 * mib), running: [ByteRange(8 * mib, 16 * mib)], span: ByteRange(0, 8 * mib)),
        SpanCase(name: "a job far behind, covering the point: overtaken, its span's rest taken over",
                 wanted: ByteRange(4 * mib, 6 * mib), running: [ByteRange(0, 12 * mib)], overtaken: [0], span: ByteRange(4 * mib, 12 * mib)),
        SpanCase(name: "a job that ended before the point: neither overtaken nor a limit",
                 wanted: ByteRange(8 * mib, 16 * mib), running: [ByteRange(0, 8 * mib)], span: ByteRange(8 * mib, 16 * mib)),
        SpanCase(name: "an overtaken job and a later one just past the point: the byte between",
                 wanted: ByteRange(4 * mib, 16 * mib), running: [ByteRange(0, 2 * mib), ByteRange(4 * mib + 1, 9 * mib), ByteRange(4 * mib, 5 * mib)],
                 overtaken: [2], span: ByteRange(4 * mib, 4 * mib + 1)),
        SpanCase(name: "nothing wanted: no job", wanted: ByteRange(4 * mib, 4 * mib), span: nil),
        SpanCase(name: "room: the span cut to it",
                 wanted: ByteRange(0, 16 * mib), room: 3 * mib, span: ByteRange(0, 3 * mib)),
        SpanCase(name: "room: running jobs' whole spans count against it",
                 wanted: ByteRange(0, 8 * mib), running: [ByteRange(10 * mib, 12 * mib)], room: 3 * mib, span: ByteRange(0, mib)),
        SpanCase(name: "room: an overtaken job counts up to the point only",
                 wanted: ByteRange(4 * mib, 8 * mib), running: [ByteRange(0, 8 * mib)], room: 6 * mib, overtaken: [0], span: ByteRange(4 * mib, 6 * mib)),
        SpanCase(name: "room below 64 KiB: no job",
                 wanted: ByteRange(0, 8 * mib), room: (64 << 10) - 1, span: nil),
        SpanCase(name: "room of exactly 64 KiB: a job of 64 KiB",
                 wanted: ByteRange(0, 8 * mib), room: 64 << 10, span: ByteRange(0, 64 << 10)),
    ]

    @Test(arguments: spanCases) func newJobSpan(_ c: SpanCase) {
        let job = ServeDecision.NewJob(wanted: c.wanted, running: c.running)
        #expect(job.overtaken == c.overtaken)
        #expect(job.fitted(room: c.room) == c.span)
    }

    struct StopCase: CustomTestStringConvertible, Sendable {
        var name: String
        var position: Int64
        var end: Int64
        var have: [ByteRange] = []
        var stops: Bool
        var testDescription: String { name }
    }

    static let stopCases: [StopCase] = [
        StopCase(name: "far from its end: stopped", position: 0, end: 8 * mib, stops: true),
        StopCase(name: "within a MiB of its end: finishes", position: 7 * mib, end: 8 * mib, stops: false),
        StopCase(name: "just over a MiB left: stopped", position: 7 * mib - 1, end: 8 * mib, stops: true),
        StopCase(name: "what is claimed or written already is not left to fetch",
                 position: 0, end: 8 * mib, have: [ByteRange(0, 4 * mib), ByteRange(5 * mib, 8 * mib)], stops: false),
        StopCase(name: "at its end already: nothing to stop", position: 8 * mib, end: 8 * mib, stops: false),
        StopCase(name: "overtaken past its position (its end moved back): nothing to stop", position: 6 * mib, end: 4 * mib, stops: false),
    ]

    @Test(arguments: stopCases) func lastReaderLeaving(_ c: StopCase) {
        #expect(ServeDecision.stopsWithoutReaders(from: c.position, to: c.end, have: RangeSet(c.have)) == c.stops)
    }
}
