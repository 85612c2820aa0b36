import Foundation
import Testing
@testable import VCacheCore

/// Segment addressing (ISO/IEC 23009-1 §5.3.9): templates, timelines, lists, SegmentBase's sidx,
/// the first N seconds, and hostile numbers that must give errors, never traps.
@Suite struct DASHSegmentTests {
    static let url = "https://cdn.example/v/manifest.mpd"

    static func rep(_ segment: String, extra: String = "", mpd: String = "mediaPresentationDuration=\"PT6S\"") throws -> (MPD.Representation, MPD.Period, MPD) {
        let m = try MPD.parse(Array("""
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" \(mpd)><Period>\(extra)<AdaptationSet>
            <Representation id="v1" bandwidth="800000">\(segment)</Representation></AdaptationSet></Period></MPD>
            """.utf8), url: url)
        return (m.periods[0].adaptationSets[0].representations[0], m.periods[0], m)
    }

    static func names(_ p: DASHSegmentPlan) -> [String] {
        p.segments.map { String($0.url.dropFirst("https://cdn.example/v/".count)) }
    }

    @Test(arguments: [
        ("$Number$", "s$Number$.m4s", "s7.m4s"),
        ("%05d", "s$Number%05d$.m4s", "s00007.m4s"),
        ("$$ is a dollar", "a$$b$Number$", "a$b7"),
        ("RepresentationID and Bandwidth", "$RepresentationID$/$Bandwidth$/$Time$", "v1/800000/700"),
        ("a wider number than the width", "$Number%01d$", "7"),
    ] as [(String, String, String)])
    func templatesSubstitute(_ what: String, _ template: String, _ expected: String) throws {
        let t = try DASHTemplate(template)
        #expect(t.substitute(representationID: "v1", bandwidth: 800000, number: 7, time: 700) == expected, "\(what)")
    }

    @Test(arguments: [
        ("$Number", "a '$' is not closed"),
        ("$number$", "unknown identifier '$number$'"),
        ("$Number%5d$", "format tag '%5d' is not %0<width>d with a width of 1 to 32"),
        ("$Number%0999999999d$", "format tag '%0999999999d' is not %0<width>d with a width of 1 to 32"),
        ("$Number%05x$", "format tag '%05x' is not %0<width>d with a width of 1 to 32"),
        ("$RepresentationID%05d$", "$RepresentationID$ takes no format tag"),
    ])
    func badTemplatesAreRefused(_ template: String, _ why: String) {
        #expect(throws: DASHTemplate.Error(template: template, why: why)) { try DASHTemplate(template) }
    }

    @Test func numberTemplateCountsByPeriodDuration() throws {
        let (r, p, _) = try Self.rep("<SegmentTemplate timescale=\"1000000\" duration=\"2000000\" startNumber=\"1\" media=\"c-$Number%05d$.m4s\" initialization=\"init-$RepresentationID$.m4s\"/>",
                                     mpd: "mediaPresentationDuration=\"PT5.0S\"")
        let plan = try r.plan(periodDuration: p.duration)
        #expect(Self.names(plan) == ["c-00001.m4s", "c-00002.m4s", "c-00003.m4s"])  // ceil(5/2)
        #expect(plan.segments.map(\.start) == [0, 2, 4])
        #expect(plan.initialization == MPD.URLRange(url: "https://cdn.example/v/init-v1.m4s", range: nil))
        // The first N seconds: segments starting before N.
        #expect(Self.names(try r.plan(periodDuration: p.duration, until: 2)) == ["c-00001.m4s"])
        #expect(Self.names(try r.plan(periodDuration: p.duration, until: 2.5)) == ["c-00001.m4s", "c-00002.m4s"])
        #expect(Self.names(try r.plan(periodDuration: p.duration, until: 0)) == [])
    }

    @Test func endNumberBoundsATemplate() throws {
        let (r, _, _) = try Self.rep("<SegmentTemplate duration=\"2\" startNumber=\"10\" endNumber=\"12\" media=\"$Number$\"/>")
        #expect(Self.names(try r.plan(periodDuration: nil)) == ["10", "11", "12"])
    }

