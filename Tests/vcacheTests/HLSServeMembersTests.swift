import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24, serve's last items: a playlist behind a redirect plays offline (its final URL is
/// kept), a segment whose signed URL expired is fetched under the URL its playlist names now,
/// and an error page answered for a segment is never stored as one.
@Suite struct HLSServeMembersTests {
    let dir = TempDirectory("vcache-hlsmembers")

    static let mpegurl = "application/vnd.apple.mpegurl"

    /// The rewritten playlist's URI lines, each fetched through the proxy: their SHA-256s.
    func fetchEveryURI(of playlist: String) throws -> [String] {
        let answer = try Curl.fetch([playlist], in: dir)
        #expect(answer.status == 200, "\(playlist): \(answer.status)")
        let text = String(decoding: answer.body, as: UTF8.self)
        return try text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { line in
            let r = try Curl.fetch([String(line)], in: dir)
            #expect(r.status == 200, "\(line): \(r.status)")
            return TestBytes.sha256(r.body)
        }
    }

    @Test(.requires(.streamTools))
    func aPlaylistBehindARedirectPlaysOfflineAfterPlayingAndAfterPrefetch() throws {
        let made = dir.file("streams")
        try Fixtures.makeStreams(into: made)
        // /ts/index.m3u8 answers 302 to /moved/ts/index.m3u8, whose segment URIs are relative.
        let origin = try TestOrigin()
        let files = try FileManager.default.contentsOfDirectory(atPath: made + "/ts").sorted()
        var segments: [String] = []
        for name in files {
            let body = try Data(contentsOf: URL(fileURLWithPath: made + "/ts/" + name))
            let playlist = name.hasSuffix(".m3u8")
            // Segments with a validator: serve stores no bytes of an origin that sends none (Docs/serve.md).
            origin.setResource("/moved/ts/" + name, .init(body: body, lastModified: playlist ? nil : "Sat, 01 Jan 2022 00:00:00 GMT",
                                                          contentType: playlist ? Self.mpegurl : "video/mp2t"))
            if name.hasSuffix(".ts") { segments.append(TestBytes.sha256(body)) }
        }
        #expect(segments.count == 2, "\(files)")
        var redirect = TestOrigin.Faults()
        redirect.redirectTo = origin.url("/moved/ts/index.m3u8")
        origin.setFaults("/ts/index.m3u8", redirect)
        let url = origin.url("/ts/index.m3u8")

        // Played through serve online; warmed by prefetch alone (never played) in another cache.
        let played = try ServeProcess(cacheDir: dir.file("played"), logDir: dir)
        let online = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", played.url(url), "-f", "null", "-"])
        #expect(online.status == 0 && online.err.isEmpty, "online: \(online.err)")
        #expect(played.confirmed())
        let prefetch = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: dir.file("warmed"))
        #expect(prefetch.status == 0, "\(prefetch.stderr)")
        // ls and export read the cached playlist against the same URL: both segments are there.
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: dir.file("warmed"))
        let row = ls.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "stream" }
        #expect(row?["segments"] as? Int == 2 && row?["segments_cached"] as? Int == 2 && row?["state"] as? String == "complete", "\(ls.stdout)")
        let export = try VCacheBinary.run(["export", url, dir.file("exported")], cacheDir: dir.file("warmed"))
        #expect(export.status == 0, "\(export.stderr)")

        origin.stop()
        let refused = RefusingPort(origin.port)  // offline: nothing else may answer on that port
        defer { withExtendedLifetime(refused) {} }
        // The exported folder names its segments locally (resolved as the plan was, after the redirect).
        let exported = try String(contentsOfFile: dir.file("exported") + "/master.m3u8", encoding: .utf8)
        #expect(!exported.contains("http"), "\(exported)")
        let local = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", dir.file("exported") + "/master.m3u8", "-f", "null", "-"])
        #expect(local.status == 0 && local.err.isEmpty, "exported: \(local.err)")
        let warmed = try ServeProcess(cacheDir: dir.file("warmed"), logDir: dir)
        for (name, serve) in [("played", played), ("prefetched", warmed)] {
            let offline = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(url), "-f", "null", "-"])
            #expect(offline.status == 0 && offline.err.isEmpty, "\(name), offline: \(offline.err)")
            // Every segment the cached playlist names resolves to the bytes the origin served.
            #expect(try fetchEveryURI(of: serve.url(url)) == segments, "\(name)")
            serve.stop()
        }
    }

    @Test
    func aSegmentWhoseSignedURLExpiredIsFetchedUnderItsNewURL() throws {
        let origin = try TestOrigin()
        let small = HLSHostileOriginTests.ts(20, seed: 3), large = HLSHostileOriginTests.ts(1000, seed: 4)  // 3.7 KB, 188 KB
        // With a validator: serve stores no bytes of an origin that sends none (Docs/serve.md).
        origin.setResource("/s/seg0.ts", .init(body: small, lastModified: "Sat, 01 Jan 2022 00:00:00 GMT", contentType: "video/mp2t"))
        origin.setResource("/s/seg1.ts", .init(body: large, lastModified: "Sat, 01 Jan 2022 00:00:00 GMT", contentType: "video/mp2t"))
        func sign(_ token: Int) {
            origin.setResource("/s/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts?token=\(token)", "seg1.ts?token=\(token)"]),
                                                      contentType: Self.mpegurl))
            var f = TestOrigin.Faults()
            f.requiredQuery = "token=\(token)"
            origin.setFaults("/s/seg0.ts", f)
            origin.setFaults("/s/seg1.ts", f)
        }
        sign(1)
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let playlist = try Curl.fetch([serve.url(origin.url("/s/index.m3u8"))], in: dir)
        let uris = String(decoding: playlist.body, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix(serve.base) }.map(String.init)
        let named = uris.compactMap { ProxyURL.origin(path: String($0.dropFirst(serve.base.count))) }
        #expect(named == [origin.url("/s/seg0.ts?token=1"), origin.url("/s/seg1.ts?token=1")], "\(uris)")
        // The head of seg1 is cached under token 1 (the first 64 KiB): the rest is still the origin's.
        let head = try Curl.fetch(["-r", "0-99", uris[1]], in: dir)
        #expect(head.status == 206 && head.body == large[0..<100])

        // The tokens rotate: token 1 is refused from now on. The player still holds token 1's URLs.
        sign(2)
        let whole = try Curl.fetch([uris[0]], in: dir)
        #expect(whole.status == 200 && TestBytes.sha256(whole.body) == TestBytes.sha256(small), "\(whole.status)")
        #expect(origin.queries("/s/seg0.ts") == ["token=1", "token=2"])
        // A span past the cached head: the job storing it is refused, the renewed URL answers it.
        let tail = try Curl.fetch(["-r", "150000-150999", uris[1]], in: dir)
        #expect(tail.status == 206 && tail.body == large[150_000..<151_000], "\(tail.status)")
        #expect(origin.queries("/s/seg1.ts").last == "token=2", "\(origin.queries("/s/seg1.ts"))")
        serve.stop()
        // Stored under the one key the token does not change: the same entry, its bytes the origin's.
        let inspector = try CacheInspector(directory: cache)
        let rules = CacheKeyRules(ignoreQuery: false, stripParameters: ["token"])
        let seg0 = try #require(try inspector.store.catalog.entry(key: rules.key(for: origin.url("/s/seg0.ts?token=1"))))
        #expect(seg0.isComplete && seg0.sha256 == TestBytes.sha256(small))
        let seg1 = try #require(try inspector.store.catalog.entry(key: rules.key(for: origin.url("/s/seg1.ts?token=2"))))
        #expect(seg1.ranges.contains(ByteRange(150_000, 151_000)))
    }

    /// With --allow-host, renewing asks no origin the list leaves out: a playlist prefetched from
    /// another host is not fetched again by serve, and the player gets the origin's 403.
    @Test
    func renewingAsksOnlyTheOriginsServeMayContact() throws {
        let segments = try TestOrigin(), playlists = try TestOrigin(address: "127.0.0.2")
        let body = HLSHostileOriginTests.ts(20, seed: 6)
        for n in 0..<2 { segments.setResource("/s/seg\(n).ts", .init(body: body, contentType: "video/mp2t")) }
        func sign(_ token: Int) {
            let uris = (0..<2).map { segments.url("/s/seg\($0).ts?token=\(token)") }
            playlists.setResource("/p/index.m3u8", .init(body: HLSHostileOriginTests.playlist(uris), contentType: Self.mpegurl))
            var f = TestOrigin.Faults()
            f.requiredQuery = "token=\(token)"
            segments.setFaults("/s/seg1.ts", f)
        }
        sign(1)
        let cache = dir.file("allowed")
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        // The stream is recorded, its first segment cached; the second is not.
        // The segments' host is another than the playlist's: allowed by name.
        let warm = try VCacheBinary.run(["prefetch", "-q", playlists.url("/p/index.m3u8"), "--seconds", "1", "--allow-host", "127.0.0.1"], cacheDir: cache)
        #expect(warm.status == 0, "\(warm.stderr)")
        sign(2)
        let asked = playlists.requests("/p/index.m3u8").count
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--allow-host", "127.0.0.1:\(segments.port)"])
        let refused = try Curl.fetch([serve.url(segments.url("/s/seg1.ts?token=1"))], in: dir)
        #expect(refused.status == 403)
        #expect(playlists.requests("/p/index.m3u8").count == asked)
        serve.stop()
    }

    /// The signed URL expires while a segment's body is going out (its head was cached, the
    /// rest is fetched as the player reads): the rest is fetched under the renewed URL, and the
    /// player gets the whole segment, byte for byte, in the one response.
    @Test
    func aSignedURLThatExpiresMidBodyIsRenewedForTheRest() throws {
        let origin = try TestOrigin()
        let large = HLSHostileOriginTests.ts(2000, seed: 5)  // 376 KB: a 64 KiB head, then the rest
        origin.setResource("/m/seg0.ts", .init(body: large, etag: "\"s0\"", contentType: "video/mp2t"))
        func sign(_ token: Int) {
            origin.setResource("/m/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts?token=\(token)"]), contentType: Self.mpegurl))
            var f = TestOrigin.Faults()
            f.requiredQuery = "token=\(token)"
            origin.setFaults("/m/seg0.ts", f)
        }
        sign(1)
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let playlist = try Curl.fetch([serve.url(origin.url("/m/index.m3u8"))], in: dir)
        let uri = try #require(String(decoding: playlist.body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(serve.base) }.map(String.init))
        #expect(try Curl.fetch(["-r", "0-99", uri], in: dir).status == 206)  // caches the head
        sign(2)
        // The response begins from the cache: its head is out when the origin refuses token 1.
        let whole = try Curl.fetch([uri], in: dir)
        #expect(whole.status == 200 && whole.headers["x-cache"] == "PARTIAL")
        #expect(whole.body.count == large.count && TestBytes.sha256(whole.body) == TestBytes.sha256(large), "\(whole.body.count) of \(large.count) bytes")
        #expect(origin.queries("/m/seg0.ts").last == "token=2", "\(origin.queries("/m/seg0.ts"))")
        serve.stop()
        #expect(try CacheInspector(directory: cache).store.catalog.entry(key: CacheKeyRules(ignoreQuery: false, stripParameters: ["token"]).key(for: origin.url("/m/seg0.ts?token=1")))?.sha256 == TestBytes.sha256(large))
    }

    @Test
    func anErrorPageAnsweredForASegmentIsNotStored() throws {
        let origin = try TestOrigin()
        let html = Data("<!DOCTYPE html><html><body>Session expired, please log in again</body></html>".utf8)
        origin.setResource("/h/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["s0.ts", "s1.ts", "s2.ts"]), contentType: Self.mpegurl))
        origin.setResource("/h/s0.ts", .init(body: html, contentType: "text/html; charset=utf-8"))
        origin.setResource("/h/s1.ts", .init(body: html, contentType: "application/octet-stream"))
        let good = HLSHostileOriginTests.ts(20, seed: 9)
        origin.setResource("/h/s2.ts", .init(body: good, contentType: "video/mp2t"))
        // The same page at a URL that is no stream's member is passed and kept as it is.
        origin.setResource("/h/other.bin", .init(body: html, contentType: "application/octet-stream"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/h/index.m3u8"))], in: dir).status == 200)
        for s in ["s0.ts", "s1.ts"] {
            // Twice: the second time the catalog may know its length, and the check still holds.
            for _ in 0..<2 {
                let r = try Curl.fetch([serve.url(origin.url("/h/" + s))], in: dir)
                #expect(r.status == 502, "\(s): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
            }
        }
        let fine = try Curl.fetch([serve.url(origin.url("/h/s2.ts"))], in: dir)
        #expect(fine.status == 200 && fine.body == good)
        let other = try Curl.fetch([serve.url(origin.url("/h/other.bin"))], in: dir)
        #expect(other.status == 200 && other.body == html)
        // Once the origin answers the segment, it plays and is kept.
        origin.setResource("/h/s1.ts", .init(body: good, contentType: "application/octet-stream"))
        let fixed = try Curl.fetch([serve.url(origin.url("/h/s1.ts"))], in: dir)
        #expect(fixed.status == 200 && fixed.body == good)
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/h/s0.ts"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/h/s1.ts"))?.sha256 == TestBytes.sha256(good))
        #expect(try inspector.entry(origin.url("/h/s2.ts"))?.sha256 == TestBytes.sha256(good))
        #expect(try inspector.entry(origin.url("/h/other.bin"))?.sha256 == TestBytes.sha256(html))
    }

    /// Under AES-128 a segment's bytes look like nothing, so serve judges it as prefetch does
    /// (`HLSMemberCheck`): an encrypted segment that is not a whole number of 16-byte blocks, or
    /// a key that is not 16 bytes, is an error page in its place: answered 502 and never stored.
    @Test
    func anAESSegmentOrKeyOfTheWrongLengthIsNotStoredThroughServe() throws {
        let origin = try TestOrigin()
        func playlist(_ key: String) -> Data {
            Data(("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
                + "#EXT-X-KEY:METHOD=AES-128,URI=\"\(key)\",IV=0x00000000000000000000000000000001\n"
                + "#EXTINF:2.0,\ns0.ts\n#EXTINF:2.0,\ns1.ts\n#EXT-X-ENDLIST\n").utf8)
        }
        // 4100 bytes: not whole 16-byte blocks (an error page or a cut body in its place).
        let cut = Data((0..<4100).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let whole = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 3) })
        let page = Data("<html><body>Not Found</body></html>\n".utf8)
        origin.setResource("/e/index.m3u8", .init(body: playlist("good.key"), contentType: Self.mpegurl))
        origin.setResource("/e/good.key", .init(body: Data(repeating: 1, count: 16), contentType: "application/octet-stream"))
        origin.setResource("/e/s0.ts", .init(body: cut, contentType: "video/mp2t"))
        origin.setResource("/e/s1.ts", .init(body: whole, contentType: "video/mp2t"))
        origin.setResource("/k/index.m3u8", .init(body: playlist("bad.key"), contentType: Self.mpegurl))
        origin.setResource("/k/bad.key", .init(body: page, contentType: "application/octet-stream"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        for p in ["/e/index.m3u8", "/k/index.m3u8"] {
            #expect(try Curl.fetch([serve.url(origin.url(p))], in: dir).status == 200)
        }
        for m in ["/e/s0.ts", "/k/bad.key"] {
            // Twice: the second time the catalog may know its length, and the check still holds.
            for _ in 0..<2 {
                let r = try Curl.fetch([serve.url(origin.url(m))], in: dir)
                #expect(r.status == 502, "\(m): \(r.status) \(r.body.count) bytes")
            }
        }
        let fine = try Curl.fetch([serve.url(origin.url("/e/s1.ts"))], in: dir)
        #expect(fine.status == 200 && fine.body == whole)
        let key = try Curl.fetch([serve.url(origin.url("/e/good.key"))], in: dir)
        #expect(key.status == 200 && key.body == Data(repeating: 1, count: 16))
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/e/s0.ts"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/k/bad.key"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/e/s1.ts"))?.sha256 == TestBytes.sha256(whole))
        #expect(try inspector.entry(origin.url("/e/good.key"))?.sha256 == TestBytes.sha256(Data(repeating: 1, count: 16)))
    }
}

