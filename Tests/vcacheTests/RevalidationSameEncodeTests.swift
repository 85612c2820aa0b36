import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A partly cached stream's manifest asked for again as a run begins, and a new choice's, are
/// judged by the end check's rule (`ManifestRevalidation.judged`, hostile probe h9d, F12): a
/// signed-URL CDN's tokens new on every answer (stripped by the cache's key rules: the user's
/// word for which parameters are tokens, h10a), a just-in-time packager's `publishTime`, are no
/// re-encode, so a head warmed with `--seconds` is kept, not dropped and fetched again each run.
/// And the question is asked again under `--retries` like any request (F7). Served by TestOrigin.
@Suite struct RevalidationSameEncodeTests {
    let dir = TempDirectory("vcache-samencode")
    typealias R = DASHRevalidationTests

    /// The test MPD with `?token=` on every member URL and a `publishTime`.
    static func stamped(token: String, time: String) -> Data {
        var text = String(decoding: R.mpd(width: 320, query: "?token=\(token)"), as: UTF8.self)
        text = text.replacingOccurrences(of: "type=\"static\"", with: "type=\"static\" publishTime=\"\(time)\"")
        return Data(text.utf8)
    }

    @Test
    func aPartialStreamsMPDWithNewTokensOrPublishTimeKeepsWhatIsCached() throws {
        for (token, time) in [("bbb", "2026-01-01T00:00:00Z"), ("aaa", "2026-01-01T00:00:09Z")] {
            let origin = try TestOrigin()
            let encode = R.encode(origin, seed: 1)
            origin.setResource("/s/manifest.mpd", .init(body: Self.stamped(token: "aaa", time: "2026-01-01T00:00:00Z"), etag: "\"m1\"", contentType: R.dashXML))
            let cache = dir.file("c-\(token)")
            let url = origin.url("/s/manifest.mpd")
            #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
            #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
            #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
            // The next answer: other tokens, or another publishTime, under a new ETag.
            origin.setResource("/s/manifest.mpd", .init(body: Self.stamped(token: token, time: time), etag: "\"m2\"", contentType: R.dashXML))
            let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(r.status == 0, "\(token) \(time): \(r.stderr)")
            #expect(!r.stderr.contains("note:"), "\(r.stderr)")
            // The head cached by the first run is not fetched again, nor asked (no member is
            // probed); the stream is complete.
            #expect(origin.requests("/s/v/0.m4s").count == 1, "\(token) \(time)")
            #expect(origin.requests("/s/v/init.mp4").count == 1, "\(token) \(time)")
            #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
            // Keyed without the token (the key rules strip it).
            #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
            #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status == 0)
        }
    }

    /// A partial master stream whose media playlist is signed anew on each answer, the token
    /// stripped by the cache's key rules: the playlist asked for with the master stands, what it
    /// named stays.
    @Test
    func aPartialHLSStreamsMediaPlaylistWithNewTokensKeepsWhatIsCached() throws {
        let origin = try TestOrigin()
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\nv.m3u8\n"
        origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"ma\"", contentType: "application/vnd.apple.mpegurl"))
        func media(_ token: String) -> Data {
            var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            for n in 0..<4 { text += "#EXTINF:2.0,\n\(n).ts?token=\(token)\n" }
            return Data((text + "#EXT-X-ENDLIST\n").utf8)
        }
        for n in 0..<4 {
            origin.setResource("/h/\(n).ts", .init(body: HLSHostileOriginTests.ts(20, seed: UInt64(n)), etag: "\"s\(n)\"", contentType: "video/mp2t"))
        }
        origin.setResource("/h/v.m3u8", .init(body: media("aaa"), etag: "\"va\"", contentType: "application/vnd.apple.mpegurl"))
        let cache = dir.file("h")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        origin.setResource("/h/v.m3u8", .init(body: media("bbb"), etag: "\"vb\"", contentType: "application/vnd.apple.mpegurl"))
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("note:"), "\(r.stderr)")
        #expect(origin.requests("/h/0.ts").count == 1)
        #expect(try StreamChangedDuringRunTests.hlsState(cache) == "complete")
    }

    /// The MPD of a partly cached stream answered 503 once as the run begins (h9d F7): asked
    /// again after the backoff, as any request; the 304 then lets the run complete the stream.
    /// With `--retries 0` the one 503 fails the item as before.
    @Test
    func aPartialStreamsMPDAnswered503OnceIsAskedAgainUnderRetries() throws {
        let origin = try TestOrigin()
        let encode = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let before = origin.requests("/s/manifest.mpd").count
        origin.setFaults("/s/manifest.mpd", StreamChangedDuringRunTests.statuses([(503, [:])]))
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        // The 503, the 304 after it, and the end check.
        #expect(origin.requests("/s/manifest.mpd").count == before + 3)
        #expect(origin.requests("/s/v/0.m4s").count == 1)
        try StreamRaceTests.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)
    }
}
