import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Found by playing streams through serve as a hostile origin serves them: a playlist signed
/// anew on every request, segments sent chunked with no length.
@Suite struct HLSServeHostileTests {
    let dir = TempDirectory("vcache-hlsservehostile")
    static let mpegurl = "application/vnd.apple.mpegurl"

    /// The rewritten playlist at `url`: its status, and the SHA-256 of what each URI line answers.
    func play(_ url: String) throws -> (status: Int, text: String, segments: [String]) {
        let answer = try Curl.fetch([url], in: dir)
        let text = String(decoding: answer.body, as: UTF8.self)
        guard answer.status == 200 else { return (answer.status, text, []) }
        let segments = try text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { line in
            let r = try Curl.fetch([String(line)], in: dir)
            return r.status == 200 ? TestBytes.sha256(r.body) : "status \(r.status)"
        }
        return (200, text, segments)
    }

    /// `play` with the origin stopped and its port refusing: the stream from the cache alone.
    func playOffline(_ url: String, after origin: TestOrigin) throws -> (status: Int, text: String, segments: [String]) {
        origin.stop()
        let refused = RefusingPort(origin.port)
        defer { withExtendedLifetime(refused) {} }
        return try play(url)
    }

    /// A CDN that signs every playlist answer anew (`seg0.ts?token=N`, N changing per request),
    /// with the key rule the docs name for it: a warmed stream played once online still plays
    /// offline, and nothing of it is fetched again. (Serve took the new tokens for a changed
    /// stream: it dropped every segment and the playlist, stored no playlist again, and offline
    /// answered 502.)
    @Test
    func aPlaylistSignedAnewOnEveryRequestKeepsItsWarmedStream() throws {
        let origin = try TestOrigin()
        let s0 = HLSHostileOriginTests.ts(300, seed: 41), s1 = HLSHostileOriginTests.ts(400, seed: 42)
        origin.setResource("/t/seg0.ts", .init(body: s0, contentType: "video/mp2t"))
        origin.setResource("/t/seg1.ts", .init(body: s1, contentType: "video/mp2t"))
        func sign(_ token: Int) {
            var text = String(decoding: HLSHostileOriginTests.playlist(["seg0.ts?token=\(token)", "seg1.ts?token=\(token)"]), as: UTF8.self)
            text += "## generated for session \(token)\n"
            origin.setResource("/t/index.m3u8", .init(body: Data(text.utf8), contentType: Self.mpegurl))
        }
        sign(1)
        let cache = dir.file("cache"), url = origin.url("/t/index.m3u8")
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        let warm = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(warm.status == 0, "\(warm.stderr)")
        let fetched = origin.servedBytes("/t/seg0.ts") + origin.servedBytes("/t/seg1.ts")
        #expect(fetched == s0.count + s1.count)

        sign(2)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let online = try play(serve.url(url))
        #expect(online.status == 200 && online.segments == [s0, s1].map(TestBytes.sha256), "\(online)")
        // Same stream, other tokens: nothing fetched again.
        #expect(origin.servedBytes("/t/seg0.ts") + origin.servedBytes("/t/seg1.ts") == fetched)

        let offline = try playOffline(serve.url(url), after: origin)
        #expect(offline.status == 200 && offline.segments == [s0, s1].map(TestBytes.sha256), "\(offline)")
        serve.stop()
    }

    /// A VOD stream re-made under the same names: its members are dropped (as before), and the
    /// cached copy of the playlist is the new one, so offline the stream plays as it is now.
    @Test
    func aChangedStreamPlaysOfflineAsTheOriginServesItNow() throws {
        let origin = try TestOrigin()
        func playlist(_ ranges: [(Int, Int)]) -> Data {
            var s = "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            for (n, o) in ranges { s += "#EXTINF:2.0,\n#EXT-X-BYTERANGE:\(n)@\(o)\nall.ts\n" }
            return Data((s + "#EXT-X-ENDLIST\n").utf8)
        }
        let v1 = HLSHostileOriginTests.ts(20, seed: 51), v2 = HLSHostileOriginTests.ts(30, seed: 52)
        origin.setResource("/c/index.m3u8", .init(body: playlist([(1880, 0), (1880, 1880)]), etag: "\"p1\"", contentType: Self.mpegurl))
        origin.setResource("/c/all.ts", .init(body: v1, etag: "\"a1\"", contentType: "video/mp2t"))
        let cache = dir.file("changed"), url = origin.url("/c/index.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        origin.setResource("/c/index.m3u8", .init(body: playlist([(1880, 0), (3760, 1880)]), etag: "\"p2\"", contentType: Self.mpegurl))
        origin.setResource("/c/all.ts", .init(body: v2, etag: "\"a2\"", contentType: "video/mp2t"))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let fresh = try Curl.fetch([serve.url(url)], in: dir)
        #expect(String(decoding: fresh.body, as: UTF8.self).contains("3760@1880"))
        #expect(try Curl.fetch(["-r", "0-5639", serve.url(origin.url("/c/all.ts"))], in: dir).body == v2)
        #expect(serve.confirmed())

