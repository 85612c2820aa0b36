import Foundation
import Testing
@testable import VCacheCore

/// Playlist parsing, RFC 8216: recognition, master and media tags, one line per rule.
@Suite struct HLSPlaylistTests {
    static let base = "https://cdn.example/v/index.m3u8"

    static func media(_ body: String) throws -> HLSMediaPlaylist {
        guard case .media(let m) = try HLSPlaylist.parse(text: "#EXTM3U\n" + body, url: base) else {
            throw HLSParseError(line: 0, .badValue("a master playlist where a media one was expected"))
        }
        return m
    }

    // MARK: - Recognition (§4)

    @Test(arguments: [
        ("§4.3.1.1 #EXTM3U first line", "#EXTM3U\n#EXT-X-VERSION:3\n", nil, true),
        ("§4.3.1.1 #EXTM3U with CRLF", "#EXTM3U\r\n", nil, true),
        ("§4.3.1.1 #EXTM3U alone (a short read)", "#EXTM3U", nil, true),
        ("§4.1 a BOM before #EXTM3U is tolerated", "\u{FEFF}#EXTM3U\n", nil, true),
        ("§4.3.1.1 #EXTM3UX is another word", "#EXTM3UX\n", nil, false),
        ("§4.3.1.1 not on the first line", "\n#EXTM3U\n", nil, false),
        ("§4 an HTML error page is not a playlist", "<html><body>404</body></html>", "text/html", false),
        ("§4 Content-Type application/vnd.apple.mpegurl", "", "application/vnd.apple.mpegurl", true),
        ("§4 Content-Type in any case, parameters ignored", "", "Application/X-MpegURL; charset=utf-8", true),
        ("§4 Content-Type audio/mpegurl", "", "audio/mpegurl", true),
        ("§4 never by extension: an .m3u8 sent as octet-stream with HTML bytes", "<!doctype html>", "application/octet-stream", false),
        ("§4 JSON is not a playlist", "{\"error\":\"denied\"}", "application/json", false),
    ] as [(String, String, String?, Bool)])
    func recognisesPlaylists(_ rule: String, _ bytes: String, _ contentType: String?, _ expected: Bool) {
        #expect(HLSPlaylist.looksLikePlaylist(firstBytes: Array(bytes.utf8), contentType: contentType) == expected, "\(rule)")
    }

    // MARK: - Master playlists (§4.3.4)

