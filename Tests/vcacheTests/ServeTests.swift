import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `vcache serve` end to end: a real nginx origin, the built binary as the proxy, and curl,
/// ffprobe and ffmpeg as the players.
@Suite struct ServeTests {
    let dir = TempDirectory("vcache-serve")
    var cache: String { dir.file("cache") }

    /// curl: (status, headers, body).
    func curl(_ args: [String]) throws -> (status: Int, headers: [String: String], body: Data) {
        try Curl.fetch(args, in: dir)
    }

    /// A real MP4 fixture published by a fresh nginx, and a proxy in front of it. Keep the value
    /// for the whole test: the origin stops with its `nginx`.
    struct ProxiedFixture {
        let nginx: Nginx
        let body: Data
        let origin: String
        let serve: ServeProcess
        var url: String { serve.url(origin) }
    }

    func fixtureBehindProxy(_ fixture: String, as name: String) throws -> ProxiedFixture {
        let nginx = try Nginx()
        let body = try Fixtures.data(fixture)
        let origin = try nginx.publish(name, body)
        return ProxiedFixture(nginx: nginx, body: body, origin: origin, serve: try ServeProcess(cacheDir: cache, logDir: dir))
    }

    @Test func playersRangesHeadAndUnsatisfiableRangesGetExactAnswers() throws {
        let f = try fixtureBehindProxy("moov-at-end.mp4", as: "clip.mp4")
        let (body, origin, serve, url) = (f.body, f.origin, f.serve, f.url)
        #expect(try VCacheBinary.run(["url", origin, "--port", "\(serve.port)"], cacheDir: cache).stdout == url + "\n")

        let probe = try curl(["-r", "0-1", url])  // AVPlayer's first request
        #expect(probe.status == 206)
        #expect(probe.headers["content-range"] == "bytes 0-1/\(body.count)")
        #expect(probe.headers["content-length"] == "2")
        #expect(probe.headers["accept-ranges"] == "bytes")
        #expect(probe.headers["content-type"] == "video/mp4")
        #expect(probe.headers["transfer-encoding"] == nil)
        #expect(probe.body == body[0..<2])

        let from = try curl(["-r", "200000-", url])  // ffmpeg, mpv, VLC, Chrome, ExoPlayer
        #expect(from.status == 206)
        #expect(from.headers["content-range"] == "bytes 200000-\(body.count - 1)/\(body.count)")
        #expect(from.body == body[200_000...])

        let suffix = try curl(["-r", "-1000", url])
        #expect(suffix.status == 206)
        #expect(suffix.headers["content-range"] == "bytes \(body.count - 1000)-\(body.count - 1)/\(body.count)")
        #expect(suffix.body == body[(body.count - 1000)...])

        let head = try curl(["-I", url])
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "\(body.count)")
        #expect(head.headers["etag"] == probe.headers["etag"])
        #expect(head.headers["etag"] != nil && head.headers["last-modified"] != nil)

        let whole = try curl([url])
        #expect(whole.status == 200)
        #expect(TestBytes.sha256(whole.body) == TestBytes.sha256(body))

        let beyond = try curl(["-r", "999999999-", url])
        #expect(beyond.status == 416)
        #expect(beyond.headers["content-range"] == "bytes */\(body.count)")

        let multi = try curl(["-r", "0-9,100-109", url])  // the covering span, never a wrong body
        #expect(multi.status == 206)
        #expect(multi.body == body[0..<110])

