import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, slow links under `serve`. A slow origin: serve and its origin (nginx) in a network
/// namespace of the test's own, what the origin sends held to 8 Mbit/s (htb on `lo`, MTU 1500;
/// the player's side is not slowed), serve run with `--timeout 1s`: a player (curl, and ffmpeg
/// decoding a real MP4) gets every byte, the timeout (a stall of 1 s) never fires on a link that
/// is slow but moving, and a player that gives up midway leaves serve as it was (no storing job,
/// no connection, its descriptors back) and the next request whole. A slow player (curl
/// --limit-rate) on a fast origin: serve stores what the origin sends on disk, not in memory (its
/// peak resident memory grows by less than a quarter of the video). Byte-exact every time.
@Suite struct ServeSlowLinkTests {
    let dir = TempDirectory("vcache-serveslow")
    static let video = TestBytes.make(3 << 20, seed: 2509)

    /// A namespace serving `video` as /v.mp4 and the fixture moov-at-end.mp4, or nil (the reason printed).
    func namespace() throws -> NetNamespace {
        let ns = try NetNamespace()
        try Self.video.write(to: URL(fileURLWithPath: ns.root + "/v.mp4"))
        try FileManager.default.copyItem(atPath: Fixtures.path("moov-at-end.mp4"), toPath: ns.root + "/moov-at-end.mp4")
        return ns
    }

    /// GETs by curl, all at once (inside `ns` when given): for each, curl's exit code, the
    /// status, the body, the seconds it took.
    func gets(_ ns: NetNamespace?, _ urls: [String], _ extra: [String] = []) throws -> [(curl: Int32, status: Int, body: Data, seconds: Double)] {
        let started = ContinuousClock.now
        let players = try urls.map { url in
            let id = UUID().uuidString.prefix(8)
            let h = dir.file("h-\(id)"), b = dir.file("b-\(id)")
            let args = (ns?.launcher ?? []) + ["/usr/bin/curl", "-s", "--max-time", "60", "-D", h, "-o", b] + extra + [url]
            return (child: try Child(args[0], Array(args.dropFirst()), stdout: .null, stderr: .null), h: h, b: b)
        }
        return players.map { p in
            let exit = p.child.wait()
            let took = ContinuousClock.now - started
            let (status, _) = ResponseHeadText.parse((try? String(contentsOfFile: p.h, encoding: .utf8)) ?? "")
            let body = (try? Data(contentsOf: URL(fileURLWithPath: p.b))) ?? Data()
            try? FileManager.default.removeItem(atPath: p.b)
            return (exit.status, status, body, Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)
        }
    }

    func get(_ ns: NetNamespace?, _ url: String, _ extra: [String] = []) throws -> (curl: Int32, status: Int, body: Data, seconds: Double) {
        try gets(ns, [url], extra)[0]
    }

    @Test(.requires(.netNamespace, .ffmpeg))
    func aSlowOriginIsServedByteExactAndTheTimeoutDoesNotFireWhileBytesMove() throws {
        let ns = try namespace()
        defer { ns.stop() }
        let cache = dir.file("cache")
        try ns.slowOrigin(rate: "8mbit")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--retries", "0", "--timeout", "1s"], launcher: ns.launcher)
        defer { serve.stop() }
        let origin = ns.url("/v.mp4")
        let r = try get(ns, serve.url(origin))
        print("3 MiB through serve from an origin held to 8 Mbit/s: \(r.status), \(r.body.count) bytes in \(r.seconds) s, curl exit \(r.curl)")
        #expect(r.curl == 0 && r.status == 200, "\(r.curl) \(r.status): \(serve.log.joined(separator: "\n"))")
        #expect(TestBytes.sha256(r.body) == TestBytes.sha256(Self.video))
        // 3 MiB at 8 Mbit/s take at least 3.1 s: the link really was slow, three times --timeout.
        #expect(r.seconds > 3, "\(r.seconds) s: the link was not slowed")
        #expect(!serve.log.contains { $0.contains("stalled") || $0.contains("timed out") }, "\(serve.log)")
        #expect(serve.settles(inside: ns) == nil)
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.verifyClaims(origin, origin: Self.video).mismatch == nil)
        #expect(try inspector.entry(origin)?.isComplete == true)
        #expect(try inspector.dataSHA256(origin) == TestBytes.sha256(Self.video))

        // A player that seeks: ffmpeg reads the moov at the end, then the media, through serve.
        let movie = ns.url("/moov-at-end.mp4")
        let play = try ns.run("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", serve.url(movie), "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "ffmpeg: \(play.err)")
        #expect(serve.settles(inside: ns) == nil)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: ns.root + "/moov-at-end.mp4"))
        #expect(try inspector.verifyClaims(movie, origin: bytes).mismatch == nil)
        #expect(!serve.log.contains { $0.contains("stalled") || $0.contains("timed out") }, "\(serve.log)")
    }

