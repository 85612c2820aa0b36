import Foundation
import Testing
@testable import VCacheCore

/// Reading an MPD (ISO/IEC 23009-1 §5.3): recognition, values, inheritance, BaseURL resolution.
@Suite struct DASHModelTests {
    static let url = "https://cdn.example/v/movie/manifest.mpd"

    static func mpd(_ body: String, attributes: String = "type=\"static\" mediaPresentationDuration=\"PT6S\"", url: String = url) throws(DASHError) -> MPD {
        try MPD.parse(Array("<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" \(attributes)>\(body)</MPD>".utf8), url: url)
    }

    @Test(arguments: [
        ("the DASH namespace on the root", "<?xml version=\"1.0\"?><MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, true),
        ("a prefixed root", "<dash:MPD xmlns:dash=\"urn:mpeg:dash:schema:mpd:2011\">", nil, true),
        ("a comment and a BOM first", "\u{FEFF}<!-- x --><MPD type=\"static\" xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, true),
        ("Content-Type application/dash+xml", "", "application/dash+xml; charset=utf-8", true),
        ("MPD without the namespace", "<MPD type=\"static\">", nil, false),
        ("an HTML page", "<html><body>MPD urn:mpeg:dash:schema:mpd:2011</body></html>", "text/html", false),
        ("never the URL: an XML error page", "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>", "application/xml", false),
        ("an HLS playlist", "#EXTM3U\n", nil, false),
        ("whitespace first", " \r\n\t<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, true),
        ("Unicode whitespace first (decoded, not skipped by byte)", "\u{00A0}\u{2003}<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, true),
        ("an MP4's first box", "\0\0\0\u{18}uuid<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, false),
        ("text before the root", "x<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, false),
        ("an MPEG-TS segment (its sync byte)", "G\u{01}\u{00}<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, false),
        ("an MP4's box size", "\u{00}\u{00}\u{00}\u{18}ftyp<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">", nil, false),
    ] as [(String, String, String?, Bool)])
    func recognisesMPDsByContentOrType(_ what: String, _ head: String, _ type: String?, _ expected: Bool) {
        #expect(MPD.looksLikeMPD(firstBytes: Array(head.utf8), contentType: type) == expected, "\(what)")
    }

    /// The byte check that spares decoding a video's head as text agrees with the decoded one:
    /// whatever it turns away, the text would not have begun with a tag either.
    @Test func byteCheckTurnsAwayOnlyWhatTheTextWould() {
        var rng = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = [[0xEF, 0xBB, 0xBF], [0x20], [0x09], [0x0A], [0x0D], [0x0B], [0x0C], [0x1C], [0x00], [0xC2, 0xA0], [0xC2, 0x85],
                                 [0xE2, 0x80, 0x83], [0xCC, 0x81], Array("<MPD>".utf8), Array("<?x?>".utf8), Array("<!-- -->".utf8), [0x78], [0xFF]]
        for _ in 0..<5000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...6, using: &rng) { bytes += pieces.randomElement(using: &rng)! }
            let decoded = Substring(String(decoding: bytes, as: UTF8.self))
            let text = decoded.drop { $0 == "\u{FEFF}" }.drop { $0.isWhitespace }
            if !XMLRoot.mayStartWithTag(bytes) {
                #expect(!text.hasPrefix("<"), "\(bytes)")
            }
        }
        #expect(!XMLRoot.mayStartWithTag([0, 0, 0, 0x18] + Array("uuid".utf8)))
        #expect(XMLRoot.mayStartWithTag(Array("\u{FEFF} \n<MPD".utf8)))
    }

    /// A head whose first byte is not ASCII (random bytes, as the bench's cached videos, an
    /// encrypted segment) is refused by the character it starts with, not decoded as text: only
    /// whitespace, a BOM, or anything after a space (a combining mark joins the space's
    /// character, which the text drops as whitespace) is left to the text.
    @Test(arguments: [
        ("random bytes, the first not ASCII", [0xA2, 0xF1, 0x1A, 0xF3, 0x3C, 0x4D], false),
        ("a letter with an accent", Array("é<MPD".utf8), false),
        ("not UTF-8", [0xFF, 0x3C], false),
        ("a combining mark after a tab (a control: no character joins it)", Array("\t\u{301}<MPD".utf8), false),
        ("a combining mark after a space (the space's character)", Array(" \u{301}<MPD".utf8), true),
        ("a no-break space", Array("\u{A0}<MPD".utf8), true),
        ("a second BOM", Array("\u{FEFF}\u{FEFF}<MPD".utf8), true),
        ("a line separator after a newline", Array("\n\u{2028}<MPD".utf8), true),
    ] as [(String, [UInt8], Bool)])
    func aNonASCIIFirstCharacterIsJudgedAlone(_ what: String, _ bytes: [UInt8], _ expected: Bool) {
        #expect(XMLRoot.mayStartWithTag(bytes) == expected, "\(what)")
        if !expected {
            var text = Substring(String(decoding: bytes, as: UTF8.self))
            if text.hasPrefix("\u{FEFF}") { text = text.dropFirst() }
            #expect(!text.drop { $0.isWhitespace }.hasPrefix("<"), "\(what): refused, yet its text begins with '<'")
        }
    }

    /// The cheap refusal before a start tag is looked for (`XMLRoot.mayStartWithTag`, asked of
    /// every cached head serve sends and every head prefetch stores) never refuses bytes whose
    /// text begins with `<` once a BOM and whitespace are dropped: random bytes, and random mixes of whitespace, BOMs, combining marks,
    /// `<` and binary (5,000 of them), against the text's own answer.
    @Test func theCheapRefusalNeverRefusesWhatBeginsWithATag() {
        var g = SplitMix(state: 3603)
        let pieces: [[UInt8]] = [[0x20], [0x09], [0x0D, 0x0A], [0xEF, 0xBB, 0xBF], [0xC2, 0xA0], [0xCC, 0x81], [0xE2, 0x80, 0xA8],
                                 [0x3C], [0x3C, 0x4D, 0x50, 0x44], [0x47], [0x00], [0xFF], [0xC3, 0xA9], [0x80]]
        var refused = 0
        for i in 0..<5_000 {
            var bytes: [UInt8] = []
            if i % 2 == 0 {
                bytes = (0..<Int.random(in: 0...8, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
            } else {
                for _ in 0..<Int.random(in: 0...5, using: &g) { bytes += pieces.randomElement(using: &g)! }
            }
            var text = Substring(String(decoding: bytes, as: UTF8.self))
            if text.hasPrefix("\u{FEFF}") { text = text.dropFirst() }
            let beginsWithTag = text.drop { $0.isWhitespace }.hasPrefix("<")
            if !XMLRoot.mayStartWithTag(bytes) {
                refused += 1
                #expect(!beginsWithTag, "\(bytes) was refused, yet its text begins with '<'")
            }
        }
        #expect(refused > 1_250, "the cheap refusal refused only \(refused) of 5,000: it would save nothing")
    }

    @Test(arguments: [
        ("PT6S", 6.0), ("PT6.0S", 6.0), ("PT1H2M3.5S", 3723.5), ("P1DT1S", 86401.0), ("PT0S", 0.0), ("PT1M", 60.0),
    ] as [(String, Double)])
    func readsDurations(_ s: String, _ seconds: Double) {
        #expect(DASHValues.duration(s) == seconds)
    }

    @Test(arguments: ["", "P", "PT", "6S", "P1Y", "P1M", "PT-1S", "PTNaNS", "PT1e308S", "PT1.5M", "PT1S2", "P1H"])
    func refusesDurations(_ s: String) {
        #expect(DASHValues.duration(s) == nil, "\(s)")
    }

    @Test func readsDatesAndNumbers() {
        #expect(DASHValues.dateTime("1970-01-01T00:00:00Z") == 0)
        #expect(DASHValues.dateTime("2026-11-28T03:00:00.5Z") == 1_795_834_800.5)
        #expect(DASHValues.dateTime("2026-11-28T04:00:00+01:00") == 1_795_834_800)
        #expect(DASHValues.dateTime("2026-11-28") == nil)
        #expect(DASHValues.unsigned("9223372036854775807") == Int64.max)
        #expect(DASHValues.unsigned("9223372036854775808") == nil)  // 2^63
        #expect(DASHValues.unsigned("-1") == nil)
        #expect(DASHValues.unsigned("1e3") == nil)
        #expect(DASHValues.integer("-1") == -1)
        #expect(DASHValues.byteSpan("0-838") == MPD.ByteSpan(first: 0, last: 838))
        #expect(DASHValues.byteSpan("9-3") == nil)
        #expect(DASHValues.byteSpan("5-") == nil)
    }

    @Test func refusesWhatIsNotAnMPD() {
        #expect(throws: DASHError.notMPD("its root element is <html>, not <MPD>")) { try MPD.parse(Array("<html/>".utf8), url: Self.url) }
        #expect(throws: DASHError.notMPD("its <MPD> is in the namespace '', not 'urn:mpeg:dash:schema:mpd:2011'")) {
            try MPD.parse(Array("<MPD/>".utf8), url: Self.url)
        }
        #expect(throws: DASHError.xml(.doctype)) { try MPD.parse(Array("<!DOCTYPE MPD><MPD/>".utf8), url: Self.url) }
    }

    @Test func baseURLsResolveAtEveryLevelAgainstTheFinalURL() throws {
        let m = try Self.mpd("""
            <BaseURL>../media/</BaseURL>
            <Period><BaseURL>p1/</BaseURL>
              <AdaptationSet contentType="video"><BaseURL>/abs/v/</BaseURL>
                <Representation id="a" bandwidth="1"><BaseURL>a.mp4?x=1</BaseURL></Representation>
                <Representation id="b" bandwidth="2"/>
              </AdaptationSet>
              <AdaptationSet contentType="audio">
                <Representation id="c" bandwidth="3"><BaseURL>https://other.example/c/</BaseURL><BaseURL>c2/</BaseURL></Representation>
              </AdaptationSet>
            </Period>
            """)
        let reps = m.representations.map(\.representation)
        #expect(reps.map(\.baseURL) == ["https://cdn.example/abs/v/a.mp4?x=1", "https://cdn.example/abs/v/",
                                        "https://other.example/c/"])
        // Siblings are alternatives, each resolved against the parent.
        #expect(reps[2].baseURLs == ["https://other.example/c/", "https://cdn.example/v/media/p1/c2/"])
        // No BaseURL anywhere: the MPD's own URL.
        let bare = try Self.mpd("<Period><AdaptationSet><Representation id=\"r\" bandwidth=\"1\"/></AdaptationSet></Period>")
        #expect(bare.periods[0].adaptationSets[0].representations[0].baseURL == Self.url)
        // A BaseURL that resolves to another scheme is refused.
        #expect(throws: DASHError.badURL("BaseURL 'file:///etc/' resolves to 'file:///etc/', not an http or https URL")) {
            try Self.mpd("<BaseURL>file:///etc/</BaseURL><Period/>")
        }
    }

    @Test func segmentDescriptionsInheritPerAttribute() throws {
        let m = try Self.mpd("""
            <Period>
              <SegmentTemplate timescale="1000" duration="2000" startNumber="5"/>
              <AdaptationSet mimeType="video/mp4" width="640">
                <SegmentTemplate media="$RepresentationID$/$Number%03d$.m4s" initialization="$RepresentationID$/init.mp4"/>
                <Representation id="hi" bandwidth="2000" height="360">
                  <SegmentTemplate startNumber="0"/>
                </Representation>
                <Representation id="lo" bandwidth="1000" width="320" height="180">
                  <SegmentBase indexRange="800-899"><Initialization range="0-799"/></SegmentBase>
                </Representation>
              </AdaptationSet>
            </Period>
            """)
        let set = m.periods[0].adaptationSets[0]
        #expect(set.kind == .video)
        let hi = set.representations[0], lo = set.representations[1]
        #expect(hi.width == 640 && hi.height == 360 && lo.width == 320)
        guard case .template(let t) = hi.segments else { Issue.record("not a template: \(hi.segments)"); return }
        #expect(t.timescale == 1000 && t.duration == 2000 && t.startNumber == 0)
        #expect(t.initialization == "https://cdn.example/v/movie/hi/init.mp4")
        // The innermost kind wins: lo's SegmentBase, not the inherited template.
        #expect(lo.segments == .base(.init(timescale: 1, presentationTimeOffset: 0, indexRange: .init(first: 800, last: 899),
                                           initialization: .init(url: Self.url, range: .init(first: 0, last: 799)))))
    }

    @Test func periodsStartAfterOneAnother() throws {
        let m = try Self.mpd("<Period duration=\"PT4S\"/><Period/><Period start=\"PT10S\"/>", attributes: "mediaPresentationDuration=\"PT12S\"")
        #expect(m.periods.map(\.start) == [0, 4, 10])
        #expect(m.periods.map(\.duration) == [4, 6, 2])
    }

    @Test(arguments: [
        ("timescale 0", "<SegmentTemplate timescale=\"0\" duration=\"1\" media=\"$Number$\"/>",
         DASHError.badValue(element: "SegmentTemplate", attribute: "timescale", value: "0", why: "a timescale of 0 ticks per second")),
        ("duration 0", "<SegmentTemplate duration=\"0\" media=\"$Number$\"/>",
         .badValue(element: "SegmentTemplate", attribute: "duration", value: "0", why: "a segment duration of 0")),
        ("2^63 startNumber", "<SegmentTemplate duration=\"1\" startNumber=\"9223372036854775808\" media=\"$Number$\"/>",
         .badValue(element: "SegmentTemplate", attribute: "startNumber", value: "9223372036854775808", why: "not a whole number from 0 to 2^63-1")),
        ("negative timescale", "<SegmentTemplate timescale=\"-5\" duration=\"1\" media=\"$Number$\"/>",
         .badValue(element: "SegmentTemplate", attribute: "timescale", value: "-5", why: "not a whole number from 1 to 2^63-1")),
        ("NaN duration", "<SegmentTemplate duration=\"NaN\" media=\"$Number$\"/>",
         .badValue(element: "SegmentTemplate", attribute: "duration", value: "NaN", why: "not a whole number from 1 to 2^63-1")),
        ("r below -1", "<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S d=\"1\" r=\"-2\"/></SegmentTimeline></SegmentTemplate>",
         .badValue(element: "S", attribute: "r", value: "-2", why: "a repeat count below -1")),
        ("S@d 0", "<SegmentTemplate media=\"$Time$\"><SegmentTimeline><S d=\"0\"/></SegmentTimeline></SegmentTemplate>",
         .badValue(element: "S", attribute: "d", value: "0", why: "a segment duration must be a whole number from 1 to 2^63-1")),
        ("an unknown identifier", "<SegmentTemplate duration=\"1\" media=\"$Nmber$\"/>",
         .badTemplate(.init(template: "$Nmber$", why: "unknown identifier '$Nmber$'"))),
        ("$Number$ in @initialization", "<SegmentTemplate duration=\"1\" media=\"$Number$\" initialization=\"i$Number$\"/>",
         .badTemplate(.init(template: "i$Number$", why: "@initialization may use only $RepresentationID$ and $Bandwidth$"))),
    ] as [(String, String, DASHError)])
    func hostileValuesAreErrors(_ what: String, _ segment: String, _ expected: DASHError) {
        #expect(throws: expected, "\(what)") {
            try Self.mpd("<Period><AdaptationSet><Representation id=\"r\" bandwidth=\"1\">\(segment)</Representation></AdaptationSet></Period>")
        }
    }

    /// A small MPD naming millions of segments (each Representation under its own limit) is
    /// refused when read, before any URL is built: it used to hold prefetch, `ls` and serve for
    /// hours planning 20 million URLs, deaf to SIGTERM.
    @Test func segmentsOfAllRepresentationsTogetherHaveALimit() throws {
        func sets(_ n: Int) -> String {
            "<Period>" + (0..<n).map { i in
                "<AdaptationSet contentType=\"text\" mimeType=\"application/mp4\"><SegmentTemplate timescale=\"1\" duration=\"1\" media=\"t\(i)-$Number$.m4s\"/><Representation id=\"t\(i)\" bandwidth=\"1000\"/></AdaptationSet>"
            }.joined() + "</Period>"
        }
        let perRepresentation = DASHLimits.maxSegments - 1
        let fits = DASHLimits.maxTotalSegments / perRepresentation
        let long = "type=\"static\" mediaPresentationDuration=\"PT\(perRepresentation)S\""
        let read = try Self.mpd(sets(fits), attributes: long)
        #expect(read.periods[0].adaptationSets.count == fits)
        #expect(throws: DASHError.tooManySegmentsInAll(limit: DASHLimits.maxTotalSegments)) { try Self.mpd(sets(fits + 1), attributes: long) }
        #expect(DASHError.tooManySegmentsInAll(limit: 1_000_000).description == "its Representations name more than the limit of 1000000 segments in all")
    }

    @Test func adaptationSetsSayKindLanguageProtectionAndTrickMode() throws {
        let m = try Self.mpd("""
            <Period>
              <AdaptationSet mimeType="audio/mp4" lang="fr"><ContentProtection schemeIdUri="urn:mpeg:dash:mp4protection:2011" value="cenc"/>
                <Representation id="a" bandwidth="1"/></AdaptationSet>
              <AdaptationSet contentType="video"><EssentialProperty schemeIdUri="http://dashif.org/guidelines/trickmode" value="1"/>
                <Representation id="t" bandwidth="1"/></AdaptationSet>
              <AdaptationSet><Representation id="s" bandwidth="1" mimeType="application/mp4" codecs="stpp"/></AdaptationSet>
            </Period>
            """)
        let sets = m.periods[0].adaptationSets
        #expect(sets.map(\.kind) == [.audio, .video, .text])
        #expect(sets.map(\.language) == ["fr", nil, nil])
        #expect(sets.map(\.isProtected) == [true, false, false])
        #expect(sets.map(\.isSkipped) == [false, true, false])
    }
}

/// A seeded generator (SplitMix64), so a failing case reruns as it was.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A resource under several sibling BaseURLs (§5.6.5): the same path under each one's folder.
@Suite struct DASHMirrorsTests {
    @Test(arguments: [
        // One BaseURL: nothing to try next.
        ("https://a/v/seg-1.m4s", ["https://a/v/"], nil as DASHMirrors?),
        ("https://a/v/seg-1.m4s", ["https://a/v/", "https://b/w/"], DASHMirrors(bases: ["https://a/v/", "https://b/w/"], path: "seg-1.m4s")),
        // A template's subfolder stays under each.
        ("https://a/v/r1/seg-1.m4s", ["https://a/v/", "https://b/", "https://c/x/"], DASHMirrors(bases: ["https://a/v/", "https://b/", "https://c/x/"], path: "r1/seg-1.m4s")),
        // A BaseURL naming the file (SegmentBase): the files themselves, their names may differ.
        ("https://a/v/f.mp4", ["https://a/v/f.mp4", "https://b/w/g.mp4"], DASHMirrors(bases: ["https://a/v/f.mp4", "https://b/w/g.mp4"], path: "")),
        // A BaseURL with a query: its folder.
        ("https://a/v/seg-1.m4s", ["https://a/v/x?t=1", "https://b/w/"], DASHMirrors(bases: ["https://a/v/", "https://b/w/"], path: "seg-1.m4s")),
        // Not under the first's folder (absolute, or climbed out): no mirror is known.
        ("https://other/seg-1.m4s", ["https://a/v/", "https://b/w/"], nil),
        // The same folder twice: nothing else to try.
        ("https://a/v/seg-1.m4s", ["https://a/v/", "https://a/v/"], nil),
    ])
    func theSamePathUnderEachBaseURLsFolder(url: String, bases: [String], expected: DASHMirrors?) {
        #expect(DASHMirrors.of(url, baseURLs: bases) == expected)
    }

    @Test(arguments: [
        (PrefetchError.transport(TransportError(kind: .connect, message: "refused", code: 7)), true),
        (.http(status: 404, reason: "Not Found"), true),
        (.http(status: 503, reason: ""), true),
        (.http(status: 403, reason: ""), false),
        (.stream("not a segment"), false),
        (.transport(TransportError(kind: .redirectRefused, message: "", code: 0)), false),
    ])
    func aBaseIsDeadOnlyWhenItDidNotAnswer(error: PrefetchError, dead: Bool) {
        #expect(PrefetchRun.baseDidNotAnswer(error) == dead)
    }
}
