import Testing
@testable import VCacheCore

/// `SameBytesCheck` (hostile probe h2, F11) and `ManifestRevalidation.sameUnderKeyRules` (F1, F3):
/// what makes a whole answer the same file, and another manifest's bytes the same manifest.
@Suite struct SameBytesCheckTests {
    let file: [UInt8] = (0..<100).map { UInt8($0) }
    let old = Validators(length: 100, etag: "\"a\"", lastModified: nil)
    let new = Validators(length: 100, etag: "\"b\"", lastModified: nil)

    func check(_ held: [ByteRange], answer: Validators? = nil) -> SameBytesCheck? {
        SameBytesCheck(held: RangeSet(held), old: old, answer: answer ?? new, contentType: nil, reason: "r")
    }

    func feed(_ c: inout SameBytesCheck, _ body: [UInt8], chunk: Int) -> Bool {
        var at = 0
        while Int64(at) < c.end {
            let n = min(chunk, Int(c.end) - at)
            let ok = body[at..<at + n].withUnsafeBytes { c.take($0, at: Int64(at)) { r in Array(file[Int(r.lowerBound)..<Int(r.upperBound)]) } }
            if !ok { return false }
            at += n
        }
        return true
    }

    @Test
    func theSameBytesAtEveryHeldRangeAreTheSameFile() throws {
        var c = try #require(check([ByteRange(0, 30), ByteRange(50, 60)]))
        #expect(c.end == 60)
        #expect(feed(&c, file, chunk: 7))
        // Bytes between held ranges wait, to be written once the file is proven the same.
        #expect(c.gaps.map { $0.offset }.first == 30 && c.gaps.reduce(0) { $0 + $1.bytes.count } == 20)
        #expect(c.gaps.flatMap { $0.bytes } == Array(file[30..<50]))
    }

    @Test
    func oneDifferingHeldByteIsAnotherVersion() throws {
        var other = file
        other[55] ^= 1
        var c = try #require(check([ByteRange(0, 30), ByteRange(50, 60)]))
        #expect(!feed(&c, other, chunk: 16))
        // A differing byte outside what is held is not compared: the held bytes are the new file's.
        other = file
        other[40] ^= 1
        var d = try #require(check([ByteRange(0, 30), ByteRange(50, 60)]))
        #expect(feed(&d, other, chunk: 16))
    }

    @Test
    func anotherLengthOrTooMuchBetweenHeldRangesIsNoCheck() {
        #expect(check([ByteRange(0, 30)], answer: Validators(length: 101, etag: "\"b\"", lastModified: nil)) == nil)
        #expect(check([]) == nil)
        #expect(SameBytesCheck(held: RangeSet([ByteRange(0, 1), ByteRange(SameBytesCheck.maxGapBytes + 2, SameBytesCheck.maxGapBytes + 3)]),
                               old: Validators(length: 1 << 30, etag: nil, lastModified: nil), answer: Validators(length: 1 << 30, etag: "x", lastModified: nil),
                               contentType: nil, reason: "r") == nil)
    }

    @Test
    func manifestsAreComparedUnderTheKeyRules() {
        let rules = CacheKeyRules(stripParameters: ["token"])
        let a = Array("<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"><Period><SegmentTemplate media=\"c$Number$.m4s?token=1\" duration=\"2\"/></Period></MPD>".utf8)
        let b = Array("<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"><Period><SegmentTemplate duration=\"2\" media=\"c$Number$.m4s?token=2\"/></Period></MPD>".utf8)
        let c = Array("<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"><Period><SegmentTemplate media=\"c$Number$.m4s?token=2\" duration=\"3\"/></Period></MPD>".utf8)
        #expect(ManifestRevalidation.sameUnderKeyRules(a, b, mpd: true, rules: rules))
        #expect(!ManifestRevalidation.sameUnderKeyRules(a, b, mpd: true, rules: CacheKeyRules()))  // the token is a name then
        #expect(!ManifestRevalidation.sameUnderKeyRules(a, c, mpd: true, rules: rules))  // another duration
        let p = Array("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4?token=1\"\n#EXTINF:2,\ns0.m4s?token=1\n".utf8)
        let q = Array("#EXTM3U\r\n#EXT-X-MAP:URI=\"i.mp4?token=2\"\r\n#EXTINF:2,\r\ns0.m4s?token=2\r\n".utf8)
        let r = Array("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4?token=2\"\n#EXTINF:2.5,\ns0.m4s?token=2\n".utf8)
        let s = Array("#EXTM3U\n# a comment\n#EXT-X-MAP:URI=\"i.mp4?token=2\"\n#EXTINF:2,\ns0.m4s?token=2\n".utf8)
        #expect(ManifestRevalidation.sameUnderKeyRules(p, q, mpd: false, rules: rules))
        #expect(!ManifestRevalidation.sameUnderKeyRules(p, r, mpd: false, rules: rules))
        #expect(ManifestRevalidation.sameUnderKeyRules(p, s, mpd: false, rules: rules))  // a comment: HLSPlaylistSameStreamTests
    }
}
