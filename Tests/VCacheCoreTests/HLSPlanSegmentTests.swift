import Testing
@testable import VCacheCore

/// Which requests N seconds of one media playlist need (RFC 8216 §4.3.2): segments by EXTINF,
/// byte ranges merged per resource, init sections and keys once each.
@Suite struct HLSPlanSegmentTests {
    static let base = "https://cdn.example/v/index.m3u8"

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var body: String
        var seconds: Double?
        /// Requests, URLs relative to https://cdn.example/v/.
        var expected: [String]
        var testDescription: String { name }
    }

    static let fourSegments = "#EXTINF:4.010667,\ns0.ts\n#EXTINF:3.989333,\ns1.ts\n#EXTINF:4,\ns2.ts\n#EXTINF:4,\ns3.ts\n#EXT-X-ENDLIST\n"
    static let singleFile = """
        #EXT-X-MAP:URI="all.mp4",BYTERANGE="720@0"
        #EXTINF:4,
        #EXT-X-BYTERANGE:1000@720
        all.mp4
        #EXTINF:4,
        #EXT-X-BYTERANGE:700
        all.mp4
        #EXTINF:4,
        #EXT-X-BYTERANGE:300
        all.mp4
        #EXT-X-ENDLIST

        """

    static let cases: [Case] = [
        Case(name: "§4.3.2.1 whole stream: every segment", body: fourSegments, seconds: nil, expected: ["s0.ts", "s1.ts", "s2.ts", "s3.ts"]),
        Case(name: "§4.3.2.1 the first segments whose EXTINF add up to at least N", body: fourSegments, seconds: 8,
             expected: ["s0.ts", "s1.ts"]),
        Case(name: "§4.3.2.1 one more segment as soon as N is passed", body: fourSegments, seconds: 8.1,
             expected: ["s0.ts", "s1.ts", "s2.ts"]),
        Case(name: "§4.3.2.1 a fraction of the first segment still needs it", body: fourSegments, seconds: 0.5, expected: ["s0.ts"]),
        Case(name: "§4.3.2.1 more seconds than the stream: all of it", body: fourSegments, seconds: 1000,
             expected: ["s0.ts", "s1.ts", "s2.ts", "s3.ts"]),
        Case(name: "§4.3.2.1 rounded EXTINF values that sum a hair short still count",
             body: "#EXTINF:3.3333,\na.ts\n#EXTINF:3.3333,\nb.ts\n#EXTINF:3.3333,\nc.ts\n#EXTINF:3.3333,\nd.ts\n", seconds: 10,
             expected: ["a.ts", "b.ts", "c.ts"]),
        Case(name: "§4.3.2.2 adjacent ranges of one resource and its init section: one request", body: singleFile, seconds: nil,
             expected: ["all.mp4 bytes=0-2719"]),
        Case(name: "§4.3.2.2 the ranges N seconds need, merged", body: singleFile, seconds: 5, expected: ["all.mp4 bytes=0-2419"]),
        Case(name: "§4.3.2.2 ranges with a gap stay two requests",
             body: "#EXTINF:4,\n#EXT-X-BYTERANGE:100@0\nf.ts\n#EXTINF:4,\n#EXT-X-BYTERANGE:100@200\nf.ts\n", seconds: nil,
             expected: ["f.ts bytes=0-99", "f.ts bytes=200-299"]),
        Case(name: "§4.3.2.2 a resource wanted whole and in part: whole, once",
             body: "#EXTINF:4,\n#EXT-X-BYTERANGE:100@0\nf.ts\n#EXTINF:4,\nf.ts\n", seconds: nil, expected: ["f.ts"]),
        Case(name: "§4.3.2.5 an init section shared by segments: fetched once, before them",
             body: "#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2,\na.m4s\n#EXTINF:2,\nb.m4s\n#EXT-X-MAP:URI=\"init2.mp4\"\n#EXTINF:2,\nc.m4s\n",
             seconds: 3, expected: ["init.mp4", "a.m4s", "b.m4s"]),
        Case(name: "§4.3.2.4 a key in force for several segments: fetched once; a later key only when needed",
             body: "#EXT-X-KEY:METHOD=AES-128,URI=\"k1.key\"\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts\n#EXT-X-KEY:METHOD=AES-128,URI=\"k2.key\"\n#EXTINF:2,\nc.ts\n",
             seconds: nil, expected: ["k1.key", "a.ts", "b.ts", "k2.key", "c.ts"]),
        Case(name: "§4.3.2.4 a DRM KEYFORMAT is never fetched",
             body: "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://id\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\n#EXTINF:2,\na.ts\n",
             seconds: nil, expected: ["a.ts"]),
        Case(name: "§4.3.3.4 live: the segments present now", body: "#EXT-X-MEDIA-SEQUENCE:90\n#EXTINF:2,\n90.ts\n#EXTINF:2,\n91.ts\n",
             seconds: nil, expected: ["90.ts", "91.ts"]),
        Case(name: "§4.3.3.4 an empty live playlist: nothing yet", body: "#EXT-X-TARGETDURATION:2\n", seconds: 10, expected: []),
    ]

    @Test(arguments: cases) func fetches(_ c: Case) throws {
        guard case .media(let m) = try HLSPlaylist.parse(text: "#EXTM3U\n" + c.body, url: Self.base) else {
            Issue.record("not a media playlist")
            return
        }
        let plan = HLSPlan(seconds: c.seconds).fetches(for: m)
        #expect(plan.requests.map { String($0.description.dropFirst("https://cdn.example/v/".count)) } == c.expected)
        #expect(plan.isLive == !c.body.contains("#EXT-X-ENDLIST"))
    }

    @Test func aFetchSaysWhatItCovers() throws {
        guard case .media(let m) = try HLSPlaylist.parse(text: """
            #EXTM3U
            #EXT-X-MAP:URI="init.mp4"
            #EXT-X-KEY:METHOD=AES-128,URI="k.key"
            #EXTINF:2.005333,
            a.m4s
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://x",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXTINF:2.005333,
            b.m4s
            #EXTINF:0.021333,
            c.m4s
            #EXT-X-ENDLIST
            """, url: Self.base) else { return }
        let four = HLSPlan(seconds: 4).fetches(for: m)
        #expect(four.segments.map(\.rawURI) == ["a.m4s", "b.m4s"])
        #expect(abs(four.seconds - 4.010666) < 1e-9 && !four.isWholePlaylist && !four.isLive)
        #expect(four.initSections == [HLSMediaPlaylist.Map(uri: "https://cdn.example/v/init.mp4")])
        #expect(four.keys.map(\.uri) == ["https://cdn.example/v/k.key"])
        #expect(four.unfetchableKeys.map(\.uri) == ["skd://x"])
        // Named in prefetch's note by its format, or its method under the identity format.
        #expect(four.unfetchableKeys.map(\.label) == ["com.apple.streamingkeydelivery"])
        #expect(HLSKey(method: .other("SAMPLE-AES-CTR"), uri: "k").label == "SAMPLE-AES-CTR")
        #expect(HLSKey(method: .sampleAES, uri: "k").label == "SAMPLE-AES")
        #expect(HLSPlan().fetches(for: m).isWholePlaylist)
    }

    @Test func mergingKeepsFirstNeedOrderAndSortsRanges() {
        let r = HLSPlan.merged([
            .init(url: "b", range: ByteRange(50, 60)), .init(url: "a"), .init(url: "b", range: ByteRange(0, 10)),
            .init(url: "b", range: ByteRange(10, 20)), .init(url: "a", range: ByteRange(0, 5)), .init(url: "b", range: ByteRange(55, 70)),
        ])
        #expect(r == [.init(url: "b", range: ByteRange(0, 20)), .init(url: "b", range: ByteRange(50, 70)), .init(url: "a")])
    }
}
