import Foundation
import Testing
@testable import VCacheCore

/// What a segment's first bytes must look like (RFC 8216 §3), and error bodies that must not pass.
@Suite struct HLSSegmentCheckTests {
    static func ts(packets: Int) -> [UInt8] {
        var out: [UInt8] = []
        for _ in 0..<packets { out += [0x47, 0x40, 0x00, 0x10] + [UInt8](repeating: 0xFF, count: 184) }
        return out
    }

    static func box(_ type: String, size: UInt32 = 24) -> [UInt8] {
        withUnsafeBytes(of: size.bigEndian, Array.init) + Array(type.utf8) + [UInt8](repeating: 0, count: 16)
    }

    static let cases: [(String, [UInt8], HLSSegmentCheck.Kind?)] = [
        ("§3.2 MPEG-TS: 0x47 at 0 and at 188", ts(packets: 3), .mpegTS),
        ("§3.2 MPEG-TS: one packet only", ts(packets: 1), .mpegTS),
        ("§3.2 MPEG-TS: no sync byte at 188", ts(packets: 1) + [0x00] + ts(packets: 1), nil),
        ("§3.2 text starting with G (0x47) is not a packet", Array("Gateway Timeout\n".utf8), nil),
        ("§3.3 fMP4 init segment: ftyp", box("ftyp"), .fragmentedMP4),
        ("§3.3 fMP4 media segment: styp", box("styp"), .fragmentedMP4),
        ("§3.3 fMP4 media segment: moof", box("moof"), .fragmentedMP4),
        ("§3.3 fMP4 media segment: sidx", box("sidx"), .fragmentedMP4),
        ("§3.3 CMAF: emsg and prft may come first", box("emsg") + box("prft"), .fragmentedMP4),
        ("§3.3 a box with a 64-bit size", box("moof", size: 1), .fragmentedMP4),
        ("§3.3 a box size below 8 is no box", box("moof", size: 7), nil),
        ("§3.3 mdat is not where a segment starts", box("mdat"), nil),
        ("§3.4 packed audio: ID3 header", Array("ID3".utf8) + [4, 0, 0, 0, 0, 0x3F], .packedAudio),
        ("§3.4 packed audio: ADTS sync 0xFFF", [0xFF, 0xF1, 0x50, 0x80, 0x2E, 0x7F, 0xFC], .packedAudio),
        ("§3.4 packed audio: MPEG audio sync", [0xFF, 0xFB, 0x90, 0x64], .packedAudio),
        ("§3.5 WebVTT", Array("WEBVTT\n\n00:00.000 --> 00:01.000\nhi\n".utf8), .webVTT),
        ("§3.5 WebVTT after a BOM, with a header comment", [0xEF, 0xBB, 0xBF] + Array("WEBVTT - subs\n".utf8), .webVTT),
        ("§3.5 WEBVTTX is not WebVTT", Array("WEBVTTX\n".utf8), nil),
        ("an HTML error page", Array("<!DOCTYPE html><html><body>403 Forbidden</body></html>".utf8), nil),
        ("an HTML error page after whitespace", Array("\n\n  <html>".utf8), nil),
        ("a JSON error body", Array("{\"error\":\"token expired\"}".utf8), nil),
        ("a playlist where a segment was expected", Array("#EXTM3U\n".utf8), nil),
        ("nothing", [], nil),
    ]

    @Test(arguments: cases) func recognisesSegments(_ rule: String, _ bytes: [UInt8], _ expected: HLSSegmentCheck.Kind?) {
        #expect(HLSSegmentCheck.kind(firstBytes: bytes) == expected, "\(rule)")
        #expect(HLSSegmentCheck.looksLikeSegment(firstBytes: Data(bytes)) == (expected != nil))
    }
}

/// Which members of a media playlist serve checks before storing them (`checksSegment`), as
/// prefetch does: segments and init sections, not keys, not segments under AES-128 (RFC 8216
/// §4.3.2.4: whole-segment ciphertext), and SAMPLE-AES segments are still TS or fMP4.
@Suite struct HLSMemberCheckTests {
    static let playlist = """
        #EXTM3U
        #EXT-X-VERSION:7
        #EXT-X-TARGETDURATION:2
        #EXT-X-MAP:URI="init.mp4"
        #EXTINF:2.0,
        a.m4s
        #EXT-X-KEY:METHOD=AES-128,URI="k.key",IV=0x0123456789abcdef0123456789abcdef
        #EXTINF:2.0,
        b.m4s
        #EXT-X-KEY:METHOD=NONE
        #EXTINF:2.0,
        c.m4s?token=1
        #EXT-X-KEY:METHOD=SAMPLE-AES,URI="s.key"
        #EXTINF:2.0,
        d.m4s
        #EXT-X-ENDLIST

        """

    static let cases: [(String, String, Bool?)] = [
        ("§4.3.2.5 an init section is checked", "init.mp4", true),
        ("a segment in the clear is checked", "a.m4s", true),
        ("§4.3.2.4 a segment under AES-128 is ciphertext: not checked", "b.m4s", false),
        ("a key is not a segment", "k.key", false),
        ("METHOD=NONE ends encryption: checked again", "c.m4s?token=1", true),
        ("SAMPLE-AES leaves the container in the clear: checked", "d.m4s", true),
        ("a URL the playlist does not name: no answer", "other.m4s", nil),
    ]

    @Test(arguments: cases)
    func aMemberIsCheckedAsPrefetchChecksIt(_ name: String, _ uri: String, _ expected: Bool?) throws {
        guard case .media(let media) = try HLSPlaylist.parse(text: Self.playlist, url: "http://h/s/index.m3u8") else {
            Issue.record("not a media playlist")
            return
        }
        #expect(media.checksSegment(where: { $0 == "http://h/s/" + uri }) == expected, "\(name)")
    }
}