    @Test func timelineRepeatsAndContinues() throws {
        // ffmpeg's audio timeline: t=0 d=95232, then 2 of 96256, then 256.
        let (r, p, _) = try Self.rep("""
            <SegmentTemplate timescale="48000" media="a-$Time$-$Number$.m4s" startNumber="1"><SegmentTimeline>
            <S t="0" d="95232"/><S d="96256" r="1"/><S d="256"/></SegmentTimeline></SegmentTemplate>
            """)
        let plan = try r.plan(periodDuration: p.duration)
        #expect(Self.names(plan) == ["a-0-1.m4s", "a-95232-2.m4s", "a-191488-3.m4s", "a-287744-4.m4s"])
        #expect(plan.segments.map { ($0.start * 1000).rounded() / 1000 } == [0, 1.984, 3.989, 5.995])
        // Per Representation: 4 s of this audio needs the third segment (it starts at 3.989 s).
        #expect(try r.plan(periodDuration: p.duration, until: 4).segments.count == 3)
    }

    @Test func timelineRepeatToTheEnd() throws {
        // r=-1 to the next S@t.
        let (a, pa, _) = try Self.rep("<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S t=\"0\" d=\"2\" r=\"-1\"/><S t=\"8\" d=\"1\"/></SegmentTimeline></SegmentTemplate>")
        #expect(Self.names(try a.plan(periodDuration: pa.duration)) == ["0", "2", "4", "6", "8"])
        // r=-1 to the Period's end (6 s), with a presentationTimeOffset.
        let (b, pb, _) = try Self.rep("<SegmentTemplate presentationTimeOffset=\"100\" media=\"$Time$\"><SegmentTimeline><S t=\"100\" d=\"4\" r=\"-1\"/></SegmentTimeline></SegmentTemplate>")
        let plan = try b.plan(periodDuration: pb.duration)
        #expect(Self.names(plan) == ["100", "104"])
        #expect(plan.segments.map(\.start) == [0, 4])
        // r=-1 with no end known.
        let (c, _, _) = try Self.rep("<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S d=\"4\" r=\"-1\"/></SegmentTimeline></SegmentTemplate>", mpd: "")
        #expect(throws: DASHError.unbounded(representation: "v1", why: "S@r=\"-1\" repeats to the Period's end, and the Period has no duration")) {
            try c.plan(periodDuration: nil)
        }
    }

    @Test func hostileNumbersGiveErrorsNeverTraps() throws {
        let huge = try Self.rep("<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S d=\"1\" r=\"9223372036854775807\"/></SegmentTimeline></SegmentTemplate>").0
        #expect(throws: DASHError.tooManySegments(representation: "v1", limit: DASHLimits.maxSegments)) { try huge.plan(periodDuration: 6) }
        // ... but its first seconds are computed without expanding the rest.
        #expect(try huge.plan(periodDuration: 6, until: 3).segments.count == 3)
        let nearMax = try Self.rep("<SegmentTemplate duration=\"1\" startNumber=\"9223372036854775806\" media=\"$Number$\"/>").0
        #expect(throws: DASHError.overflow(representation: "v1", what: "$Number$ (@startNumber + the segment's index)")) { try nearMax.plan(periodDuration: 6) }
        let timeOverflow = try Self.rep("<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S t=\"9223372036854775800\" d=\"5\" r=\"3\"/></SegmentTimeline></SegmentTemplate>").0
        #expect(throws: DASHError.overflow(representation: "v1", what: "the SegmentTimeline's time (S@t + S@d x repeats)")) { try timeOverflow.plan(periodDuration: nil) }
        let longPeriod = try Self.rep("<SegmentTemplate duration=\"1\" media=\"$Number$\"/>", mpd: "mediaPresentationDuration=\"PT100000000000000000000000000000S\"")
        #expect(throws: DASHError.tooManySegments(representation: "v1", limit: DASHLimits.maxSegments)) { try longPeriod.0.plan(periodDuration: longPeriod.1.duration) }
        let unbounded = try Self.rep("<SegmentTemplate duration=\"1\" media=\"$Number$\"/>", mpd: "").0
        #expect(throws: DASHError.unbounded(representation: "v1", why: "its Period has no duration and its SegmentTemplate no @endNumber: the segment count is unbounded")) {
            try unbounded.plan(periodDuration: nil)
        }
        let backwards = try Self.rep("<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S t=\"10\" d=\"5\"/><S t=\"3\" d=\"5\"/></SegmentTimeline></SegmentTemplate>").0
        #expect(throws: DASHError.badValue(element: "S", attribute: "t", value: "3", why: "goes back before the end of the segment before it")) { try backwards.plan(periodDuration: 6) }
    }

    @Test func liveTemplateListsWhatIsAvailableNow() throws {
        let (r, p, m) = try Self.rep("<SegmentTemplate timescale=\"1\" duration=\"2\" startNumber=\"1\" media=\"$Number$\"/>",
                                     mpd: "type=\"dynamic\" availabilityStartTime=\"1970-01-01T00:00:00Z\" timeShiftBufferDepth=\"PT6S\"")
        // 21 s after the start: segments 1 to 10 have ended; the buffer keeps the last 3.
        let plan = try r.plan(periodDuration: p.duration, live: (DASHLiveClock(now: 21), m, p.start))
        #expect(Self.names(plan) == ["8", "9", "10"])
    }

    @Test func segmentListAndItsTimes() throws {
        let (r, p, _) = try Self.rep("""
            <SegmentList timescale="1000000" duration="2000000" startNumber="0"><Initialization sourceURL="init.m4s"/>
            <SegmentURL media="c1.m4s"/><SegmentURL media="c2.m4s" mediaRange="100-199"/><SegmentURL media="c3.m4s"/></SegmentList>
            """)
        let plan = try r.plan(periodDuration: p.duration)
        #expect(Self.names(plan) == ["c1.m4s", "c2.m4s", "c3.m4s"])
        #expect(plan.segments[1].range == MPD.ByteSpan(first: 100, last: 199))
        #expect(plan.initialization?.url == "https://cdn.example/v/init.m4s")
        #expect(Self.names(try r.plan(periodDuration: p.duration, until: 3)) == ["c1.m4s", "c2.m4s"])
    }

    @Test func aSegmentListPastTheLimitIsAnError() throws {
        let urls = String(repeating: "<SegmentURL media=\"s.m4s\"/>", count: DASHLimits.maxSegments + 1)
        let (r, p, _) = try Self.rep("<SegmentList duration=\"1\">\(urls)</SegmentList>")
        #expect(throws: DASHError.tooManySegments(representation: "v1", limit: DASHLimits.maxSegments)) { try r.plan(periodDuration: p.duration) }
    }

    @Test func segmentBaseNeedsItsIndexFirst() throws {
        let (r, p, _) = try Self.rep("<BaseURL>f.mp4</BaseURL><SegmentBase indexRange=\"831-906\"><Initialization range=\"0-830\"/></SegmentBase>")
        let plan = try r.plan(periodDuration: p.duration)
        #expect(plan.segments.isEmpty)
        #expect(plan.index == MPD.URLRange(url: "https://cdn.example/v/f.mp4", range: .init(first: 831, last: 906)))
        #expect(plan.initialization == MPD.URLRange(url: "https://cdn.example/v/f.mp4", range: .init(first: 0, last: 830)))
    }

    /// A sidx box: version, timescale, earliest time, first_offset, and references (type, size, duration).
    static func sidx(version: UInt8, timescale: UInt32 = 1000, earliest: UInt64 = 0, firstOffset: UInt64 = 0, refs: [(UInt32, UInt32)]) -> [UInt8] {
        var body: [UInt8] = [version, 0, 0, 0, 0, 0, 0, 1]
        func be(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
        body += be(UInt64(timescale), 4)
        body += version == 0 ? be(earliest, 4) + be(firstOffset, 4) : be(earliest, 8) + be(firstOffset, 8)
        body += be(0, 2) + be(UInt64(refs.count), 2)
        for (word, duration) in refs { body += be(UInt64(word), 4) + be(UInt64(duration), 4) + be(0x9000_0000, 4) }
        return be(UInt64(body.count + 8), 4) + Array("sidx".utf8) + body
    }

    @Test(arguments: [UInt8(0), 1])
    func sidxGivesSubsegmentRanges(_ version: UInt8) throws {
        let box = Self.sidx(version: version, earliest: 1000, firstOffset: 10, refs: [(500, 2000), (700, 2000)])
        let start: Int64 = 831
        let subs = try DASHSidx.subsegments(box, indexRange: .init(first: start, last: start + Int64(box.count) - 1), url: "u")
        let after = start + Int64(box.count)
        #expect(subs.map(\.range) == [.init(first: after + 10, last: after + 509), .init(first: after + 510, last: after + 1209)])
        #expect(subs.map(\.start) == [1, 3])
        #expect(subs.map(\.duration) == [2, 2])
    }

    @Test func sidxRefusesWhatItCannotRead() {
        let span = MPD.ByteSpan(first: 0, last: 99)
        #expect(throws: DASHError.sidx("it references another sidx (a hierarchical index): not supported")) {
            try DASHSidx.subsegments(Self.sidx(version: 0, refs: [(0x8000_0010, 1)]), indexRange: span, url: "u")
        }
        #expect(throws: DASHError.sidx("a timescale of 0")) { try DASHSidx.subsegments(Self.sidx(version: 0, timescale: 0, refs: []), indexRange: span, url: "u") }
        #expect(throws: DASHError.sidx("version 2 (only 0 and 1 exist)")) { try DASHSidx.subsegments(Self.sidx(version: 2, refs: []), indexRange: span, url: "u") }
        #expect(throws: DASHError.sidx("the bytes at @indexRange are not a sidx box")) { try DASHSidx.subsegments(Array("xxxxmoov".utf8), indexRange: span, url: "u") }
        #expect(throws: DASHError.sidx("it ends after 20 bytes, inside its fields")) {
            try DASHSidx.subsegments(Array(Self.sidx(version: 0, refs: [(5, 1)]).prefix(20)), indexRange: span, url: "u")
        }
        #expect(throws: DASHError.sidx("its first_offset overflows 64 bits")) {
            try DASHSidx.subsegments(Self.sidx(version: 1, firstOffset: UInt64.max, refs: [(5, 1)]), indexRange: span, url: "u")
        }
    }
}