    static let master = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-INDEPENDENT-SEGMENTS
        #EXT-X-SESSION-KEY:METHOD=AES-128,URI="/keys/session.key"
        #EXT-X-SESSION-DATA:DATA-ID="com.example.title",VALUE="Test"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="fr",NAME="Français, stéréo",DEFAULT=NO,URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",DEFAULT=YES,URI="subs/en.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,AVERAGE-BANDWIDTH=1000000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2",FRAME-RATE=25.000,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        360p/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,RESOLUTION=1280x720,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aac",VIDEO="cam"
        https://other.example/720p.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="iframes/360p.m3u8",CODECS="avc1.4d401e",RESOLUTION=640x360
        #EXT-X-FUTURE-TAG:X=1
        """

    @Test func aMasterPlaylistHasItsVariantsRenditionsAndIFrameStreams() throws {
        guard case .master(let m) = try HLSPlaylist.parse(text: Self.master, url: Self.base) else {
            Issue.record("not a master")
            return
        }
        #expect(m.version == 6)
        #expect(m.variants.count == 2)
        let v = m.variants[0]
        #expect(v.uri == "https://cdn.example/v/360p/index.m3u8")
        #expect(v.rawURI == "360p/index.m3u8")
        #expect(v.line == 10)
        #expect(v.bandwidth == 1_280_000 && v.averageBandwidth == 1_000_000)
        #expect(v.resolution == HLSMasterPlaylist.Resolution(width: 640, height: 360))
        #expect(v.codecs == "avc1.4d401e,mp4a.40.2" && v.frameRate == 25)
        #expect(v.audio == "aac" && v.subtitles == "subs" && v.closedCaptions == "cc" && v.video == nil)
        #expect(m.variants[1].uri == "https://other.example/720p.m3u8" && m.variants[1].video == "cam")
        #expect(m.renditions.map(\.name) == ["English", "Français, stéréo", "English", "CC1"])
        #expect(m.renditions[0].isDefault && m.renditions[0].autoselect && m.renditions[0].language == "en")
        #expect(m.renditions[1].uri == "https://cdn.example/v/audio/fr.m3u8" && !m.renditions[1].isDefault)
        #expect(m.renditions[2].type == .subtitles)
        #expect(m.renditions[3].type == .closedCaptions && m.renditions[3].uri == nil)
        #expect(m.iFrameStreams == [HLSMasterPlaylist.IFrameStream(uri: "https://cdn.example/v/iframes/360p.m3u8", line: 14,
                                                                   bandwidth: 86000, resolution: .init(width: 640, height: 360),
                                                                   codecs: "avc1.4d401e")])
        #expect(m.sessionKeys == [HLSKey(method: .aes128, uri: "https://cdn.example/keys/session.key")])
        #expect(m.otherTags.map(\.name) == ["EXT-X-INDEPENDENT-SEGMENTS", "EXT-X-SESSION-DATA", "EXT-X-FUTURE-TAG"])
    }

    // MARK: - Media playlists (§4.3.2, §4.3.3)

    /// What a test checks of one segment.
    struct Seg: Equatable, Sendable, CustomStringConvertible {
        var uri: String
        var range: ByteRange? = nil
        var key: String? = nil
        var map: String? = nil
        var sequence = 0
        var discontinuity = 0
        var description: String { "\(uri) \(range?.description ?? "") key=\(key ?? "-") map=\(map ?? "-") #\(sequence) d\(discontinuity)" }
    }

    struct MediaCase: CustomTestStringConvertible, Sendable {
        var name: String
        var body: String
        var expected: [Seg]
        var testDescription: String { name }
    }

    static let u = "https://cdn.example/v/"

    static let mediaCases: [MediaCase] = [
        MediaCase(name: "§4.3.2.1 EXTINF then the URI line: one segment each", body: "#EXTINF:4,\na.ts\n#EXTINF:4.5,title, with comma\nb.ts\n",
                  expected: [Seg(uri: u + "a.ts"), Seg(uri: u + "b.ts", sequence: 1)]),
        MediaCase(name: "§4.3.3.2 EXT-X-MEDIA-SEQUENCE numbers the first segment",
                  body: "#EXT-X-MEDIA-SEQUENCE:1000\n#EXTINF:4,\na.ts\n#EXTINF:4,\nb.ts\n",
                  expected: [Seg(uri: u + "a.ts", sequence: 1000), Seg(uri: u + "b.ts", sequence: 1001)]),
        MediaCase(name: "§4.3.2.2 EXT-X-BYTERANGE n@o", body: "#EXTINF:4,\n#EXT-X-BYTERANGE:1000@500\nall.ts\n",
                  expected: [Seg(uri: u + "all.ts", range: ByteRange(500, 1500))]),
        MediaCase(name: "§4.3.2.2 without @o the range follows the previous one of the same resource",
                  body: "#EXTINF:4,\n#EXT-X-BYTERANGE:1000@0\nall.ts\n#EXTINF:4,\n#EXT-X-BYTERANGE:700\nall.ts\n#EXTINF:4,\n#EXT-X-BYTERANGE:300\nall.ts\n",
                  expected: [Seg(uri: u + "all.ts", range: ByteRange(0, 1000)), Seg(uri: u + "all.ts", range: ByteRange(1000, 1700), sequence: 1),
                             Seg(uri: u + "all.ts", range: ByteRange(1700, 2000), sequence: 2)]),
        MediaCase(name: "§4.3.2.2 implicit offsets are kept per resource",
                  body: "#EXTINF:4,\n#EXT-X-BYTERANGE:10@0\nv.ts\n#EXTINF:4,\n#EXT-X-BYTERANGE:20@0\na.aac\n#EXTINF:4,\n#EXT-X-BYTERANGE:10\nv.ts\n",
                  expected: [Seg(uri: u + "v.ts", range: ByteRange(0, 10)), Seg(uri: u + "a.aac", range: ByteRange(0, 20), sequence: 1),
                             Seg(uri: u + "v.ts", range: ByteRange(10, 20), sequence: 2)]),
        MediaCase(name: "§4.3.2.4 a key is in force until the next EXT-X-KEY; METHOD=NONE ends it",
                  body: "#EXT-X-KEY:METHOD=AES-128,URI=\"k1\"\n#EXTINF:4,\na.ts\n#EXTINF:4,\nb.ts\n#EXT-X-KEY:METHOD=AES-128,URI=\"k2\",IV=0x01\n#EXTINF:4,\nc.ts\n#EXT-X-KEY:METHOD=NONE\n#EXTINF:4,\nd.ts\n",
                  expected: [Seg(uri: u + "a.ts", key: u + "k1"), Seg(uri: u + "b.ts", key: u + "k1", sequence: 1),
                             Seg(uri: u + "c.ts", key: u + "k2", sequence: 2), Seg(uri: u + "d.ts", sequence: 3)]),
        MediaCase(name: "§4.3.2.5 EXT-X-MAP is in force until the next one",
                  body: "#EXT-X-MAP:URI=\"init1.mp4\"\n#EXTINF:4,\na.m4s\n#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI=\"init2.mp4\",BYTERANGE=\"720@0\"\n#EXTINF:4,\nb.m4s\n",
                  expected: [Seg(uri: u + "a.m4s", map: u + "init1.mp4"), Seg(uri: u + "b.m4s", map: u + "init2.mp4", sequence: 1, discontinuity: 1)]),
        MediaCase(name: "§4.3.3.3 EXT-X-DISCONTINUITY-SEQUENCE counts on at each EXT-X-DISCONTINUITY",
                  body: "#EXT-X-DISCONTINUITY-SEQUENCE:7\n#EXTINF:4,\na.ts\n#EXT-X-DISCONTINUITY\n#EXTINF:4,\nb.ts\n",
                  expected: [Seg(uri: u + "a.ts", discontinuity: 7), Seg(uri: u + "b.ts", sequence: 1, discontinuity: 8)]),
        MediaCase(name: "§4.1 comments, blank lines and unknown tags are not segments",
                  body: "# a comment\n\n#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n#EXT-UNKNOWN:whatever,\"x\n#EXTINF:4,\na.ts\n",
                  expected: [Seg(uri: u + "a.ts")]),
        MediaCase(name: "§4.1 a URI line is resolved against the playlist's URL", body: "#EXTINF:4,\n../x/a.ts?t=1\n",
                  expected: [Seg(uri: "https://cdn.example/x/a.ts?t=1")]),
        MediaCase(name: "§4.3.3.4 an empty live playlist is a playlist", body: "#EXT-X-TARGETDURATION:4\n", expected: []),
    ]

    @Test(arguments: mediaCases) func mediaSegments(_ c: MediaCase) throws {
        let m = try Self.media(c.body)
        let got = m.segments.map { s in
            Seg(uri: s.uri, range: s.byteRange, key: s.keys.first?.uri, map: s.map?.uri, sequence: s.sequence, discontinuity: s.discontinuitySequence)
        }
        #expect(got == c.expected)
    }

    @Test func mediaPlaylistHeaderTags() throws {
        let vod = try Self.media("#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-I-FRAMES-ONLY\n#EXTINF:5.5,\na.ts\n#EXT-X-ENDLIST\n")
        #expect(vod.version == 4 && vod.targetDuration == 6 && vod.playlistType == .vod && vod.iFramesOnly)
        #expect(vod.hasEndList && !vod.isLive && vod.duration == 5.5)
        #expect(vod.segments[0].title == "" && vod.segments[0].line == 7)
        let live = try Self.media("#EXT-X-PLAYLIST-TYPE:EVENT\n#EXTINF:4,\na.ts\n")
        #expect(live.isLive && live.playlistType == .event)
    }

    @Test func keysForSeveralKeyFormatsApplyTogether() throws {
        let m = try Self.media("""
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://k1",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="data:text/plain;base64,AAAA",KEYFORMAT="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"
            #EXTINF:4,
            a.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k.key"
            #EXTINF:4,
            b.ts

