import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A stream member's bytes are judged where they are about to be kept (Docs/dash.md, "Each
/// segment is checked"): a segment whose boxes run past the bytes its Content-Length allowed,
/// an MPD byte range that does not start on a box, a member found cached as something else, an
/// MPD naming itself as its own segment. Served by the in-process TestOrigin.
@Suite struct DASHMemberCheckTests {
    let dir = TempDirectory("vcache-dashmember")
    static let dashXML = "application/dash+xml"
    static func box(_ type: String, _ size: Int, fill: UInt8 = 0) -> Data { DASHHostileOriginTests.box(type, size, fill: fill) }

    func entry(_ cache: String, _ url: String) throws -> CacheEntry? { try CacheInspector(directory: cache).entry(url) }

    /// Probe D1: the origin says `Content-Length: 500` for a 700-byte segment (and sends 500): its
    /// `mdat` runs past them. Refused, nothing of it kept, exit 4; `verify` clean, the member
    /// not complete, the stream partial. The same cut with a valid first box and noise after it.
    @Test
    func aSegmentWhoseBoxesRunPastItsLengthIsNotKept() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        let whole = Self.box("moof", 300, fill: 11) + Self.box("mdat", 400, fill: 12)
        origin.setResource("/s/v/1.m4s", .init(body: whole.prefix(500), contentType: "video/iso.segment"))
        origin.setResource("/s/manifest.mpd", .init(body: DASHHostileOriginTests.mpd(video: "v/"), contentType: Self.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd"), segment = origin.url("/s/v/1.m4s")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(segment): origin's answer for a DASH segment is not a whole one: box 'mdat' at offset 300 ends at 700, past its 500 bytes (a Content-Length shorter than the segment?); nothing of it was kept\n"), "\(r.stderr)")
        #expect(try entry(cache, segment)?.isComplete != true)
        #expect(try entry(cache, segment)?.ranges.isEmpty ?? true)
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        // The other segments are kept, byte for byte.
        #expect(try entry(cache, origin.url("/s/v/0.m4s"))?.sha256 == TestBytes.sha256(Self.box("moof", 300, fill: 11)))

