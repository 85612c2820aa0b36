import Foundation
import Testing
@testable import VCacheCore

/// Rewriting a playlist for the proxy: every URI replaced, every other byte kept (RFC 8216 §4.1,
/// §4.2), offline masters without what is not cached.
@Suite struct HLSRewriterTests {
    static let base = "https://cdn.example/v/index.m3u8"
    static let rewriter = HLSRewriter(url: base, proxy: { "P<\($0)>" })

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var input: String
        var expected: String
        var testDescription: String { name }
    }

    static let u = "https://cdn.example/v/"

    static let cases: [Case] = [
        Case(name: "§4.1 URI lines, resolved then proxied", input: "#EXTM3U\n#EXTINF:4,\na.ts\n#EXTINF:4,\n../b.ts?t=1\n",
             expected: "#EXTM3U\n#EXTINF:4,\nP<\(u)a.ts>\n#EXTINF:4,\nP<https://cdn.example/b.ts?t=1>\n"),
        Case(name: "§4.3.2.4 EXT-X-KEY: URI inside its quotes, IV and attribute order kept",
             input: "#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\",IV=0x00000000000000000000000000000001\n",
             expected: "#EXT-X-KEY:METHOD=AES-128,URI=\"P<\(u)k.key>\",IV=0x00000000000000000000000000000001\n"),
        Case(name: "§4.3.2.5 EXT-X-MAP: BYTERANGE stays quoted", input: "#EXT-X-MAP:URI=\"init.mp4\",BYTERANGE=\"1355@0\"\n",
             expected: "#EXT-X-MAP:URI=\"P<\(u)init.mp4>\",BYTERANGE=\"1355@0\"\n"),
        Case(name: "§4.2 a quoted string with commas before URI", input: "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x, y\",URI=\"en.m3u8\"\n",
             expected: "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x, y\",URI=\"P<\(u)en.m3u8>\"\n"),
        Case(name: "§4.3.4.1 an EXT-X-MEDIA without URI is left alone", input: "#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID=\"cc\",NAME=\"CC1\",INSTREAM-ID=\"CC1\"\n",
             expected: "#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID=\"cc\",NAME=\"CC1\",INSTREAM-ID=\"CC1\"\n"),
        Case(name: "§4.3.4.2 a variant's URI line; its attributes untouched",
             input: "#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.4d401e,mp4a.40.2\"\n360p/i.m3u8\n",
             expected: "#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.4d401e,mp4a.40.2\"\nP<\(u)360p/i.m3u8>\n"),
        Case(name: "§4.3.4.3 EXT-X-I-FRAME-STREAM-INF's URI", input: "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=9,URI=\"if.m3u8\"\n",
             expected: "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=9,URI=\"P<\(u)if.m3u8>\"\n"),
        Case(name: "§4.3.4.4-5 EXT-X-SESSION-DATA and EXT-X-SESSION-KEY",
             input: "#EXT-X-SESSION-DATA:DATA-ID=\"d\",URI=\"d.json\"\n#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"/k\"\n",
             expected: "#EXT-X-SESSION-DATA:DATA-ID=\"d\",URI=\"P<\(u)d.json>\"\n#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"P<https://cdn.example/k>\"\n"),
        Case(name: "LL-HLS EXT-X-PRELOAD-HINT and EXT-X-RENDITION-REPORT, and an unknown tag's URI",
             input: "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p9.mp4\"\n#EXT-X-RENDITION-REPORT:URI=\"../hi/i.m3u8\",LAST-MSN=9\n#EXT-X-FUTURE:A=1,URI=\"f\"\n",
             expected: "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"P<\(u)p9.mp4>\"\n#EXT-X-RENDITION-REPORT:URI=\"P<https://cdn.example/hi/i.m3u8>\",LAST-MSN=9\n#EXT-X-FUTURE:A=1,URI=\"P<\(u)f>\"\n"),
        Case(name: "§5.2 EXT-X-MEDIA-SEQUENCE, comments, titles and unknown tags stay as written",
             input: "#EXT-X-MEDIA-SEQUENCE:1234\n# URI=\"c\"\n#EXT-X-FUTURE:whatever\n#EXTINF:4,URI=\"t\"\n#EXT-X-BYTERANGE:10@0\na.ts\n",
             expected: "#EXT-X-MEDIA-SEQUENCE:1234\n# URI=\"c\"\n#EXT-X-FUTURE:whatever\n#EXTINF:4,URI=\"t\"\n#EXT-X-BYTERANGE:10@0\nP<\(u)a.ts>\n"),
        Case(name: "§4.1 CRLF line ends and no final line end are kept", input: "#EXTM3U\r\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\r\n#EXTINF:4,\r\na.ts",
             expected: "#EXTM3U\r\n#EXT-X-KEY:METHOD=AES-128,URI=\"P<\(u)k>\"\r\n#EXTINF:4,\r\nP<\(u)a.ts>"),
        Case(name: "§4.1 a BOM and blank lines are kept", input: "\u{FEFF}#EXTM3U\n\n#EXTINF:4,\n a.ts \n\n",
             expected: "\u{FEFF}#EXTM3U\n\n#EXTINF:4,\n P<\(u)a.ts> \n\n"),
        Case(name: "a URI that is not http(s) goes to the proxy (which refuses it), never straight to the player",
             input: "#EXTINF:4,\nfile:///etc/passwd\n#EXTINF:4,\njavascript:alert(1)\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"file:///etc/passwd\"\n",
             expected: "#EXTINF:4,\nP<file:///etc/passwd>\n#EXTINF:4,\nP<javascript:alert(1)>\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"P<file:///etc/passwd>\"\n"),
        Case(name: "a tag naming a URI the rewriter cannot find (an unterminated quote, spaces around =) is dropped",
             input: "#EXT-X-KEY:METHOD=AES-128,IV=0x1,URI=\"http://169.254.169.254/k.key\n#EXT-X-KEY:METHOD=AES-128,URI = \"http://10.9.9.9/c.key\"\n#EXTINF:4,\na.ts\n",
             expected: "\n\n#EXTINF:4,\nP<\(u)a.ts>\n"),
        Case(name: "§4.3.2.4 skd:// and data: key URIs are the player's: left as written",
             input: "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://id-1\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"data:;base64,AAAA\"\n",
             expected: "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://id-1\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"data:;base64,AAAA\"\n"),
        Case(name: "§4.2 a list the parser refuses (URI twice) still has every quoted URI rewritten (players accept it)",
             input: "#EXT-X-FUTURE:URI=\"a\",URI=\"b\"\n",
             expected: "#EXT-X-FUTURE:URI=\"P<https://cdn.example/v/a>\",URI=\"P<https://cdn.example/v/b>\"\n"),
    ]

    @Test(arguments: cases) func rewrites(_ c: Case) {
        #expect(Self.rewriter.rewrite(c.input) == c.expected)
    }

    static let master = """
        #EXTM3U\r
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",DEFAULT=YES,URI="audio.m3u8"\r
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360,AUDIO="a"\r
        360p.m3u8\r
        \r
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,RESOLUTION=1280x720,AUDIO="a"\r
        720p.m3u8\r
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,URI="if360.m3u8"\r
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=190000,URI="if720.m3u8"\r

        """

    /// An attribute list the parser refuses (a repeated name, an empty value) that players
    /// accept: its URI is still rewritten (it was left pointing at the origin).
    @Test(arguments: [#"#EXT-X-KEY:METHOD=AES-128,URI="k.key",KEYFORMATVERSIONS="1",KEYFORMATVERSIONS="1""#,
                      #"#EXT-X-MAP:URI="init.mp4",X-VENDOR="#])
    func aURIInAnAttributeListThePaserRefusesIsStillRewritten(line: String) {
        let out = Self.rewriter.rewrite("#EXTM3U\n" + line + "\n")
        #expect(out.contains(#"URI="P<"#) && !out.contains(#"URI="k.key""#) && !out.contains(#"URI="init.mp4""#), "\(out)")
    }

    @Test func anOfflineMasterDropsWhatIsNotCached() {
        let u = Self.u
        let cached: Set<String> = [u + "360p.m3u8", u + "if360.m3u8", u + "audio.m3u8"]
        let r = HLSRewriter(url: Self.base, proxy: { "P<\($0)>" }, keep: { cached.contains($0) })
        #expect(r.rewrite(Self.master) == """
            #EXTM3U\r
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",DEFAULT=YES,URI="P<\(u)audio.m3u8>"\r
            #EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360,AUDIO="a"\r
            P<\(u)360p.m3u8>\r
            \r
            #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,URI="P<\(u)if360.m3u8>"\r

            """)
    }

    @Test func aRewrittenPlaylistParsesToTheSameSegmentsAtProxiedURLs() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MEDIA-SEQUENCE:77
            #EXT-X-KEY:METHOD=AES-128,URI="k.key"
            #EXT-X-MAP:URI="all.mp4",BYTERANGE="720@0"
            #EXTINF:4,
            #EXT-X-BYTERANGE:1000@720
            all.mp4
            #EXTINF:4,
            #EXT-X-BYTERANGE:500
            all.mp4
            #EXT-X-ENDLIST

            """
        let proxy: @Sendable (String) -> String = { ProxyURL.make(origin: $0, base: "http://127.0.0.1:8089") }
        let rewritten = HLSRewriter(url: Self.base, proxy: proxy).rewrite(text)
        guard case .media(let before) = try HLSPlaylist.parse(text: text, url: Self.base),
              case .media(let after) = try HLSPlaylist.parse(text: rewritten, url: "http://127.0.0.1:8089/v/x/index.m3u8") else {
            Issue.record("not media playlists")
            return
        }
        #expect(after.segments.map(\.uri) == before.segments.map { proxy($0.uri) })
        #expect(after.segments.map(\.byteRange) == before.segments.map(\.byteRange))
        #expect(after.segments.map(\.sequence) == [77, 78])
        #expect(after.segments[0].map?.uri == proxy(Self.u + "all.mp4") && after.segments[0].map?.byteRange == ByteRange(0, 720))
        #expect(after.segments[1].keys.first?.uri == proxy(Self.u + "k.key"))
        #expect(after.segments.allSatisfy { ProxyURL.origin(path: String($0.uri.dropFirst("http://127.0.0.1:8089".count))) == Self.u + "all.mp4" })
    }

    /// Each URI gets the context of the tag naming it, so a member whose URL says nothing is named
    /// by what it is (ffmpeg refuses a TS segment called `.mp4`).
    @Test func eachURIIsNamedByTheTagThatNamesIt() {
        let media = "#EXTM3U\n#EXTINF:2,\nseg/0\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:2,\nseg/1\n#EXT-X-KEY:METHOD=NONE\n"
            + "#EXT-X-MAP:URI=\"init\"\n#EXTINF:2,\nseg/2\n#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p\"\n#EXT-X-UNKNOWN:URI=\"u\"\n"
        let named = HLSRewriter(url: Self.base, naming: { url, context in
            "\(url.dropFirst(Self.u.count))=" + Exporter.memberFileName(for: url, key: "k", context: context) { nil }
        }).rewrite(media)
        let names = named.split(separator: "\n").compactMap { line in line.split(separator: "\"").count > 1 ? line.split(separator: "\"")[1] : line.hasPrefix("#") ? nil : line }
        #expect(names == ["seg/0=0.ts", "k=k.key", "seg/1=1.ts", "init=init.mp4", "seg/2=2.m4s", "p=p.m4s", "u=u.mp4"])
        let master = "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio?x=1\"\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow\n#EXT-X-STREAM-INF:BANDWIDTH=2\nhigh.m3u8\n"
        let m = HLSRewriter(url: Self.base, naming: { url, c in Exporter.memberFileName(for: url, key: "k", context: c) { nil } }).rewrite(master)
        #expect(m.contains("URI=\"audio.m3u8\"") && m.contains("\nlow.m3u8\n") && m.contains("\nhigh.m3u8\n"), "\(m)")
    }

    /// First bytes, when cached, say what a segment is; an origin's telling extension is kept;
    /// ciphertext is never read as a format.
    @Test(arguments: [
        ("seg", HLSURIContext.segment(fragmented: false), [0x47, 0x40, 0x00, 0x10] as [UInt8], "seg.ts"),
        ("seg", .segment(fragmented: false), Array("ID3".utf8) + [4, 0, 0], "seg.aac"),
        ("seg", .segment(fragmented: false), [0xFF, 0xF1, 0x50, 0x80], "seg.aac"),
        ("seg", .segment(fragmented: false), [0xFF, 0xFB, 0x90, 0x00], "seg.mp3"),
        ("seg", .segment(fragmented: false), Array("WEBVTT\n\n".utf8), "seg.vtt"),
        ("seg", .segment(fragmented: false), [0, 0, 0, 24] + Array("stypmsdh".utf8), "seg.m4s"),
        ("seg", .segment(fragmented: false, encrypted: true), [0xFF, 0xF1, 0x50, 0x80], "seg.ts"),
        ("init", .initSection(), [0, 0, 0, 24] + Array("ftypiso6".utf8), "init.mp4"),
        ("seg.php", .segment(fragmented: true), [], "seg.php.m4s"),
        ("seg.ts", .segment(fragmented: true), [0, 0, 0, 24] + Array("stypmsdh".utf8), "seg.ts"),
        ("a.mp4", .segment(fragmented: false), [0x47], "a.mp4"),
    ])
    func aMemberIsNamedByItsFirstBytes(name: String, context: HLSURIContext, bytes: [UInt8], expected: String) {
        #expect(Exporter.memberFileName(for: Self.u + name, key: "k", context: context) { bytes } == expected)
    }

    /// A rendition not kept goes; a group left with none is no longer named by a variant (its
    /// attribute goes, from the middle, the start or the end of the list, quoted or not).
    @Test func aRenditionNotKeptGoesAndItsEmptiedGroupWithIt() {
        let master = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",DEFAULT=YES,URI="en.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="fr",URI="fr.m3u8"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="s",NAME="en",URI="subs.m3u8"
            #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="cc",INSTREAM-ID="CC1"
            #EXT-X-STREAM-INF:BANDWIDTH=1,AUDIO="a",SUBTITLES="s",CLOSED-CAPTIONS="cc"
            a.m3u8
            #EXT-X-STREAM-INF:SUBTITLES="s",BANDWIDTH=2
            b.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=3, SUBTITLES=s
            c.m3u8

            """
        let kept: Set<String> = ["en.m3u8", "a.m3u8", "b.m3u8", "c.m3u8"].map { Self.u + $0 }.reduce(into: []) { $0.insert($1) }
        let out = HLSRewriter(url: Self.base, proxy: { "P<\($0.dropFirst(Self.u.count))>" }, keep: { kept.contains($0) }).rewrite(master)
        #expect(out == """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",DEFAULT=YES,URI="P<en.m3u8>"
            #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="cc",INSTREAM-ID="CC1"
            #EXT-X-STREAM-INF:BANDWIDTH=1,AUDIO="a",CLOSED-CAPTIONS="cc"
            P<a.m3u8>
            #EXT-X-STREAM-INF:BANDWIDTH=2
            P<b.m3u8>
            #EXT-X-STREAM-INF:BANDWIDTH=3
            P<c.m3u8>

            """, "\(out)")
        #expect((try? HLSPlaylist.parse(text: out, url: Self.base)) != nil)
    }
}
