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
