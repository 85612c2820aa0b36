import Foundation
import Synchronization
import Testing
import VCacheCore
import VCacheTestSupport

/// What an origin cannot make serve do with playlists: hold an endless or huge one in memory, or
/// be asked once per player for a live playlist several players reload at once.
@Suite struct HLSServeLimitsTests {
    let dir = TempDirectory("vcache-hlslimits")
    static let mpegurl = "application/vnd.apple.mpegurl"

    /// A "playlist" of `bytes`: #EXTM3U, then comment lines.
    static func huge(_ bytes: Int) -> Data {
        var d = Data("#EXTM3U\n#EXT-X-TARGETDURATION:2\n".utf8)
        let line = Data(("#" + String(repeating: "x", count: 1022) + "\n").utf8)
        while d.count < bytes { d.append(line) }
        return d
    }

    @Test
    func aPlaylistOverTheLimitIsAnswered502WithTheReasonLogged() throws {
        let origin = try TestOrigin()
        let big = Self.huge(HLSPlaylist.maxBytes + (1 << 20))
        origin.setResource("/big/index.m3u8", .init(body: big, contentType: Self.mpegurl))
        // Without a length, sent chunked: nothing says how long it is until it ends.
        origin.setResource("/chunked/index.m3u8", .init(body: big, contentType: Self.mpegurl))
        var chunked = TestOrigin.Faults()
        chunked.chunkedWithoutLength = true
        origin.setFaults("/chunked/index.m3u8", chunked)
        // Named as any file: known as a playlist by its Content-Type alone.
        origin.setResource("/big/list", .init(body: big, contentType: Self.mpegurl))
        // A small one sent the same way plays (a dynamic packager's live playlist is often chunked).
        origin.setResource("/small/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["s0.ts"], live: true), contentType: Self.mpegurl))
        origin.setFaults("/small/index.m3u8", chunked)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let small = try Curl.fetch([serve.url(origin.url("/small/index.m3u8"))], in: dir)
        #expect(small.status == 200 && String(decoding: small.body, as: UTF8.self).contains(serve.base + "/v/"), "\(small.status)")
        for path in ["/big/index.m3u8", "/chunked/index.m3u8", "/big/list"] {
            let r = try Curl.fetch([serve.url(origin.url(path))], in: dir)
            #expect(r.status == 502 && r.body.count < 4096, "\(path): \(r.status), \(r.body.count) bytes")
        }
        serve.stop()
        let lines = serve.log.filter { $0.contains("/big/") }
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains(" 502 ") && $0.contains("larger than the 8.0 MiB vcache reads as one") }, "\(lines)")
        // Sent chunked, it is known as a playlist though no length came with its head, and refused
        // for its size, not for the length it did not say.
        #expect(serve.log.filter { $0.contains("/chunked/") && $0.contains(" 502 ") && $0.contains("larger than the 8.0 MiB") }.count == 1, "\(serve.log)")
        // prefetch refuses it the same way, with the same limit.
        let p = try VCacheBinary.run(["prefetch", origin.url("/big/index.m3u8")], cacheDir: dir.file("p"))
        #expect(p.status == 4 && p.stderr.contains("larger than the 8.0 MiB"), "\(p.stderr)")
    }

    /// A playlist sent chunked and longer than the head serve stores first (64 KiB) plays: a
    /// playlist needs no length (it is read whole, up to its limit), a video served by ranges does.
    @Test
    func aLongPlaylistSentChunkedPlays() throws {
        let origin = try TestOrigin()
        let names = (0..<6000).map { "segment-\($0).ts" }
        let body = HLSHostileOriginTests.playlist(names, live: true)
        #expect(body.count > 64 << 10)
        origin.setResource("/long/index.m3u8", .init(body: body, contentType: Self.mpegurl))
        var chunked = TestOrigin.Faults()
        chunked.chunkedWithoutLength = true
        origin.setFaults("/long/index.m3u8", chunked)
        let serve = try ServeProcess(cacheDir: dir.file("long"), logDir: dir)
        let r = try Curl.fetch([serve.url(origin.url("/long/index.m3u8"))], in: dir)
        #expect(r.status == 200, "\(r.status): \(serve.log)")
        let uris = String(decoding: r.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(uris.count == names.count && uris.allSatisfy { $0.hasPrefix(serve.base + "/v/") }, "\(uris.count) URI lines")
        serve.stop()
    }

    /// Players reloading a live playlist at the same moment share one origin request.
    @Test
    func concurrentPlayersShareOneFetchOfALivePlaylist() throws {
        let origin = try TestOrigin()
        var s = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:60\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for n in 0..<3 { s += "#EXTINF:60.0,\ns\(n).ts\n" }
        origin.setResource("/m/index.m3u8", .init(body: Data(s.utf8), contentType: Self.mpegurl))
        var slow = TestOrigin.Faults()
        slow.bytesPerSecond = 400  // about a second for the playlist: the players' fetches overlap
        origin.setFaults("/m/index.m3u8", slow)
        let serve = try ServeProcess(cacheDir: dir.file("live"), logDir: dir)
        let url = serve.url(origin.url("/m/index.m3u8"))
        let players = 6
        let statuses = Locked<[Int]>([])
        // A thread per player (concurrentPerform would run only as many as there are cores).
        let done = DispatchGroup()
        for _ in 0..<players {
            done.enter()
            Thread { [dir] in
                let r = try? Curl.fetch([url], in: dir)
                statuses.withLock { $0.append(r?.status ?? 0) }
                done.leave()
            }.start()
        }
        done.wait()
        #expect(statuses.withLock { $0 } == Array(repeating: 200, count: players))
        // One request opened it (its head, 64 KiB: the whole playlist), one fetched it fresh.
        #expect(origin.requests("/m/index.m3u8").count <= 2, "\(origin.requests("/m/index.m3u8").count) origin requests for \(players) players")
        serve.stop()
    }
}