/// A template resolved once per Representation (`DASHTemplate.resolved`) gives every segment the
/// URL resolving each one did; a template it cannot stand for is left to the per-segment way.
extension DASHSegmentTests {
    @Test(arguments: [
        ("chunk-$RepresentationID$-$Number%05d$.m4s", "https://cdn.example/v/manifest.mpd"),
        ("../seg/$Number$.m4s?x=$Bandwidth$", "https://cdn.example/a/b/c.mpd"),
        ("$Time$.m4s", "https://CDN.example:443/a/./b/../c/"),
        ("/abs/$RepresentationID$/$SubNumber%03d$", "http://h/x.mpd?q=1"),
        ("https://other.example/p/$Number$", "https://cdn.example/v/"),
        ("a b/$Number$.m4s", "https://cdn.example/v/"),
        ("s$Number$#frag", "https://cdn.example/v/m.mpd"),
    ])
    func aTemplateResolvedOnceGivesTheURLsResolvingEachDid(_ template: String, _ base: String) throws {
        let t = try DASHTemplate(template)
        let once = try #require(t.resolved(representationID: "v 1", bandwidth: 300_000, against: base))
        for n: Int64 in [0, 1, 9, 10, 99_999, 1_000_000, Int64.max, -5] {
            let each = HLSURI.resolve(t.substitute(representationID: "v 1", bandwidth: 300_000, number: n, time: n), against: base)
            #expect(once.url(number: n, time: n) == each, "\(template) \(n)")
        }
    }

    @Test func aTemplateVaryingInTwoPlacesIsResolvedPerSegment() throws {
        #expect(try DASHTemplate("$Number$/$Time$.m4s").resolved(representationID: "v", bandwidth: 1, against: Self.url) == nil)
    }
}
