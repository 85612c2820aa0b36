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

/// How a media playlist's members are checked before they are stored (`HLSMemberCheck`), by
/// prefetch and serve alike: segments and init sections by their first bytes, a key by its
/// length (16), a whole segment under AES-128 by its length (RFC 8216 §4.3.2.4: whole-segment
/// ciphertext, 16-byte blocks), a byte range of one not at all; SAMPLE-AES segments are still
/// TS or fMP4.
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
        #EXTINF:2.0,
        #EXT-X-BYTERANGE:1000@0
        all.m4s
        #EXTINF:2.0,
        #EXT-X-BYTERANGE:1000@0
        mixed.m4s
        #EXTINF:2.0,
        mixed.m4s
        #EXT-X-KEY:METHOD=NONE
        #EXTINF:2.0,
        c.m4s?token=1
        #EXT-X-KEY:METHOD=SAMPLE-AES,URI="s.key"
        #EXTINF:2.0,
        d.m4s
        #EXT-X-ENDLIST

        """

    static let cases: [(String, String, HLSMemberCheck?)] = [
        ("§4.3.2.5 an init section: its first bytes", "init.mp4", .segment),
        ("a segment in the clear: its first bytes", "a.m4s", .segment),
        ("§4.3.2.4 a segment under AES-128 is ciphertext: its length", "b.m4s", .encryptedSegment),
        ("§4.3.2.2 byte ranges of a file under AES-128 are padded each: nothing", "all.m4s", .unchecked),
        ("under AES-128, named whole once: its length", "mixed.m4s", .encryptedSegment),
        ("§5.2 an AES-128 key: its length", "k.key", .key),
        ("a SAMPLE-AES key is an AES-128 key too", "s.key", .key),
        ("METHOD=NONE ends encryption: its first bytes again", "c.m4s?token=1", .segment),
        ("SAMPLE-AES leaves the container in the clear: its first bytes", "d.m4s", .segment),
        ("a URL the playlist does not name: no answer", "other.m4s", nil),
    ]

    @Test(arguments: cases)
    func aMemberIsCheckedAsItsPlaylistSays(_ name: String, _ uri: String, _ expected: HLSMemberCheck?) throws {
        guard case .media(let media) = try HLSPlaylist.parse(text: Self.playlist, url: "http://h/s/index.m3u8") else {
            Issue.record("not a media playlist")
            return
        }
        #expect(media.memberCheck(where: { $0 == "http://h/s/" + uri }) == expected, "\(name)")
    }

    static let ts: [UInt8] = [0x47, 0x40, 0x00, 0x10] + [UInt8](repeating: 0xFF, count: 184) + [0x47, 0x40, 0x00, 0x11]
    static let page = Array("<html><body>Not Found</body></html>\n".utf8)

    static let problems: [(String, HLSMemberCheck, Int64?, [UInt8], String?)] = [
        ("a key of 16 bytes", .key, 16, [UInt8](repeating: 1, count: 16), nil),
        ("an error page for a key", .key, 36, page,
         "origin's answer for an AES-128 key is 36 bytes, not 16: an error page in its place?"),
        ("a key of unknown length: nothing to judge yet", .key, nil, page, nil),
        ("an encrypted segment of whole blocks, whatever its bytes", .encryptedSegment, 4096, page, nil),
        ("an encrypted segment cut mid-block", .encryptedSegment, 4100, [UInt8](repeating: 7, count: 16),
         "origin's answer for an AES-128 segment is 4100 bytes, not a whole number of 16-byte blocks: an error page in its place?"),
        ("a TS segment in the clear", .segment, 376, ts, nil),
        ("an error page for a segment in the clear", .segment, 36, page,
         "origin's answer for an HLS segment is not one: its first bytes '<html><body>Not ' are not MPEG-TS, fMP4, packed audio or WebVTT"),
        ("a byte range under AES-128: nothing judged", .unchecked, 4100, page, nil),
        // A DASH text Representation may be a raw TTML file (a `tt` root in the TTML namespace).
        ("a raw TTML sidecar, whole", .dashSegment, Int64(ttml.count), ttml, nil),
        ("a raw TTML sidecar's head, with a prefix", .dashSegment, 100_000,
         Array("<?xml version=\"1.0\"?>\n<!-- c --><ttml:tt xmlns:ttml='http://www.w3.org/ns/ttml' xml:lang=\"en\"><ttml:body>".utf8), nil),
        ("TTML is no HLS segment", .segment, Int64(ttml.count), ttml,
         "origin's answer for an HLS segment is not one: its first bytes '<?xml version=\"1' are not MPEG-TS, fMP4, packed audio or WebVTT"),
        ("a TTML root not closed: not well-formed", .dashSegment, Int64(ttml.count - 6), Array(ttml.dropLast(6)),
         "origin's answer for a DASH segment is not one: its first bytes '<?xml version=\"1' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT"),
        ("a tt root in another namespace", .dashSegment, 200, Array("<tt xmlns=\"http://example.com/ns/ttml\"><body/></tt>".utf8),
         "origin's answer for a DASH segment is not one: its first bytes '<tt xmlns=\"http:' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT"),
        ("an error page for a DASH segment", .dashSegment, 36, page,
         "origin's answer for a DASH segment is not one: its first bytes '<html><body>Not ' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT"),
    ]

    static let ttml = Array("""
        <?xml version="1.0" encoding="UTF-8"?>
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:tts="http://www.w3.org/ns/ttml#styling" xml:lang="en">
        <body><div><p begin="00:00:00.000" end="00:00:02.000">Hello</p></div></body></tt>

        """.utf8)

    @Test(arguments: problems)
    func aMembersBytesAreJudgedByItsCheck(_ name: String, _ check: HLSMemberCheck, _ length: Int64?, _ first: [UInt8], _ expected: String?) {
        #expect(check.problem(length: length, firstBytes: first) == expected, "\(name)")
    }
}

/// A member whose every byte is held, and an MPD's byte range of a file: whole boxes or not
/// (`HLSMemberCheck.wholeProblem`, `rangeProblem`; ISO/IEC 14496-12 §4.2).
@Suite struct HLSMemberBoxesTests {
    static func box(_ type: String, _ size: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt32(size).bigEndian, Array.init) + Array(type.utf8) + [UInt8](repeating: 0, count: size - 8)
    }

    static func read(_ bytes: [UInt8]) -> MP4Walker.Read {
        { offset, count in
            guard offset >= 0, Int(offset) + count <= bytes.count else { throw MP4Error.truncatedHeader(at: offset) }
            return Array(bytes[Int(offset)..<Int(offset) + count])
        }
    }

    static let segment = box("styp", 16) + box("moof", 100) + box("mdat", 200)

    static let wholeCases: [(String, HLSMemberCheck, [UInt8], Int64, String?)] = [
        ("tiled exactly", .dashSegment, segment, 316, nil),
        ("cut by a short Content-Length", .dashSegment, Array(segment.prefix(200)), 200,
         "origin's answer for a DASH segment is not a whole one: box 'mdat' at offset 116 ends at 316, past its 200 bytes (a Content-Length shorter than the segment?)"),
        ("an HLS init section cut", .segment, Array((box("ftyp", 24) + box("moov", 80)).prefix(60)), 60,
         "origin's answer for an HLS segment is not a whole one: box 'moov' at offset 24 ends at 104, past its 60 bytes (a Content-Length shorter than the segment?)"),
        ("MPEG-TS is not walked", .segment, HLSSegmentCheckTests.ts(packets: 2), 376, nil),
        ("a key is not walked", .key, box("moof", 16), 16, nil),
    ]

    @Test(arguments: wholeCases)
    func aWholeMemberIsTiledBoxes(_ name: String, _ check: HLSMemberCheck, _ bytes: [UInt8], _ length: Int64, _ expected: String?) {
        #expect(check.wholeProblem(length: length, read: Self.read(bytes)) == expected, "\(name)")
    }

    @Test
    func anMPDRangeIsWholeSegmentBoxes() {
        let file = Self.box("ftyp", 24) + Self.box("moov", 40) + Self.segment
        #expect(HLSMemberCheck.rangeProblem(first: 0, last: 63, read: Self.read(file)) == nil)
        #expect(HLSMemberCheck.rangeProblem(first: 64, last: 379, read: Self.read(file)) == nil)
        #expect(HLSMemberCheck.rangeProblem(first: 69, last: 379, read: Self.read(file))?.hasPrefix("its MPD's byte range 69-379 does not start with a segment's box: its first bytes 'typ.....'") == true)
        // Starts on a box, ends inside one.
        #expect(HLSMemberCheck.rangeProblem(first: 64, last: 300, read: Self.read(file)) == "its MPD's byte range 64-300 is not whole boxes (box 'mdat' at offset 180 ends at 380, past its container's end 301); fix the MPD's mediaRange")
    }
}
