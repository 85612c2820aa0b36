import Foundation
import Testing
@testable import VCacheCore

/// Malformed playlists: a typed error with its line, never a trap.
@Suite struct HLSPlaylistErrorTests {
    static let base = "https://cdn.example/v/index.m3u8"

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var text: String
        var expected: HLSParseError
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "§4.3.1.1 the first line must be #EXTM3U", text: "<html>\n#EXTM3U\n", expected: .init(line: 1, .notAPlaylist)),
        Case(name: "§4.3.1.1 an empty file is not a playlist", text: "", expected: .init(line: 1, .notAPlaylist)),
        Case(name: "§4.1 no NUL bytes", text: "#EXTM3U\n#EXTINF:4,\na\u{0}.ts\n", expected: .init(line: 3, .controlCharacter)),
        Case(name: "§4.1 no lone CR inside a line", text: "#EXTM3U\n#EXTINF:4,\ra.ts\n", expected: .init(line: 2, .controlCharacter)),
        Case(name: "§4.3.2.1 EXTINF needs a duration", text: "#EXTM3U\n#EXTINF:,x\na.ts\n",
             expected: .init(line: 2, tag: "EXTINF", .badValue("duration '' is not a non-negative decimal"))),
        Case(name: "§4.3.2.1 EXTINF needs a value", text: "#EXTM3U\n#EXTINF\na.ts\n",
             expected: .init(line: 2, tag: "EXTINF", .badValue("EXTINF needs a value"))),
        Case(name: "§4.3.2.1 a duration is a decimal, not 1e400", text: "#EXTM3U\n#EXTINF:1e400,\na.ts\n",
             expected: .init(line: 2, tag: "EXTINF", .badValue("duration '1e400' is not a non-negative decimal"))),
        Case(name: "§4.3.2.1 every segment has an EXTINF", text: "#EXTM3U\n#EXT-X-TARGETDURATION:4\na.ts\n",
             expected: .init(line: 3, .uriWithoutTag)),
        Case(name: "§4.3.2.1 a truncated file: EXTINF without its URI", text: "#EXTM3U\n#EXTINF:4,\na.ts\n#EXTINF:4,\n",
             expected: .init(line: 4, tag: "EXTINF", .tagWithoutURI)),
        Case(name: "§4.3.2.1 two EXTINFs for one URI", text: "#EXTM3U\n#EXTINF:4,\n#EXTINF:4,\na.ts\n",
             expected: .init(line: 2, tag: "EXTINF", .tagWithoutURI)),
        Case(name: "§4.3.2.2 n@o are decimal-integers", text: "#EXTM3U\n#EXTINF:4,\n#EXT-X-BYTERANGE:10@x\na.ts\n",
             expected: .init(line: 3, tag: "EXT-X-BYTERANGE", .badValue("'10@x' is not <length>[@<offset>] below 2^63"))),
        Case(name: "§4.3.2.2 a huge length is refused, not wrapped", text: "#EXTM3U\n#EXTINF:4,\n#EXT-X-BYTERANGE:99999999999999999999@0\na.ts\n",
             expected: .init(line: 3, tag: "EXT-X-BYTERANGE", .badValue("'99999999999999999999@0' is not <length>[@<offset>] below 2^63"))),
        Case(name: "§4.3.2.2 offset plus length past 2^63", text: "#EXTM3U\n#EXTINF:4,\n#EXT-X-BYTERANGE:9223372036854775807@1\na.ts\n",
             expected: .init(line: 3, tag: "EXT-X-BYTERANGE", .badValue("byte range ends past 2^63"))),
        Case(name: "§4.3.2.2 an implicit offset needs an earlier sub-range of the same resource",
             text: "#EXTM3U\n#EXTINF:4,\n#EXT-X-BYTERANGE:10@0\na.ts\n#EXTINF:4,\n#EXT-X-BYTERANGE:10\nb.ts\n",
             expected: .init(line: 6, tag: "EXT-X-BYTERANGE", .implicitOffsetWithoutPrevious)),
        Case(name: "§4.3.2.4 EXT-X-KEY needs METHOD", text: "#EXTM3U\n#EXT-X-KEY:URI=\"k\"\n",
             expected: .init(line: 2, tag: "EXT-X-KEY", .missingAttribute("METHOD"))),
        Case(name: "§4.3.2.4 AES-128 needs a URI", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n",
             expected: .init(line: 2, tag: "EXT-X-KEY", .missingAttribute("URI"))),
        Case(name: "§4.3.2.4 IV is a hexadecimal-sequence", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=12\n",
             expected: .init(line: 2, tag: "EXT-X-KEY", .badAttribute(name: "IV", value: "12", expected: "hexadecimal-sequence"))),
        Case(name: "§4.3.2.4 an unterminated quoted URI (a file cut mid-line)", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"htt",
             expected: .init(line: 2, tag: "EXT-X-KEY", .badAttributeList("URI has an unterminated quoted string"))),
        Case(name: "§4.3.2.5 EXT-X-MAP needs a URI", text: "#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"10@0\"\n",
             expected: .init(line: 2, tag: "EXT-X-MAP", .missingAttribute("URI"))),
        Case(name: "§4.3.2.5 EXT-X-MAP BYTERANGE is n[@o]", text: "#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"-1@0\"\n",
             expected: .init(line: 2, tag: "EXT-X-MAP", .badAttribute(name: "BYTERANGE", value: "-1@0", expected: "<length>[@<offset>]"))),
        Case(name: "§4.3.3.2 EXT-X-MEDIA-SEQUENCE is a decimal-integer", text: "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-5\n",
             expected: .init(line: 2, tag: "EXT-X-MEDIA-SEQUENCE", .badValue("'-5' is not a decimal-integer below 2^63"))),
        Case(name: "§4.3.3.2 sequence numbers that would pass 2^63",
             text: "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807\n#EXTINF:4,\na.ts\n#EXTINF:4,\nb.ts\n",
             expected: .init(line: 2, tag: "EXT-X-MEDIA-SEQUENCE", .badValue("media sequence numbers pass 2^63"))),
        Case(name: "§4.3.4.2 EXT-X-STREAM-INF needs BANDWIDTH", text: "#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=640x360\na.m3u8\n",
             expected: .init(line: 2, tag: "EXT-X-STREAM-INF", .missingAttribute("BANDWIDTH"))),
        Case(name: "§4.3.4.2 EXT-X-STREAM-INF needs its URI line", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n",
             expected: .init(line: 2, tag: "EXT-X-STREAM-INF", .tagWithoutURI)),
        Case(name: "§4.3.4.2 RESOLUTION is <w>x<h>", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=wide\na.m3u8\n",
             expected: .init(line: 2, tag: "EXT-X-STREAM-INF", .badAttribute(name: "RESOLUTION", value: "wide", expected: "decimal-resolution"))),
        Case(name: "§4.3.4.1 EXT-X-MEDIA needs GROUP-ID", text: "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,NAME=\"a\"\n",
             expected: .init(line: 2, tag: "EXT-X-MEDIA", .missingAttribute("GROUP-ID"))),
        Case(name: "§4.3.4.3 EXT-X-I-FRAME-STREAM-INF needs a URI", text: "#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1\n",
             expected: .init(line: 2, tag: "EXT-X-I-FRAME-STREAM-INF", .missingAttribute("URI"))),
        Case(name: "§4.3.4 master and media tags never mix", text: "#EXTM3U\n#EXTINF:4,\na.ts\n#EXT-X-STREAM-INF:BANDWIDTH=1\nb.m3u8\n",
             expected: .init(line: 4, tag: "EXT-X-STREAM-INF", .mixedPlaylist)),
    ]

    @Test(arguments: cases) func refuses(_ c: Case) {
        #expect(throws: c.expected) { try HLSPlaylist.parse(Array(c.text.utf8), url: Self.base) }
    }

    @Test func invalidUTF8NamesItsLine() {
        let bytes = Array("#EXTM3U\n#EXTINF:4,\n".utf8) + [0x61, 0xC3, 0x28, 0x0A]
        #expect(throws: HLSParseError(line: 3, .notUTF8)) { try HLSPlaylist.parse(bytes, url: Self.base) }
    }

    @Test func errorsSayWhereAndWhy() {
        let e = HLSParseError(line: 6, tag: "EXT-X-BYTERANGE", .implicitOffsetWithoutPrevious)
        #expect(e.description == "line 6 (EXT-X-BYTERANGE): byte range without @offset and no earlier sub-range of the same resource")
    }

    static let rich = """
        #EXTM3U
        #EXT-X-VERSION:7
        #EXT-X-TARGETDURATION:4
        #EXT-X-MEDIA-SEQUENCE:12
        #EXT-X-KEY:METHOD=AES-128,URI="https://k.example/key?id=1,2",IV=0x0123456789ABCDEF0123456789ABCDEF
        #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
        #EXTINF:4.000,
        #EXT-X-BYTERANGE:1000@720
        media.mp4
        #EXT-X-DISCONTINUITY
        #EXTINF:3.5,title
        #EXT-X-BYTERANGE:800
        media.mp4
        #EXT-X-ENDLIST

        """

    /// Every prefix of a rich playlist (a file cut anywhere) parses or fails with an error.
    @Test func everyTruncationGivesAPlaylistOrAnError() {
        let bytes = Array(Self.rich.utf8)
        for n in 0...bytes.count {
            do { _ = try HLSPlaylist.parse(bytes[..<n], url: Self.base) } catch { #expect(error.line >= 0) }
        }
    }

    /// Random byte flips, NULs, huge numbers and CRs: never a trap.
    @Test func mutatedPlaylistsNeverTrap() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            return z ^ (z >> 27)
        }
        let pieces: [[UInt8]] = [[0], [0x0D], [0x0A], Array("99999999999999999999999".utf8), Array("@".utf8), Array("\"".utf8),
                                 Array(",".utf8), Array("=".utf8), [0xFF], Array("#EXT-X-STREAM-INF:BANDWIDTH=1\n".utf8)]
        let original = Array(Self.rich.utf8)
        var parsed = 0
        for _ in 0..<3000 {
            var b = original
            for _ in 0..<(1 + Int(next() % 4)) {
                let at = Int(next() % UInt64(b.count))
                let piece = pieces[Int(next() % UInt64(pieces.count))]
                if next() % 2 == 0 { b.replaceSubrange(at..<min(b.count, at + piece.count), with: piece) } else { b.insert(contentsOf: piece, at: at) }
            }
            if (try? HLSPlaylist.parse(b, url: Self.base)) != nil { parsed += 1 }
        }
        #expect(parsed < 3000)
    }
}
