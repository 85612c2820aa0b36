import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 32, "False claims": a playlist whose EXT-X-BYTERANGE runs past its segment's end. The
/// range was clamped to the length, so prefetch said "nothing to fetch" on every later run while
/// the stream could never be whole. The item fails (exit 4), naming the segment, the range and
/// the length, on every run.
@Suite struct HLSByteRangeOverrunTests {
    let dir = TempDirectory("vcache-hlsoverrun")
    var cache: String { dir.file("cache") }

    @Test func aByteRangeOneBytePastItsSegmentFailsEveryRunWithExit4() throws {
        let origin = try TestOrigin()
        let segment = HLSHostileOriginTests.ts(20, seed: 3202)  // 3760 bytes
        var text = "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        text += "#EXTINF:2.0,\n#EXT-X-BYTERANGE:3761@0\nall.ts\n#EXT-X-ENDLIST\n"
        origin.setResource("/r/index.m3u8", .init(body: Data(text.utf8), etag: "\"p\"", contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/r/all.ts", .init(body: segment, etag: "\"s\"", contentType: "video/mp2t"))
        let url = origin.url("/r/index.m3u8"), member = origin.url("/r/all.ts")
        let line = "vcache: cannot prefetch \(member): its playlist's EXT-X-BYTERANGE asks for bytes 0-3760, which overruns the resource (3760 bytes): no fetch can fill that range; fix the playlist"
        for run in 1...2 {
            let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(r.status == 4, "run \(run): \(r.stdout)\(r.stderr)")
            let said = r.stderr.split(separator: "\n").compactMap { l in l.range(of: "vcache: ").map { String(l[$0.lowerBound...]) } }
            #expect(said.filter { $0.contains(member) } == [line], "run \(run): \(r.stderr)")
            #expect(!r.stdout.contains("nothing to fetch") && !r.stderr.contains("nothing to fetch"), "run \(run): \(r.stdout)")
        }
        // The bytes that are there are the segment's own; none is claimed past its end.
        let entry = try CacheInspector(directory: cache).entry(member)
        #expect(entry?.length == 3760 && entry?.isComplete != true)
        #expect(try CacheInspector(directory: cache).verifyClaims(member, origin: segment).mismatch == nil)
        let json = try VCacheBinary.run(["prefetch", "--json", url], cacheDir: cache)
        #expect(json.status == 4)
        #expect(json.stdout.contains("\"kind\":\"bad_stream\""), "\(json.stdout)")
        // A byte range that does fit is fetched as before (the same segment, a right playlist).
        let right = origin.url("/r/right.m3u8")
        origin.setResource("/r/right.m3u8", .init(body: Data(text.replacingOccurrences(of: "3761@0", with: "3760@0").utf8), etag: "\"p2\"", contentType: "application/vnd.apple.mpegurl"))
        let fixed = try VCacheBinary.run(["prefetch", right], cacheDir: cache)
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(try VCacheBinary.run(["check", right], cacheDir: cache).status == 0)
        #expect(try CacheInspector(directory: cache).entry(member)?.isComplete == true)
    }
}