/// A redirected playlist warmed by the vcache before migration 4 has no final URL recorded: its
/// relative URIs must still resolve to the segments stored (found from the stream's members),
/// so it plays offline, exports whole, and a later prefetch asks for nothing it never named.
@Suite struct HLSFinalURLUpgradeTests {
    let dir = TempDirectory("vcache-hlsupgrade")

    @Test(.requires(.streamTools))
    func aRedirectedPlaylistWithoutItsFinalURLStillPlaysOffline() throws {
        let made = dir.file("streams")
        try Fixtures.makeStreams(into: made)
        // /abr/master.m3u8 answers 302 to /moved/abr/master.m3u8, whose URIs are relative.
        let origin = try TestOrigin()
        let files = FileManager.default.enumerator(atPath: made + "/abr")?.allObjects as? [String] ?? []
        for name in files where name.contains(".") {
            let body = try Data(contentsOf: URL(fileURLWithPath: made + "/abr/" + name))
            origin.setResource("/moved/abr/" + name, .init(body: body, contentType: name.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "video/mp4"))
        }
        var redirect = TestOrigin.Faults()
        redirect.redirectTo = origin.url("/moved/abr/master.m3u8")
        origin.setFaults("/abr/master.m3u8", redirect)
        let url = origin.url("/abr/master.m3u8")
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        // As the earlier vcache left it: no final URL recorded.
        let sql = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", "DELETE FROM final_urls;"])
        #expect(sql.status == 0, "\(sql.err)")

        // A later prefetch finds it all cached and asks for nothing under the URL before the redirect.
        let asked = origin.requests("/abr/master.m3u8").count
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/abr/master.m3u8").count == asked)
        #expect(origin.requests("/abr/180p/index.m3u8").isEmpty)
        let check = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout)")
        let export = try VCacheBinary.run(["export", url, dir.file("out")], cacheDir: cache)
        #expect(export.status == 0, "\(export.stderr)")

        origin.stop()
        let refused = RefusingPort(origin.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(url), "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "offline: \(play.err)")
        serve.stop()
        let local = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", dir.file("out") + "/master.m3u8", "-f", "null", "-"])
        #expect(local.status == 0 && local.err.isEmpty, "exported: \(local.err)")
        let master = try String(contentsOfFile: dir.file("out") + "/master.m3u8", encoding: .utf8)
        #expect(!master.contains("http"), "\(master)")
    }
}