            """)
        #expect(m.segments[0].keys.map(\.keyFormat) == ["com.apple.streamingkeydelivery", "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"])
        #expect(m.segments[0].keys.allSatisfy { !$0.isFetchable && $0.method == .sampleAES })
        #expect(m.segments[1].keys == [HLSKey(method: .aes128, uri: "https://cdn.example/v/k.key")])
        #expect(m.segments[1].keys[0].isFetchable)
    }

    @Test func crlfAndLFReadTheSame() throws {
        let lf = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:4,t\na.ts\n#EXT-X-ENDLIST\n"
        let crlf = lf.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try HLSPlaylist.parse(Array(crlf.utf8), url: Self.base) == HLSPlaylist.parse(Array(lf.utf8), url: Self.base))
        #expect(try HLSPlaylist.parse(Array(("\u{FEFF}" + lf).utf8), url: Self.base) == HLSPlaylist.parse(Array(lf.utf8), url: Self.base))
    }

    /// The pure-Swift trim the parser, rewriter and export names use trims what Foundation's
    /// `.whitespaces` trims on Linux (tab, Unicode space separators, U+200B), and nothing else.
    @Test(arguments: ["seg.ts", "  seg.ts", "seg.ts\t", " \t a b.ts \t", "\u{00A0}seg.ts\u{3000}", "\u{2003}", "", "   ",
                      "é.ts ", "\u{200B}x\u{200B}", "x\u{0B}", "a\u{1680}"])
    func trimmingBlanksTrimsAsFoundationsWhitespaces(_ s: String) {
        #expect(s.trimmingBlanks == s.trimmingCharacters(in: .whitespaces), "\(Array(s.unicodeScalars))")
        #expect(s.dropFirst(0).trimmingBlanks == s.trimmingCharacters(in: .whitespaces))
    }
}