        // A valid 16-byte styp, then bytes of nothing: refused the same way.
        var noise = Self.box("styp", 16)
        noise.append(Data((0..<684).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 201) }))
        origin.setResource("/s/v/1.m4s", .init(body: noise, contentType: "video/iso.segment"))
        let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(again.status == 4, "\(again.stderr)")
        #expect(again.stderr.contains("vcache: cannot prefetch \(segment): origin's answer for a DASH segment is not a whole one:"), "\(again.stderr)")
        #expect(try entry(cache, segment)?.isComplete != true)

        // Whole at last: kept, and the stream complete.
        origin.setResource("/s/v/1.m4s", .init(body: whole, contentType: "video/iso.segment"))
        let fixed = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(try entry(cache, segment)?.sha256 == TestBytes.sha256(whole))
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    /// D1 for HLS: an fMP4 segment cut by its Content-Length is refused the same way; an
    /// MPEG-TS segment is not walked.
    @Test
    func anHLSFragmentedSegmentWhoseBoxesRunPastItsLengthIsNotKept() throws {
        let origin = try TestOrigin()
        origin.setResource("/h/init.mp4", .init(body: Self.box("ftyp", 24, fill: 1) + Self.box("moov", 40, fill: 2)))
        let whole = Self.box("moof", 300, fill: 3) + Self.box("mdat", 400, fill: 4)
        origin.setResource("/h/0.m4s", .init(body: whole, contentType: "video/iso.segment"))
        origin.setResource("/h/1.m4s", .init(body: whole.prefix(500), contentType: "video/iso.segment"))
        let playlist = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2.0,\n0.m4s\n#EXTINF:2.0,\n1.m4s\n#EXT-X-ENDLIST\n"
        origin.setResource("/h/index.m3u8", .init(body: Data(playlist.utf8), contentType: "application/vnd.apple.mpegurl"))
        let cache = dir.file("h")
        let r = try VCacheBinary.run(["prefetch", origin.url("/h/index.m3u8")], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(origin.url("/h/1.m4s")): origin's answer for an HLS segment is not a whole one: box 'mdat' at offset 300 ends at 700, past its 500 bytes (a Content-Length shorter than the segment?); nothing of it was kept\n"), "\(r.stderr)")
        #expect(try entry(cache, origin.url("/h/1.m4s"))?.isComplete != true)
        #expect(try entry(cache, origin.url("/h/0.m4s"))?.sha256 == TestBytes.sha256(whole))
    }

    /// A SegmentList over one file: ftyp+moov (0-63), then two segments of moof+mdat (64-363,
    /// 364-663). `shift` moves every mediaRange's start (the last still ends at the file's end).
    static func segmentListMPD(shift: Int) -> Data {
        Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.42c00d">
                <BaseURL>v.mp4</BaseURL>
                <SegmentList timescale="1" duration="2">
                  <Initialization range="0-63"/>
                  <SegmentURL mediaRange="\(64 + shift)-\(363 + shift)"/>
                  <SegmentURL mediaRange="\(364 + shift)-663"/>
                </SegmentList>
              </Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    static let segmentListFile = box("ftyp", 24, fill: 1) + box("moov", 40, fill: 2)
        + box("moof", 100, fill: 3) + box("mdat", 200, fill: 4) + box("moof", 100, fill: 5) + box("mdat", 200, fill: 6)

    /// Probe D10 (a): mediaRanges shifted by 5 bytes, inside the file: the first piece does not
    /// start on a box. The item fails, naming the range and what is there; nothing of the file is
    /// kept. The same MPD with the right ranges is cached whole.
    @Test
    func aMediaRangeThatDoesNotStartOnABoxIsRefused() throws {
        let origin = try TestOrigin()
        origin.setResource("/l/v.mp4", .init(body: Self.segmentListFile, etag: "\"f1\""))
        origin.setResource("/l/bad.mpd", .init(body: Self.segmentListMPD(shift: 5), contentType: Self.dashXML))
        origin.setResource("/l/good.mpd", .init(body: Self.segmentListMPD(shift: 0), contentType: Self.dashXML))
        let cache = dir.file("l"), file = origin.url("/l/v.mp4")
        let r = try VCacheBinary.run(["prefetch", origin.url("/l/bad.mpd")], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(file): its MPD's byte range 69-368 does not start with a segment's box: its first bytes 'oof.....' are not a box header (styp, sidx, moof, emsg, prft, mdat...); fix the MPD's mediaRange; nothing of it was kept\n"), "\(r.stderr)")
        #expect(try entry(cache, file)?.ranges.isEmpty ?? true)
        let export = try VCacheBinary.run(["export", origin.url("/l/bad.mpd"), dir.file("out")], cacheDir: cache)
        #expect(export.status != 0, "\(export.stdout)")

        let good = try VCacheBinary.run(["prefetch", "-q", origin.url("/l/good.mpd")], cacheDir: cache)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(try entry(cache, file)?.sha256 == TestBytes.sha256(Self.segmentListFile))
    }

    /// Probe D7 (a): an error page answered 200 under a segment's URL, cached as a plain entry
    /// before the stream named it, is judged when the stream takes it: dropped and fetched again.
    /// While the origin still answers the page, the member fails as one fetched now would.
    @Test
    func aCachedErrorPageIsNotAdoptedAsASegment() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        let page = Data("<html><body>Service temporarily unavailable, try again later</body></html>".utf8)
        origin.setResource("/s/v/1.m4s", .init(body: page, etag: "\"p\"", contentType: "video/mp4"))
        origin.setResource("/s/manifest.mpd", .init(body: DASHHostileOriginTests.mpd(video: "v/"), contentType: Self.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd"), segment = origin.url("/s/v/1.m4s")
        let plain = try VCacheBinary.run(["prefetch", "-q", segment], cacheDir: cache)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(try entry(cache, segment)?.isComplete == true)

        // Still the page: the stream's run refuses it, and keeps none of it.
        let refused = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(refused.status == 4, "\(refused.stderr)")
        #expect(refused.stderr.contains("vcache: cannot prefetch \(segment): origin's answer for a DASH segment is not one: its first bytes '<html><body>Serv' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT; nothing of it was kept\n"), "\(refused.stderr)")
        #expect(try entry(cache, segment)?.isComplete != true)
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")

        // Cached as a plain entry again, then the origin is healthy: fetched again, the real bytes.
        let plainAgain = try VCacheBinary.run(["prefetch", "-q", segment], cacheDir: cache)
        #expect(plainAgain.status == 0, "\(plainAgain.stderr)")
        let real = Self.box("moof", 300, fill: 11)
        origin.setResource("/s/v/1.m4s", .init(body: real, etag: "\"r\"", contentType: "video/iso.segment"))
        let healed = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(healed.status == 0, "\(healed.stderr)")
        #expect(healed.stderr.contains("its cached bytes are not this stream member: origin's answer for a DASH segment is not one"), "\(healed.stderr)")
        #expect(try entry(cache, segment)?.sha256 == TestBytes.sha256(real))
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    /// Probe D7 (b): an MPD that names its own URL as its init section (or a segment) is refused,
    /// not cached as video. HLS: a media playlist naming itself as a segment, the same.
    @Test
    func aManifestNamingItselfAsAMemberIsRefused() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: DASHHostileOriginTests.mpd(video: "v/", videoInit: "manifest.mpd"), contentType: Self.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): the MPD names itself as an init section: refused; fix the MPD\n"), "\(r.stderr)")
        #expect(origin.requests("/s/v/0.m4s").isEmpty)

        origin.setResource("/h/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts", "index.m3u8"]), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/h/seg0.ts", .init(body: HLSHostileOriginTests.ts(20, seed: 5), contentType: "video/mp2t"))
        let hls = try VCacheBinary.run(["prefetch", origin.url("/h/index.m3u8")], cacheDir: dir.file("h"))
        #expect(hls.status == 4, "\(hls.stderr)")
        #expect(hls.stderr.contains("vcache: cannot prefetch \(origin.url("/h/index.m3u8")): a media playlist that names itself as a segment: refused; fix the playlist\n"), "\(hls.stderr)")
    }
}