        let stopped = serve.stop()
        #expect(stopped.signalled && stopped.status == SIGTERM)
        // Everything read went into the cache, byte for byte.
        #expect(try CacheInspector(directory: cache).verifyClaims(origin, origin: body).mismatch == nil)
        #expect(try CacheInspector(directory: cache).entry(origin)?.sha256 == TestBytes.sha256(body))
    }

    @Test func ffmpegDecodesAColdMoovAtEndVideoThroughTheProxyAndTheCacheKeepsIt() throws {
        let f = try fixtureBehindProxy("moov-at-end.mp4", as: "cold.mp4")
        let (body, origin, serve, url) = (f.body, f.origin, f.serve, f.url)
        let probe = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", url])
        #expect(String(decoding: probe.out, as: UTF8.self).hasPrefix("10.0"), "\(probe.err)")
        let decode = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", url, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.err.isEmpty, "\(decode.err)")
        serve.stop()
        let claims = try CacheInspector(directory: cache).verifyClaims(origin, origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed > Int64(body.count) / 2)
        // One request line per player request, with where the bytes came from.
        #expect(serve.log.contains { $0.contains(" GET \(origin) ") && $0.contains(" 206 cache=") })
    }

    @Test func mpvPlaysThreeSecondsAndASeekThroughTheProxy() throws {
        let f = try fixtureBehindProxy("moov-at-end.mp4", as: "mpv.mp4")
        let (body, origin, serve, url) = (f.body, f.origin, f.serve, f.url)
        let mpv = ["--no-config", "--really-quiet", "--vo=null", "--ao=null", "--untimed"]
        let play = try Tool.run("/usr/bin/mpv", mpv + ["--length=3", url])
        #expect(play.status == 0, "\(play.err)")
        let seek = try Tool.run("/usr/bin/mpv", mpv + ["--start=6", "--length=1", url])
        #expect(seek.status == 0, "\(seek.err) \(serve.log.suffix(6))")
        serve.stop()
        #expect(serve.log.filter { $0.contains(" GET \(origin) ") }.count >= 2)
        #expect(try CacheInspector(directory: cache).verifyClaims(origin, origin: body).mismatch == nil)
    }

    @Test func offlineACachedVideoStillPlaysAndUncachedBytesGet502() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-front.mp4")
        let origin = try nginx.publish("off.mp4", body)
        let other = try nginx.publish("never.mp4", body)
        #expect(try VCacheBinary.run(["prefetch", "-q", origin], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", other, "--bytes", "1000", "--no-moov"], cacheDir: cache).status == 0)
        nginx.stop()
        let key = try #require(try CacheInspector(directory: cache).entry(origin)).key
        _ = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", "UPDATE entries SET last_used = 1600000000 WHERE key = '\(key)';"])
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let decode = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(origin), "-f", "null", "-"])
        #expect(decode.status == 0 && decode.err.isEmpty, "\(decode.err)")
        let cut = try Tool.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", serve.url(other)])
        // The head is there, the rest cannot be fetched: the connection is cut, never padded.
        #expect(String(decoding: cut.out, as: UTF8.self).hasPrefix("200 1000"))
        serve.stop()
        #expect(serve.log.contains { $0.contains(other) && $0.contains("(") })
        // Serving is use: the LRU order sees it.
        #expect(try #require(try CacheInspector(directory: cache).entry(origin)).lastUsed > Date(timeIntervalSince1970: 1_700_000_000))
    }

    @Test func originErrorsReachThePlayerAsTheyAreAndNothingIsStored() throws {
        let origin = try TestOrigin()
        origin.setResource("/gone.mp4", .init(body: Data(count: 10)))
        var f = TestOrigin.Faults()
        f.statuses = [(403, [:])]
        origin.setFaults("/gone.mp4", f)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try curl([serve.url(origin.url("/missing.mp4"))]).status == 404)
        #expect(try curl([serve.url(origin.url("/gone.mp4"))]).status == 403)
        #expect(try curl([serve.url("http://127.0.0.1:9/refused.mp4")]).status == 502)
        serve.stop()
        #expect(try CacheInspector(directory: cache).entry(origin.url("/missing.mp4")) == nil)
        #expect(serve.log.contains { $0.contains("refused.mp4") && $0.contains(" 502 ") })
    }

    /// A cold video on an in-process origin sending 8 MiB/s, and a proxy in front of it.
    func coldThrottledVideo(_ path: String, _ body: Data, etag: String) throws -> (origin: TestOrigin, serve: ServeProcess, url: String) {
        let origin = try TestOrigin()
        origin.setResource(path, .init(body: body, etag: etag))
        origin.throttle(path, to: 8 << 20)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        return (origin, serve, serve.url(origin.url(path)))
    }

    @Test func eightPlayersOnOneColdVideoGetExactBytesAndTheOriginSendsEachByteOnce() throws {
        let body = TestBytes.make(6 << 20, seed: 91)
        let (origin, serve, url) = try coldThrottledVideo("/eight.mp4", body, etag: "\"8\"")
        let results = Mutex8()
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let out = dir.file("p\(i).bin")
            let r = try? Tool.run("/usr/bin/curl", ["-s", "-o", out, url])
            results.set(i, r?.status == 0 ? TestBytes.sha256(file: out) : nil)
        }
        for i in 0..<8 { #expect(results.get(i) == TestBytes.sha256(body), "player \(i)") }
        #expect(origin.bytesServedTwice("/eight.mp4") == 0)
        serve.stop()
        #expect(try CacheInspector(directory: cache).entry(origin.url("/eight.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    /// Two players on one cold video, far apart (a player reading from the start, another that
    /// seeks to the second half): the second gets a storing job of its own, the first job stops
    /// where the second began, so both spans are kept and no byte is fetched twice.
    @Test
    func twoPlayersFarApartBothKeepTheirSpansAndNoByteIsFetchedTwice() throws {
        let body = TestBytes.make(16 << 20, seed: 95)
        let (origin, serve, url) = try coldThrottledVideo("/two.mp4", body, etag: "\"two\"")
        // The first job is held where the second begins until both players are done: what the
        // origin sends twice meanwhile does not depend on how fast the first job reacts.
        origin.hold("/two.mp4", at: 8 << 20)
        let first = Mutex8()
        let done = DispatchSemaphore(value: 0)
        let whole = dir.file("whole.bin")
        DispatchQueue.global().async {
            let r = try? Tool.run("/usr/bin/curl", ["-s", "-o", whole, url])
            first.set(0, r?.status == 0 ? TestBytes.sha256(file: whole) : nil)
            done.signal()
        }
        #expect(origin.waitUntilServed("/two.mp4", atLeast: 2 << 20))
        let second = try curl(["-r", "\(8 << 20)-", url])
        done.wait()
        #expect(second.status == 206, "\(serve.log)")
        #expect(TestBytes.sha256(second.body) == TestBytes.sha256(body[(8 << 20)...]))
        #expect(first.get(0) == TestBytes.sha256(body), "\(serve.log)")
        // Both players got every byte with no byte sent twice: the first read its second half
        // from what the second job stored.
        #expect(origin.bytesServedTwice("/two.mp4") == 0, "\(origin.bytesServedTwice("/two.mp4")) bytes twice")
        // Let go, the first job stops where the second began: streamed on, the second half would
        // come again whole (8 MiB); what comes twice is what was in flight when it stopped.
        origin.release("/two.mp4")
        #expect(serve.settles() == nil)
        #expect(origin.bytesServedTwice("/two.mp4") < 8 << 20, "\(origin.bytesServedTwice("/two.mp4")) bytes twice")
        print("two players far apart: \(origin.bytesServedTwice("/two.mp4")) bytes sent twice once the first job was let go")
        serve.stop()
        let entry = try CacheInspector(directory: cache).entry(origin.url("/two.mp4"))
        #expect(entry?.sha256 == TestBytes.sha256(body))
    }

    /// The same two players while the video changes on the origin: whatever the players get, the
    /// cache afterwards claims only bytes of the version it records (two jobs sharing the entry
    /// never drop a version under each other).
    @Test
    func aVideoChangingUnderTwoStoringJobsLeavesTheCacheTrue() throws {
        let old = TestBytes.make(16 << 20, seed: 96), new = TestBytes.make(16 << 20, seed: 97)
        let (origin, serve, url) = try coldThrottledVideo("/ch.mp4", old, etag: "\"v1\"")
        let group = DispatchGroup()
        for (i, range) in ["0-", "\(8 << 20)-"].enumerated() {
            if i == 1 { #expect(origin.waitUntilServed("/ch.mp4", atLeast: 2 << 20)) }
            DispatchQueue.global().async(group: group) {
                _ = try? Tool.run("/usr/bin/curl", ["-s", "-o", dir.file("ch\(i).bin"), "-r", range, url])
            }
        }
        #expect(origin.waitUntilServed("/ch.mp4", atLeast: 4 << 20))
        origin.setResource("/ch.mp4", .init(body: new, etag: "\"v2\""))
        group.wait()
        // A player asking again gets bytes of one version, never a mix: all of them, or a
        // response cut short when the change is found mid-way (the player then asks again).
        let againPath = dir.file("again.bin")
        let again = try Tool.run("/usr/bin/curl", ["-s", "-o", againPath, url])
        let got = (try? Data(contentsOf: URL(fileURLWithPath: againPath))) ?? Data()
        #expect(got == old.prefix(got.count) || got == new.prefix(got.count), "a mix of versions")
        if again.status == 0 { #expect(got.count == old.count) }
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        let entry = try #require(try inspector.entry(origin.url("/ch.mp4")))
        let version = entry.etag == "\"v2\"" ? new : old
        #expect(try inspector.verifyClaims(origin.url("/ch.mp4"), origin: version).mismatch == nil, "etag \(entry.etag ?? "-")")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// The request head's bound is 32 KiB (libmicrohttpd's connection pool, kept within what it
    /// takes from malloc): a 28 KiB header (a large cookie) is still served, a 40 KiB one gets 431.
    @Test func aRequestHeadUpTo32KiBIsServedALargerOneGets431() throws {
        let f = try fixtureBehindProxy("moov-at-front.mp4", as: "ok.mp4")
        let served = try curl(["-r", "0-99", "-H", "X-Big: " + String(repeating: "a", count: 28 << 10), f.serve.url(f.origin)])
        #expect(served.status == 206)
        #expect(served.body == f.body.prefix(100))
        #expect(try curl(["-H", "X-Big: " + String(repeating: "a", count: 40 << 10), f.serve.url(f.origin)]).status == 431)
    }

    @Test func hostileRequestsAreRefusedAndTheServerKeepsServing() throws {
        let f = try fixtureBehindProxy("moov-at-front.mp4", as: "ok.mp4")
        let (body, origin, serve) = (f.body, f.origin, f.serve)
        #expect(try curl([serve.base + "/../../etc/passwd", "--path-as-is"]).status == 404)
        #expect(try curl([serve.base + "/"]).status == 404)
        #expect(try curl(["-X", "POST", "-d", "x=1", serve.url(origin)]).status == 405)
        #expect(try curl(["-X", "DELETE", serve.url(origin)]).status == 405)
        #expect(try curl([serve.url("file:///etc/passwd")]).status == 400)
        #expect(try curl(["-H", "X-Big: " + String(repeating: "a", count: 100 << 10), serve.url(origin)]).status == 431)
        #expect(try curl(["-H", "Transfer-Encoding: chunked", "--data-binary", "abc", "-X", "GET", serve.url(origin)]).status == 400)
        let garbage = try Tool.run("/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(serve.port); printf '\\x01\\x02\\x03 garbage\\r\\n\\r\\n' >&3; timeout 5 head -c 12 <&3"])
        #expect(String(decoding: garbage.out, as: UTF8.self).hasPrefix("HTTP/1.1 400"))
        // And a normal request afterwards.
        let ok = try curl([serve.url(origin)])
        #expect(ok.status == 200 && ok.body == body)
        serve.stop()
    }
}

extension ServeTests {
    @Test func aPrefetchOfTheSameVideoRunningMeanwhileNeverMakesPlaybackWait() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(8 << 20, seed: 92)
        origin.setResource("/both.mp4", .init(body: body, etag: "\"b\""))
        // The batch is held at 1 MiB for as long as the player takes: a player that waited for
        // the batch would wait forever (curl gives up), whatever the machine's load.
        origin.hold("/both.mp4", at: 1 << 20)
        let batch = try VCacheBinary.start(["prefetch", "-q", origin.url("/both.mp4")], cacheDir: cache)
        #expect(origin.waitUntilHeld("/both.mp4"))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        // The player wants 512 KiB past what the batch has: it streams them itself, not stored.
        let part = try curl(["-r", "\(6 << 20)-\((6 << 20) + (512 << 10) - 1)", serve.url(origin.url("/both.mp4"))])
        #expect(part.status == 206)
        #expect(part.body == body[(6 << 20)..<((6 << 20) + (512 << 10))])
        #expect(batch.process.isRunning, "the batch ended while held")
        origin.release("/both.mp4")
        let r = batch.finish()
        #expect(r.status == 0)
        serve.stop()
        #expect(try CacheInspector(directory: cache).entry(origin.url("/both.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    /// A player that seeks into a cold video on a slow origin gets the middle without the origin
    /// sending the whole file first.
    @Test func aSeekOnAColdSlowOriginFetchesFarLessThanTheWholeFile() throws {
        let video = dir.file("seek.mp4")
        let made = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "30",
                                                   "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-minrate", "3M", "-maxrate", "3M",
                                                   "-bufsize", "1M", "-g", "50", "-pix_fmt", "yuv420p", "-movflags", "+faststart", video])
        #expect(made.status == 0, "\(made.err)")
        let body = try Data(contentsOf: URL(fileURLWithPath: video))
        let origin = try TestOrigin()
        origin.setResource("/seek.mp4", .init(body: body, etag: "\"s\""))
        origin.throttle("/seek.mp4", to: 2 << 20)  // the whole file would take over 5 s
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let r = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-ss", "20", "-i", serve.url(origin.url("/seek.mp4")), "-t", "1", "-f", "null", "-"])
        #expect(r.status == 0 && r.err.isEmpty, "\(r.err)")
        serve.stop()
        #expect(origin.servedBytes("/seek.mp4") < body.count / 2, "served \(origin.servedBytes("/seek.mp4")) of \(body.count)")
        #expect(try CacheInspector(directory: cache).verifyClaims(origin.url("/seek.mp4"), origin: body).mismatch == nil)
    }

    /// A video bigger than the cap still plays to the end; the cache stays under the cap (older
    /// entries make room first, then the rest streams without being stored).
    @Test func aVideoLargerThanTheCapPlaysAndTheCacheStaysUnderIt() throws {
        let origin = try TestOrigin()
        let old = TestBytes.make(1 << 20, seed: 93), big = TestBytes.make(8 << 20, seed: 94)
        origin.setResource("/old.mp4", .init(body: old, etag: "\"o\""))
        origin.setResource("/big.mp4", .init(body: big, etag: "\"b\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/old.mp4")], cacheDir: cache).status == 0)
        let cap: Int64 = 3 << 20
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--max-size", "3M"])
        let played = try curl([serve.url(origin.url("/big.mp4"))])
        #expect(played.status == 200)
        #expect(TestBytes.sha256(played.body) == TestBytes.sha256(big))
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/old.mp4")) == nil)  // least recently used, made room
        var usage: Int64 = 0
        let e = FileManager.default.enumerator(atPath: cache)
        while let name = e?.nextObject() as? String {
            if let st = FileSystem.status(cache + "/" + name), st.st_mode & S_IFMT == S_IFREG { usage += FileSystem.allocatedBytes(st) }
        }
        #expect(usage <= cap + (256 << 10), "the cache uses \(usage) bytes")
        #expect(try inspector.verifyClaims(origin.url("/big.mp4"), origin: big).mismatch == nil)
        #expect(try inspector.entry(origin.url("/big.mp4"))?.cachedBytes ?? 0 > 1 << 20)
    }

    /// 64 slowloris sockets (a header byte at a time, never finished) and 500 connections at once:
    /// a normal request is still answered, and answered afterwards.
    @Test func slowClientsAndAFloodOfConnectionsDoNotStopTheServer() throws {
        let f = try fixtureBehindProxy("moov-at-front.mp4", as: "s.mp4")
        let (body, origin, serve) = (f.body, f.origin, f.serve)
        var slow: [Int32] = []
        for _ in 0..<64 {
            let fd = Sockets.connectLoopback(serve.port)
            #expect(fd >= 0)
            Sockets.say(fd, "GET /v/")
            slow.append(fd)
        }
        let during = try curl(["-r", "0-99", serve.url(origin)])
        #expect(during.status == 206 && during.body == body[0..<100])
        var flood: [Int32] = []
        for _ in 0..<500 { flood.append(Sockets.connectLoopback(serve.port)) }
        #expect(flood.filter { $0 >= 0 }.count >= 100)
        for fd in flood + slow where fd >= 0 { close(fd) }
        let after = try curl([serve.url(origin)])
        #expect(after.status == 200 && after.body == body)
        serve.stop()
    }

    /// A client that drips its request head a byte at a time is never idle, so the idle timeout
    /// cannot stop it: the head deadline cuts it. A response that takes longer than that deadline
    /// still goes out whole (the deadline is for the head only), and others are served meanwhile.
    @Test
    func aClientDrippingItsHeadIsCutAtTheHeadDeadlineAndSlowResponsesAreNot() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 31)
        origin.setResource("/slow.mp4", .init(body: body, etag: "\"slow\""))
        origin.throttle("/slow.mp4", to: 150_000)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--header-timeout", "1s"])
        let fd = Sockets.connectLoopback(serve.port)
        #expect(fd >= 0)
        Sockets.say(fd, "GET /v/")
        let start = Date()
        var cut = false
        while !cut && Date().timeIntervalSince(start) < 20 {
            Sockets.say(fd, "A")
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 200) > 0 {
                var b = [UInt8](repeating: 0, count: 64)
                cut = recv(fd, &b, b.count, 0) <= 0
            }
        }
        close(fd)
        #expect(cut, "a client dripping its head for 20 s kept its connection")
        let slow = try curl([serve.url(origin.url("/slow.mp4"))])
        #expect(slow.status == 200, "\(serve.log.suffix(4))")
        #expect(TestBytes.sha256(slow.body) == TestBytes.sha256(body))
        serve.stop()
    }

    @Test func beyondLoopbackTheOriginHostsMustBeNamed() throws {
        let open = try VCacheBinary.run(["serve", "--listen", "0.0.0.0:0"], cacheDir: cache)
        #expect(open.status == 2)
        #expect(open.stderr == "vcache: --listen 0.0.0.0 reaches beyond this machine: name the origin hosts it may contact with --allow-host HOST, so it is never an open proxy\n")
        let origin = try TestOrigin()
        origin.setResource("/a.mp4", .init(body: Data(count: 100)))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--allow-host", "cdn.example"])
        #expect(try curl([serve.url(origin.url("/a.mp4"))]).status == 403)
        #expect(origin.requests("/a.mp4").isEmpty)
        serve.stop()
    }
}

/// Eight answers from concurrent players.
final class Mutex8: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var values = [String?](repeating: nil, count: 8)
    func set(_ i: Int, _ v: String?) { lock.lock(); values[i] = v; lock.unlock() }
    func get(_ i: Int) -> String? { lock.lock(); defer { lock.unlock() }; return values[i] }
}
