import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// HLS shares the DASH rule (Docs/hls.md, "A partly cached stream"): a partial stream's cached
/// master playlist is asked for again before the run completes it; a changed one replaces it and
/// what the old one named goes. Served by TestOrigin.
@Suite struct HLSRevalidationTests {
    let dir = TempDirectory("vcache-hlsreval")

    /// A master naming one variant `v.m3u8` of `resolution`, and that VOD playlist of four 2 s
    /// segments, each `seed`'s own MPEG-TS bytes. Returns each segment path's bytes.
    @discardableResult
    static func encode(_ origin: TestOrigin, seed: UInt64, resolution: String) -> [String: Data] {
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=\(resolution)\nv.m3u8\n"
        origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"\(resolution)\"", contentType: "application/vnd.apple.mpegurl"))
        var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        var out: [String: Data] = [:]
        for n in 0..<4 {
            media += "#EXTINF:2.0,\n\(n).ts\n"
            out["/h/\(n).ts"] = HLSHostileOriginTests.ts(20, seed: seed &+ UInt64(n))
            origin.setResource("/h/\(n).ts", .init(body: out["/h/\(n).ts"]!, etag: "\"\(seed)-\(n)\"", contentType: "video/mp2t"))
        }
        media += "#EXT-X-ENDLIST\n"
        origin.setResource("/h/v.m3u8", .init(body: Data(media.utf8), etag: "\"v\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
        return out
    }

    @Test
    func aMasterReEncodedInPlaceIsCompletedFromTheNewPlaylistsOnly() throws {
        let origin = try TestOrigin()
        Self.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = Self.encode(origin, seed: 50, resolution: "640x360")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest changed on the origin since the stream was partly cached: the stream is completed from the new one; the 2 entries cached from the old one were dropped\n"), "\(r.stderr)")
        // (The first run asked for the master again at its end: Docs/hls.md.)
        #expect(origin.headers("/h/master.m3u8").dropFirst(2).first?["if-none-match"] == "\"320x180\"")
        let store = try CacheStore(directory: cache, readOnly: true)
        for (path, body) in new {
            let e = try #require(try CacheInspector(directory: cache).entry(origin.url(path)))
            #expect(store.cachedBytes(of: e, at: 0, count: try #require(e.length)).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(body), "\(path)")
        }
        // Complete: a rerun asks for nothing.
        let before = origin.requests("/h/master.m3u8").count
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(origin.requests("/h/master.m3u8").count == before)
    }
}
