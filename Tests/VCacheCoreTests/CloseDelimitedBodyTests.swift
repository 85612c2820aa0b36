import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// When an HTTP/1 body's end is only the connection's close (RFC 9112 §6.3), and whether bytes
/// so ended prove themselves whole (`CloseDelimitedBody`), one line per case, on ffmpeg's files.
@Suite struct CloseDelimitedBodyTests {
    static func head(_ version: String, _ headers: [(String, String)]) -> ResponseHead {
        var h = ResponseHead(status: 200, reason: "OK", headers: headers, effectiveURL: "http://o/v.mp4")
        h.version = version
        return h
    }

    @Test func theBodyEndFollowsRFC9112() {
        let cases: [(String, [(String, String)], ResponseHead.BodyEnd)] = [
            ("HTTP/1.1", [("Content-Length", "10")], .length),
            ("HTTP/1.1", [("Transfer-Encoding", "chunked")], .chunked),
            ("HTTP/1.1", [("Transfer-Encoding", "gzip, chunked")], .chunked),
            // Chunked wins over a Content-Length (§6.3 rule 3).
            ("HTTP/1.1", [("Content-Length", "10"), ("Transfer-Encoding", "chunked")], .chunked),
            ("HTTP/1.1", [("Connection", "close")], .connectionClose),
            ("HTTP/1.0", [], .connectionClose),
            // A transfer coding that is not chunked last: read until the close (rule 4).
            ("HTTP/1.1", [("Transfer-Encoding", "gzip")], .connectionClose),
            ("HTTP/2", [], .stream),
            ("HTTP/3", [], .stream),
        ]
        for (version, headers, end) in cases {
            #expect(Self.head(version, headers).bodyEnd == end, "\(version) \(headers)")
        }
    }

    static func judge(_ bytes: Data, member: Bool = false) -> CloseDelimitedBody.Verdict {
        let b = [UInt8](bytes)
        return CloseDelimitedBody.judge(length: Int64(b.count), member: member) { offset, count in
            guard offset >= 0, Int(offset) + count <= b.count else { throw MP4Error.truncatedHeader(at: offset) }
            return Array(b[Int(offset)..<Int(offset) + count])
        }
    }

    @Test func bytesAreWholeOnlyWhenTheirBoxesSaySo() throws {
        let front = try Fixtures.data("moov-at-front.mp4"), end = try Fixtures.data("moov-at-end.mp4")
        let frag = try Fixtures.data("fragmented.mp4"), mov = try Fixtures.data("quicktime.mov")
        let cases: [(String, Data, Bool, CloseDelimitedBody.Verdict)] = [
            ("moov at the front, whole", front, false, .whole),
            ("moov at the end, whole", end, false, .whole),
            ("QuickTime, whole", mov, false, .whole),
            ("fragmented, ending with its mfra", frag, false, .whole),
            ("cut inside the mdat", front.prefix(148_034), false, .cut("box 'mdat' at offset 9670 ends at 296069, past the 148034 bytes that came")),
            ("cut inside a box header", front.prefix(9674), false, .cut("a box header at offset 9670 is cut off at byte 9674")),
            ("cut right after the mdat, before the moov", end.prefix(286_439), false, .cut("they hold no 'moov' box (a whole MP4 has one)")),
            ("cut right after the moov", front.prefix(9670), false, .cut("a chunk offset (9678) points outside the file (9670 bytes)")),
            ("fragmented, cut between fragments", frag.prefix(99_045), false,
             .unproven("a fragmented MP4 with no 'mfra' at its end can stop after any fragment")),
            ("fragmented, cut inside a fragment", frag.prefix(50_000), false, .cut("box 'mdat' at offset 44906 ends at 99045, past the 50000 bytes that came")),
            // A member (segment or init section) is a run of boxes.
            ("a member's whole boxes", frag.subdata(in: 1276..<43_982), true, .whole),
            ("a member cut inside a box", frag.subdata(in: 1276..<40_000), true, .cut("box 'mdat' at offset 1252 ends at 42706, past the 38724 bytes that came")),
            ("a playlist ending with a line break", Data("#EXTM3U\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n".utf8), false, .whole),
            ("a playlist cut mid-line", Data("#EXTM3U\n#EXTINF:2,\na.t".utf8), false, .cut("an HLS playlist whose last line has no line break")),
            ("not an MP4", Data("<html><body>moved</body></html>\n".utf8), false, .unproven("they are not an MP4, whose boxes would say where it ends")),
            ("MPEG-TS", Data([0x47, 0x40, 0x00, 0x10] + [UInt8](repeating: 0xFF, count: 184)), true, .unproven("they are not an MP4, whose boxes would say where it ends")),
            ("too short", Data([0, 0, 0]), false, .unproven("its 3 bytes are too few to be checked")),
            ("nothing", Data(), false, .unproven("its 0 bytes are too few to be checked")),
        ]
        for (name, bytes, member, verdict) in cases {
            #expect(Self.judge(bytes, member: member) == verdict, "\(name)")
        }
    }

    @Test func aPlaylistsByteRangeMustEndInsideTheResource() {
        var item = PrefetchItem(url: "http://o/all.ts", requests: [.span(first: 0, last: 1879), .span(first: 1880, last: 3760)])
        item.rangesMustFit = true
        let cases: [(Int64, PrefetchError?)] = [
            (3761, nil),
            (3760, .rangeOverrun(first: 1880, last: 3760, length: 3760)),
            (1880, .rangeOverrun(first: 1880, last: 3760, length: 1880)),
            (1879, .rangeOverrun(first: 0, last: 1879, length: 1879)),
            (0, .rangeOverrun(first: 0, last: 1879, length: 0)),
        ]
        for (length, error) in cases {
            #expect(item.rangeOverrun(length: length) == error, "\(length)")
        }
        // The user's own --range is clamped to the length, as documented.
        item.rangesMustFit = false
        #expect(item.rangeOverrun(length: 100) == nil)
    }
}
