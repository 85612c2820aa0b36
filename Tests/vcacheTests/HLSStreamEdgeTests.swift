import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Found by a second hostile review of HLS: a live stream played offline, an inline init
/// section, masters nested or looping, a redirect serve --allow-host does not follow.
@Suite struct HLSStreamEdgeTests {
    let dir = TempDirectory("vcache-hlsedge")

    static let mpegurl = "application/vnd.apple.mpegurl"

    /// Offline, a live playlist's cached copy is answered ended (`#EXT-X-ENDLIST` added), so a
    /// player plays what is cached and stops instead of reloading it forever; online it is the
    /// origin's as it is.
    @Test(.requires(.streamTools))
    func aLiveStreamPlayedOfflineEnds() throws {
        let nginx = try Nginx()
        try Fixtures.makeStreams(into: nginx.root + "/hls")
        let vod = try String(contentsOfFile: nginx.root + "/hls/ts/index.m3u8", encoding: .utf8)
        #expect(vod.contains("#EXT-X-ENDLIST\n"))
        try vod.replacingOccurrences(of: "#EXT-X-ENDLIST\n", with: "").replacingOccurrences(of: "#EXT-X-PLAYLIST-TYPE:VOD\n", with: "").write(toFile: nginx.root + "/hls/ts/live.m3u8", atomically: true, encoding: .utf8)
        let live = nginx.url("/hls/ts/live.m3u8")
        let cache = dir.file("cache")
        let warm = try VCacheBinary.run(["prefetch", "-q", live], cacheDir: cache)
        #expect(warm.status == 0, "\(warm.stderr)")
        // Online (a serve of its own: the next would answer this fetch for half a target duration).
        let first = try ServeProcess(cacheDir: cache, logDir: dir)
        let online = try Curl.fetch([first.url(live)], in: dir)
        #expect(online.status == 200 && online.headers["x-cache"] != "HIT" && !String(decoding: online.body, as: UTF8.self).contains("ENDLIST"))
        first.stop()
        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let offline = try Curl.fetch([serve.url(live)], in: dir)
        let text = String(decoding: offline.body, as: UTF8.self)
        #expect(offline.status == 200 && offline.headers["x-cache"] == "HIT" && text.hasSuffix("\n#EXT-X-ENDLIST\n"), "\(text)")
        // ffmpeg ends (a player reloading a live playlist forever would be killed at 60 s: status 137).
        let play = try Tool.run("/usr/bin/timeout", ["-s", "KILL", "60", "/usr/bin/ffmpeg", "-v", "error", "-i", serve.url(live), "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.status): \(play.err)")
        serve.stop()
    }

    /// `EXT-X-MAP:URI="data:..."` is written in the playlist: nothing to fetch, and no member
    /// `ls`, `check` or `export` waits for; the export keeps the data: URI as written.
    @Test
    func anInlineInitSectionIsNoMemberToFetch() throws {
        let origin = try TestOrigin()
        let inline = "data:video/mp4;base64,AAAAEGZ0eXBpc281AAAAAA=="
        let playlist = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"\(inline)\"\n#EXTINF:2.0,\ns0.m4s\n#EXTINF:2.0,\ns1.m4s\n#EXT-X-ENDLIST\n"
        origin.setResource("/d/index.m3u8", .init(body: Data(playlist.utf8), contentType: Self.mpegurl))
        var segments: [Data] = []
        for i in 0..<2 {
            // A styp, then an mdat holding the rest: whole boxes, as a segment must be.
            var s = Data([0, 0, 0, 8]) + Data("styp".utf8) + Data([0, 0, 0x0F, 0xA8]) + Data("mdat".utf8)
            s += Data((0..<4000).map { UInt8(truncatingIfNeeded: $0 * 7 + i) })
            segments.append(s)
            origin.setResource("/d/s\(i).m4s", .init(body: s, contentType: "video/iso.segment"))
        }
        let url = origin.url("/d/index.m3u8")
        let cache = dir.file("cache")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0 && !r.stderr.contains("data"), "\(r.stderr)")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.stdout.contains("2/2 segments") && ls.stdout.contains("3 entries"), "\(ls.stdout)")
        let check = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        let out = dir.file("out")
        let export = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(export.status == 0, "\(export.stdout) \(export.stderr)")
        let exported = try String(contentsOfFile: out + "/master.m3u8", encoding: .utf8)
        #expect(exported.contains("#EXT-X-MAP:URI=\"\(inline)\""), "\(exported)")
        #expect(FileManager.default.contents(atPath: out + "/s1.m4s") == segments[1])
    }

    /// A master whose variant is a master, or masters naming each other or themselves: the
    /// stream fails with one line and exit 4, and no playlist is asked twice.
    @Test
    func aMasterNamingAMasterFailsTheStream() throws {
        let origin = try TestOrigin()
        func master(_ variant: String) -> TestOrigin.Resource {
            .init(body: Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\n\(variant)\n".utf8), contentType: Self.mpegurl)
        }
        origin.setResource("/n/outer.m3u8", master("inner.m3u8"))
        origin.setResource("/n/inner.m3u8", master("media.m3u8"))
        origin.setResource("/n/media.m3u8", .init(body: HLSHostileOriginTests.playlist(["s0.ts"]), contentType: Self.mpegurl))
        origin.setResource("/n/s0.ts", .init(body: HLSHostileOriginTests.ts(20, seed: 3), contentType: "video/mp2t"))
        origin.setResource("/l/a.m3u8", master("b.m3u8"))
        origin.setResource("/l/b.m3u8", master("a.m3u8"))
        origin.setResource("/s/self.m3u8", master("self.m3u8"))
        let cache = dir.file("cache")
        for path in ["/n/outer.m3u8", "/l/a.m3u8"] {
            let r = try VCacheBinary.run(["prefetch", origin.url(path)], cacheDir: cache)
            #expect(r.status == 4 && r.stderr.contains("a variant of a master playlist is itself a master playlist: not supported"), "\(path): \(r.stderr)")
        }
        let own = try VCacheBinary.run(["prefetch", origin.url("/s/self.m3u8")], cacheDir: cache)
        #expect(own.status == 4 && own.stderr.contains("a master playlist that names itself as a variant: not supported"), "\(own.stderr)")
        #expect(origin.requests("/n/media.m3u8").isEmpty)
        // (a.m3u8 asked again at the run's end, b.m3u8 fetched in it: Docs/hls.md.)
        #expect(origin.requests("/l/a.m3u8").count == 2 && origin.requests("/l/b.m3u8").count == 1)
        #expect(origin.requests("/s/self.m3u8").count == 1)
    }

    /// serve --allow-host follows a redirect to an origin it allows (a CDN sending players to
    /// its edge): the bytes are the final URL's.
    @Test
    func aRedirectToAnAllowedOriginIsFollowed() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 7)
        origin.setResource("/r/final.mp4", .init(body: body, etag: "\"f1\""))
        var faults = TestOrigin.Faults()
        faults.redirectTo = origin.url("/r/final.mp4")
        origin.setFaults("/r/v.mp4", faults)
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir, arguments: ["--allow-host", "127.0.0.1:\(origin.port)"])
        defer { serve.stop() }
        let answer = try Curl.fetch([serve.url(origin.url("/r/v.mp4"))], in: dir)
        #expect(answer.status == 200)
        #expect(TestBytes.sha256(answer.body) == TestBytes.sha256(body))
        #expect(origin.requests("/r/final.mp4").count >= 1)
    }

    /// `--allow-host '*.cdn.test'` follows a redirect to any of the CDN's edges (here one name
    /// `--resolve` points at this machine), and the bytes are the edge's.
    @Test
    func aRedirectToAnEdgeUnderAnAllowedDomainIsFollowed() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(200_000, seed: 11)
        origin.setResource("/final.mp4", .init(body: body, etag: "\"e1\""))
        var faults = TestOrigin.Faults()
        faults.redirectTo = "http://edge7.cdn.test:\(origin.port)/final.mp4"
        origin.setFaults("/r/edge.mp4", faults)
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir,
                                     arguments: ["--allow-host", "127.0.0.1:\(origin.port)", "--allow-host", "*.cdn.test",
                                                 "--resolve", "edge7.cdn.test:\(origin.port):127.0.0.1"])
        defer { serve.stop() }
        let answer = try Curl.fetch([serve.url(origin.url("/r/edge.mp4"))], in: dir)
        #expect(answer.status == 200)
        #expect(TestBytes.sha256(answer.body) == TestBytes.sha256(body))
    }

    /// A redirect to an origin --allow-host does not name (another host, or another port of an
    /// allowed host) reaches it with no connection at all: the player gets 502 and the log says
    /// where the origin redirected and what to do, not curl's "Couldn't connect".
    @Test
    func aRedirectOutsideTheAllowedOriginsGetsNoConnection() throws {
        let origin = try TestOrigin()
        let otherHost = try TestOrigin(address: "127.0.0.2"), otherPort = try TestOrigin()
        for o in [otherHost, otherPort] { o.setResource("/x.mp4", .init(body: TestBytes.make(1000))) }
        for (path, target) in [("/r/host.mp4", otherHost), ("/r/port.mp4", otherPort)] {
            var faults = TestOrigin.Faults()
            faults.redirectTo = target.url("/x.mp4")
            origin.setFaults(path, faults)
        }
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir, arguments: ["--allow-host", "127.0.0.1:\(origin.port)"])
        for (path, target) in [("/r/host.mp4", otherHost), ("/r/port.mp4", otherPort)] {
            let answer = try Curl.fetch([serve.url(origin.url(path))], in: dir)
            #expect(answer.status == 502, "\(path)")
            #expect(target.acceptedConnections == 0, "\(path)")
        }
        serve.stop()
        for target in [otherHost, otherPort] {
            let to = target.url("/x.mp4")
            let line = serve.log.first { $0.contains("redirected to \(to)") } ?? ""
            #expect(line.contains("the origin redirected to \(to), an origin --allow-host does not allow; add --allow-host \(target.address):\(target.port) if serve may contact it"),
                    "\(serve.log)")
            #expect(!line.contains("Couldn't connect"), "\(line)")
        }
    }

    /// `origin` redirects `path` to `to`; serve allows only `origin`'s host and port. The
    /// player's status, and serve's log line about `path` (serve stopped).
    func redirectThroughServe(_ origin: TestOrigin, _ path: String, to: String) throws -> (status: Int, line: String) {
        var faults = TestOrigin.Faults()
        faults.redirectTo = to
        origin.setFaults(path, faults)
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir, arguments: ["--allow-host", "127.0.0.1:\(origin.port)"])
        let answer = try Curl.fetch([serve.url(origin.url(path))], in: dir)
        serve.stop()
        return (answer.status, serve.log.first { $0.contains(path) } ?? "")
    }

    /// A redirect to an allowed host whose URL serve refuses for what it holds (credentials that
    /// decode to CR LF) is said as such, not as a host to add with an empty --allow-host.
    @Test
    func aRedirectRefusedForItsCredentialsIsNotSaidAsAHostToAllow() throws {
        let origin = try TestOrigin()
        origin.setResource("/x.mp4", .init(body: TestBytes.make(1000)))
        let to = "http://a%0d%0ab@127.0.0.1:\(origin.port)/x.mp4"
        let (status, line) = try redirectThroughServe(origin, "/r/cred.mp4", to: to)
        #expect(status == 502)
        #expect(origin.requests("/x.mp4").isEmpty)
        #expect(line.contains("the origin redirected to \(to), a URL serve does not contact (credentials that decode to a control character, or a URL libcurl refuses)"), "\(line)")
    }

    /// A redirect to a host name --allow-host does not name is refused before the name is looked
    /// up: no DNS query carries a name the origin chose, and a name that does not resolve is said
    /// as refused, not as "cannot resolve host".
    @Test
    func aRedirectOutsideTheAllowedOriginsIsNotLookedUp() throws {
        let origin = try TestOrigin()
        let to = "http://refused.invalid:\(origin.port)/x.mp4"
        let (status, line) = try redirectThroughServe(origin, "/r/name.mp4", to: to)
        #expect(status == 502)
        #expect(line.contains("the origin redirected to \(to), an origin --allow-host does not allow; add --allow-host refused.invalid:\(origin.port) if serve may contact it"),
                "\(line)")
    }

    /// The origin chooses a Location's length: the line refusing it names 1,000 characters of it,
    /// not 90,000.
    @Test
    func aVeryLongRefusedLocationIsCutInTheLog() throws {
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        let to = other.url("/" + String(repeating: "a", count: 90_000))
        let (status, line) = try redirectThroughServe(origin, "/r/long.mp4", to: to)
        #expect(status == 502)
        #expect(line.contains("the origin redirected to \(to.prefix(1000))…, an origin --allow-host does not allow; add --allow-host 127.0.0.2:\(other.port)"),
                "\(line.prefix(300))")
        #expect(line.count < 2000 && other.acceptedConnections == 0)
    }
}
