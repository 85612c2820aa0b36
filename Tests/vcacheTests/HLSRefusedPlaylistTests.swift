import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A playlist prefetch or serve refuses is not kept as a plain cached entry (Docs/hls.md).
@Suite struct HLSRefusedPlaylistTests {
    let dir = TempDirectory("vcache-hlsrefused")
    static let type = "application/vnd.apple.mpegurl"

    /// A media playlist of `count` segments (about 30 bytes a line).
    static func playlist(_ count: Int) -> Data {
        var s = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n"
        for i in 0..<count { s += "#EXTINF:2.0,\nseg_\(String(format: "%08d", i)).ts\n" }
        return Data((s + "#EXT-X-ENDLIST\n").utf8)
    }

    /// Too big to read as one, not one vcache parses, or asked with --bytes: the item fails and
    /// nothing of the playlist stays in the cache.
    @Test func aPlaylistPrefetchRefusesIsNotKept() throws {
        let origin = try TestOrigin()
        origin.setResource("/huge.m3u8", .init(body: Self.playlist(300_000), contentType: Self.type))
        origin.setResource("/broken.m3u8", .init(body: Data("#EXTM3U\n#EXTINF:abc,\nseg.ts\n#EXT-X-ENDLIST\n".utf8), contentType: Self.type))
        origin.setResource("/fine.m3u8", .init(body: Self.playlist(2), contentType: Self.type))
        let cache = dir.file("cache")
        for (path, args, why) in [("/huge.m3u8", [String](), "larger than the 8.0 MiB vcache reads as one"),
                                  ("/broken.m3u8", [], "not a playlist vcache can read"),
                                  ("/fine.m3u8", ["--bytes", "1K"], "--bytes does not apply to a stream")] {
            let r = try VCacheBinary.run(["prefetch", "-q", origin.url(path)] + args, cacheDir: cache)
            #expect(r.status == 4 && r.stderr.contains(why), "\(path): \(r.stderr)")
            #expect(try CacheInspector(directory: cache).entry(origin.url(path)) == nil, "\(path) was kept")
        }
        #expect(try CacheInspector(directory: cache).store.catalog.allEntries().isEmpty)
    }

    /// serve opened a playlist too big to hold as one (its first bytes stored, as any video's),
    /// then the origin failed the playlist's own fetch: the error is passed on and the head is
    /// not kept (a playlist is answered only from a copy cached whole; serve refusing one as too
    /// big leaves no head either).
    @Test func aPlaylistServeDoesNotAnswerLeavesNoHeadBehind() throws {
        let origin = try TestOrigin()
        origin.setResource("/big.m3u8", .init(body: Self.playlist(300_000), contentType: Self.type))
        var faults = TestOrigin.Faults()
        faults.statuses = [(0, [:]), (404, [:])]
        origin.setFaults("/big.m3u8", faults)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let r = try Curl.fetch([serve.url(origin.url("/big.m3u8"))], in: dir)
        serve.stop()
        #expect(r.status == 404, "\(serve.log)")
        #expect(origin.requests("/big.m3u8").count == 2, "\(origin.requests("/big.m3u8"))")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/big.m3u8")) == nil, "\(serve.log)")
    }
}