        origin.stop()
        let refused = RefusingPort(origin.port)
        defer { withExtendedLifetime(refused) {} }
        let offline = try Curl.fetch([serve.url(url)], in: dir)
        #expect(offline.status == 200 && String(decoding: offline.body, as: UTF8.self).contains("3760@1880"), "\(offline.status)")
        let second = try Curl.fetch(["-r", "1880-5639", serve.url(origin.url("/c/all.ts"))], in: dir)
        #expect(second.status == 206 && second.body == v2[1880..<5640], "\(second.status)")
        serve.stop()
    }

    /// Segments, an init section and a key sent chunked with no length (a packager, some CDNs),
    /// larger than the 64 KiB head serve first stores: each is fetched whole and served, byte
    /// for byte, online and then offline. (Serve answered 502, "the origin did not say the
    /// video's length", while ffmpeg played the origin directly.)
    @Test
    func membersSentChunkedWithNoLengthPlay() throws {
        let origin = try TestOrigin()
        let s0 = HLSHostileOriginTests.ts(900, seed: 61), s1 = HLSHostileOriginTests.ts(700, seed: 62)  // 169 KB, 132 KB
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        text += "#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\nseg1\n#EXT-X-ENDLIST\n"
        origin.setResource("/k/index.m3u8", .init(body: Data(text.utf8), contentType: Self.mpegurl))
        origin.setResource("/k/seg0.ts", .init(body: s0, contentType: "video/mp2t"))
        origin.setResource("/k/seg1", .init(body: s1, contentType: "application/octet-stream"))
        var chunked = TestOrigin.Faults()
        chunked.chunkedWithoutLength = true
        for path in ["/k/index.m3u8", "/k/seg0.ts", "/k/seg1"] { origin.setFaults(path, chunked) }
        let serve = try ServeProcess(cacheDir: dir.file("chunked"), logDir: dir)
        let url = origin.url("/k/index.m3u8")
        let online = try play(serve.url(url))
        #expect(online.status == 200 && online.segments == [s0, s1].map(TestBytes.sha256), "\(online)")
        // A range of one, as ffmpeg asks for byte-range segments.
        let range = try Curl.fetch(["-r", "1000-1999", serve.url(origin.url("/k/seg0.ts"))], in: dir)
        #expect(range.status == 206 && range.body == s0[1000..<2000], "\(range.status)")
        #expect(serve.confirmed())

        let offline = try playOffline(serve.url(url), after: origin)
        #expect(offline.status == 200 && offline.segments == [s0, s1].map(TestBytes.sha256), "\(offline)")
        serve.stop()
    }

    /// A playlist naming its segments with raw spaces (`seg 0.ts`, written by hand or by a tool
    /// joining folder names): prefetch warms it and serve plays it offline, as ffmpeg plays it
    /// from the origin (it asks for `seg%200.ts`). (prefetch refused the URL, serve answered 400.)
    @Test
    func segmentsNamedWithRawSpacesPlay() throws {
        let origin = try TestOrigin()
        let s0 = HLSHostileOriginTests.ts(50, seed: 71), s1 = HLSHostileOriginTests.ts(60, seed: 72)
        origin.setResource("/sp/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg 0.ts", "my folder/seg 1.ts"]), contentType: Self.mpegurl))
        origin.setResource("/sp/seg%200.ts", .init(body: s0, contentType: "video/mp2t"))
        origin.setResource("/sp/my%20folder/seg%201.ts", .init(body: s1, contentType: "video/mp2t"))
        let cache = dir.file("spaces"), url = origin.url("/sp/index.m3u8")
        let warm = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(warm.status == 0, "\(warm.stderr)")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let offline = try playOffline(serve.url(url), after: origin)
        #expect(offline.status == 200 && offline.segments == [s0, s1].map(TestBytes.sha256), "\(offline)")
        serve.stop()
    }
}