    @Test(.requires(.netNamespace))
    func aPlayerGivingUpOnASlowLinkLeavesServeAsItWasAndTheNextRequestWhole() throws {
        let ns = try namespace()
        defer { ns.stop() }
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--retries", "0", "--timeout", "1s"], launcher: ns.launcher)
        defer { serve.stop() }
        // One whole request first (fast), so that what serve opens once (the catalog's files) is open.
        let movie = ns.url("/moov-at-end.mp4")
        #expect(try get(ns, serve.url(movie)).status == 200)
        #expect(serve.settles(inside: ns) == nil)
        let baseline = try #require(ProcessStats.of(serve.process.pid))

        try ns.slowOrigin(rate: "8mbit")
        let origin = ns.url("/v.mp4")
        // Three players give up after a second (about 1 MB in), one after the other and two at once.
        let cut = try [get(ns, serve.url(origin), ["--max-time", "1"])] + gets(ns, [serve.url(origin), serve.url(origin)], ["--max-time", "1"])
        for r in cut {
            print("a player gave up after \(r.seconds) s: \(r.status), \(r.body.count) of \(Self.video.count) bytes, curl exit \(r.curl)")
            #expect(r.curl == 28 && r.body.count < Self.video.count, "curl exit \(r.curl), \(r.body.count) bytes")
            #expect(TestBytes.sha256(r.body) == TestBytes.sha256(Self.video.prefix(r.body.count)), "the bytes received are not the origin's")
        }
        let settled = serve.settles(inside: ns, descriptorsAtMost: baseline)
        #expect(settled == nil, "\(settled ?? "")")
        #expect(try CacheInspector(directory: cache).verifyClaims(origin, origin: Self.video).mismatch == nil)

        let again = try get(ns, serve.url(origin))
        print("then whole: \(again.status), \(again.body.count) bytes in \(again.seconds) s")
        #expect(again.curl == 0 && again.status == 200 && TestBytes.sha256(again.body) == TestBytes.sha256(Self.video))
        #expect(serve.settles(inside: ns, descriptorsAtMost: baseline) == nil)
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.verifyClaims(origin, origin: Self.video).mismatch == nil)
        #expect(try inspector.dataSHA256(origin) == TestBytes.sha256(Self.video))
        #expect(!serve.log.contains { $0.contains("stalled") || $0.contains("Fatal error") }, "\(serve.log)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// No namespace needed: the origin is as fast as loopback; the player reads 1 MiB and then
    /// stops reading, its connection left open. The storing job meanwhile takes the whole 64 MiB
    /// from the origin (the test waits for that event, not for a time), and none of it is held
    /// in serve's memory for the player.
    @Test(.requires(.nginx))
    func aSlowPlayerOnAFastOriginDoesNotMakeServeHoldTheVideoInMemory() throws {
        let nginx = try Nginx()
        defer { nginx.stop() }
        let big = TestBytes.make(64 << 20, seed: 2510)
        let origin = try nginx.publish("big.mp4", big)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { serve.stop() }
        let before = try #require(ProcessStats.of(serve.process.pid))
        // The player: a GET, 1 MiB read (head included), then nothing more read.
        var player = Sockets.connectLoopback(serve.port)
        try #require(player >= 0)
        defer { if player >= 0 { close(player) } }
        let target = String(serve.url(origin).drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
        Sockets.say(player, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(serve.port)\r\n\r\n")
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while received.count < 1 << 20 {
            let n = read(player, &buffer, buffer.count)
            guard n > 0 else { break }
            received.append(contentsOf: buffer[0..<n])
        }
        let head = try #require(received.range(of: Data("\r\n\r\n".utf8)), "no head in \(received.count) bytes")
        let sent = received[head.upperBound...]
        #expect(String(decoding: received[..<head.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(sent.elementsEqual(big.prefix(sent.count)), "the bytes received are not the origin's")
        // The event: the job stored the whole video while the player read nothing more.
        let inspector = try CacheInspector(directory: cache)
        let stored = ContinuousClock.now + .seconds(120)
        while (try? inspector.entry(origin))??.isComplete != true && ContinuousClock.now < stored {
            usleep(20_000)  // polling the catalog: no event says an entry is complete
        }
        let after = try #require(ProcessStats.of(serve.process.pid))
        let claims = try inspector.verifyClaims(origin, origin: big)
        print("a player that stopped reading at \(sent.count) bytes; serve stored \(claims.claimed) of \(big.count); its peak resident memory \(before.peakResidentKiB) KiB before, \(after.peakResidentKiB) KiB after")
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == Int64(big.count), "serve stored \(claims.claimed) bytes while the player read nothing more: the job did not outrun the player")
        #expect(after.peakResidentKiB - before.peakResidentKiB < 16 << 10, "serve's peak resident memory grew from \(before.peakResidentKiB) to \(after.peakResidentKiB) KiB")
        close(player)
        // Closed once: by the end of the test its number is another test's socket or file.
        player = -1
        #expect(serve.settles() == nil)
        let whole = try get(nil, serve.url(origin))
        #expect(whole.curl == 0 && whole.status == 200 && TestBytes.sha256(whole.body) == TestBytes.sha256(big))
        #expect(try inspector.dataSHA256(origin) == TestBytes.sha256(big))
    }
}
