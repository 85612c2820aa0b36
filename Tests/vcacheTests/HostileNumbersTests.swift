import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 32: an origin (or an environment) that sends numbers no real one would: each must end in
/// a documented exit code and at most a line, never a trap (SIGILL, exit 132) or a loop.
@Suite struct HostileNumbersTests {
    let dir = TempDirectory("vcache-hostile-numbers")
    var cache: String { dir.file("cache") }

    /// 2^63 - 1024: a length no disk holds; sums and products of it overflow Int64.
    static let nearMax: Int64 = .max - 1024

    // MARK: - Loops

    /// The origin ignores Range and cuts every answer at the same byte: each retry brings only
    /// bytes already held, which is a failed attempt, so `--retries 1` ends the run (exit 3).
    @Test(arguments: [false, true])
    func anOriginCuttingEveryAnswerAtOneByteEndsAfterTheRetries(chunked: Bool) throws {
        let origin = try TestOrigin()
        let body = try Fixtures.data("moov-at-front.mp4")
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        var f = TestOrigin.Faults()
        f.ignoreRanges = true
        f.chunkedWithoutLength = chunked
        f.dropAfterBytes = 20_000
        f.dropCount = .max
        origin.setFaults("/v.mp4", f)
        let url = origin.url("/v.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--retries", "1", "--max-time", "60"], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(!r.signalledOrCrashed)
        // The first answer and one retry; before, it asked again for as long as it ran.
        #expect(origin.requests("/v.mp4").count == 2, "\(origin.requests("/v.mp4"))")
        #expect(r.stderrLines.contains { $0.hasSuffix("vcache: cannot prefetch \(url): connection closed before the body was complete " + (chunked ? "(transfer closed with outstanding read data remaining)" : "(transfer closed with 276069 bytes remaining to read)")) }, "\(r.stderr)")
        // What arrived is kept, true to the origin.
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        #expect(ls.stdout.contains("\"state\":\"partial\""), "\(ls.stdout)")
    }

    /// Through serve: the player gets its 502 at once, the job stops asking, and serve stops on
    /// SIGTERM (before, the player waited, the job asked for ever and only SIGKILL ended serve).
    @Test func serveGivesUpOnAnOriginCuttingEveryAnswerAtOneByte() throws {
        let origin = try TestOrigin()
        origin.setResource("/v.mp4", .init(body: try Fixtures.data("moov-at-front.mp4"), etag: "\"v1\""))
        var f = TestOrigin.Faults()
        f.ignoreRanges = true
        f.dropAfterBytes = 20_000
        f.dropCount = .max
        origin.setFaults("/v.mp4", f)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--retries", "1"])
        let got = try Curl.fetch(["-m", "60", serve.url(origin.url("/v.mp4"))], in: dir)
        #expect(got.status == 502)
        let asked = origin.requests("/v.mp4").count
        #expect(asked <= 3, "\(origin.requests("/v.mp4"))")
        // serve still answers others, and stops on SIGTERM by itself.
        origin.setResource("/ok.mp4", .init(body: try Fixtures.data("moov-at-end.mp4"), etag: "\"ok\""))
        let ok = try Curl.fetch(["-m", "60", serve.url(origin.url("/ok.mp4"))], in: dir)
        let okBody = try Fixtures.data("moov-at-end.mp4")
        #expect(ok.status == 200 && ok.body == okBody)
        let stop = serve.stop()
        #expect(stop.signalled || stop.status == 143, "\(stop)")
        #expect(origin.requests("/v.mp4").count == asked)
    }

    /// An origin that drips (about 200 B/s): the player's response head comes from the head that
    /// arrived within serve's head deadline (before: serve waited for 64 KiB, 5 minutes here), and
    /// once the player leaves, the job finishing the video stops after its grace and lets the
    /// origin go (before: it held the connection until the whole video came).
    @Test func aDrippingOriginNeitherHoldsThePlayerNorTheOrigin() throws {
        let origin = try TestOrigin()
        let body = try Fixtures.data("moov-at-end.mp4")
        origin.setResource("/drip.mp4", .init(body: body, etag: "\"d\""))
        origin.throttle("/drip.mp4", to: 200)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch(["-m", "60", "-r", "0-99", serve.url(origin.url("/drip.mp4"))], in: dir)
        #expect(got.status == 206 && got.body == body.prefix(100), "\(got.status) \(got.body.count)")
        // A player that wants more than the head held, and leaves before it came: a storing job
        // runs for it, and has the rest of a small video to finish without readers.
        _ = try? Curl.fetch(["-m", "12", "-r", "0-65535", serve.url(origin.url("/drip.mp4"))], in: dir)
        #expect(origin.requests("/drip.mp4").count >= 2, "\(origin.requests("/drip.mp4"))")
        // The player is gone; within the grace (30 s) and a throttled chunk, the origin is let go.
        #expect(origin.waitForOpenConnections(atMost: 0, within: 120), "\(origin.openConnections) connections still open")
        #expect(origin.servedBytes("/drip.mp4") < body.count)
        #expect(serve.process.isRunning)
    }

    /// A list line's size of 0 asks for nothing, as `--bytes 0` does: a bad line, never an item
    /// said `ok` with nothing fetched (before: exit 0, "fetched 0 B ... partial").
    @Test func aListLineOfSizeZeroIsABadLine() throws {
        let origin = try TestOrigin()
        origin.setResource("/v.mp4", .init(body: try Fixtures.data("moov-at-front.mp4"), etag: "\"v1\""))
        let list = dir.file("list")
        try "\(origin.url("/v.mp4")) 0\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.run(["prefetch", "-i", list, "--progress", "none"], cacheDir: cache)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderrLines.first == "vcache: \(list):1: invalid size or seconds '0'; use e.g. 2M or 10s; line skipped", "\(r.stderr)")
        #expect(origin.requests("/v.mp4").isEmpty)
    }

    // MARK: - Traps

    /// `Retry-After: nan` (and the other spellings Double takes) is no delay: the retry follows the
    /// backoff, in lines and in bar mode (before: SIGILL in the duration formatter).
    @Test(arguments: ["nan", "snan", "inf", "-5", "1e308", "0x1p70"])
    func aRetryAfterThatIsNotDelaySecondsIsIgnored(value: String) throws {
        let origin = try TestOrigin()
        let body = try Fixtures.data("moov-at-front.mp4")
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        for mode in ["lines", "bar"] {
            var f = TestOrigin.Faults()
            f.statuses = [(503, ["Retry-After": value])]
            origin.setFaults("/v.mp4", f)
            let c = dir.file("cache-\(mode)")
            let r = try VCacheBinary.run(["prefetch", origin.url("/v.mp4"), "--progress", mode], cacheDir: c)
            #expect(r.status == 0 && !r.signalledOrCrashed, "\(mode): \(r.stderr)")
            let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: c)
            #expect(ls.stdout.contains("\"sha256\":\"\(TestBytes.sha256(body))\""), "\(mode): \(ls.stdout)")
        }
    }

    /// A length near 2^63 announced by the origin: prefetch of a range, then every command that
    /// sums or scales it (before: info, check with two ranges, the bar's ETA, --max-size trapped).
    @Test func aLengthNear2To63IsAFigureNotATrap() throws {
        let origin = try TestOrigin()
        origin.setResource("/huge.mp4", .init(body: try Fixtures.data("moov-at-front.mp4"), etag: "\"h\""))
        var f = TestOrigin.Faults()
        f.announcedLength = Self.nearMax
        origin.setFaults("/huge.mp4", f)
        let url = origin.url("/huge.mp4")
        let head = try VCacheBinary.run(["prefetch", url, "--range", "0-1023"], cacheDir: cache)
        #expect(head.status == 0, "\(head.stderr)")
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        #expect(info.status == 0 && !info.signalledOrCrashed, "\(info.stderr)")
        let ls = try VCacheBinary.run(["ls", "--ranges"], cacheDir: cache)
        #expect(ls.status == 0, "\(ls.stderr)")
        let check = try VCacheBinary.run(["check", url, "--range", "0-", "--range", "1-"], cacheDir: cache)
        #expect(check.status == 1 && !check.signalledOrCrashed, "\(check.stderr)")
        // It can never fit 8 MiB: decided before anything is evicted, exit 5, one line.
        let capped = try VCacheBinary.run(["prefetch", url, "--max-size", "8M"], cacheDir: cache)
        #expect(capped.status == 5 && !capped.signalledOrCrashed, "\(capped.stderr)")
        // The bar's ETA over 2^63 bytes: a figure, and --max-time ends the run.
        let bar = try VCacheBinary.run(["prefetch", url, "--progress", "bar", "--max-time", "2"], cacheDir: dir.file("cache-bar"))
        #expect(!bar.signalledOrCrashed && bar.status == 3, "\(bar.status) \(bar.stderr)")
    }

    /// A range near 2^63 of a length near 2^63: no file system holds a file that long, and the
    /// write fails EFBIG. That is the origin's absurd length, exit 4 and one line saying so
    /// (before: exit 5, "File too large", as if this machine's disk were at fault); nothing kept.
    @Test func aRangePastTheLargestFileIsTheOriginsFaultNotTheDisks() throws {
        let origin = try TestOrigin()
        origin.setResource("/huge.bin", .init(body: TestBytes.make(4096, seed: 63), etag: "\"h\""))
        var f = TestOrigin.Faults()
        f.announcedLength = Self.nearMax
        origin.setFaults("/huge.bin", f)
        let url = origin.url("/huge.bin")
        let run = try VCacheBinary.run(["prefetch", url, "--range", "\(Self.nearMax - 200)-"], cacheDir: cache)
        #expect(run.status == 4 && !run.signalledOrCrashed, "\(run.status) \(run.stderr)")
        #expect(run.stderr.contains("File too large: the origin's length or range runs past the largest file this file system holds; nothing past it was kept"), "\(run.stderr)")
        let ls = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(ls.status == 0, "\(ls.stdout) \(ls.stderr)")
    }

    /// Under `ulimit -f` (a file size limit, RLIMIT_FSIZE), a write past it is EFBIG, said in one
    /// line with the remedy, exit 5 (before: SIGXFSZ killed vcache mid-run, no word, no checkpoint).
    @Test(.requires(.prlimit))
    func aFileSizeLimitIsSaidNotAKill() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 64)
        origin.setResource("/v.bin", .init(body: body, etag: "\"v\""))
        let run = try VCacheBinary.start(["--fsize=100000", VCacheBinary.path, "prefetch", origin.url("/v.bin")], cacheDir: cache,
                                         executable: "/usr/bin/prlimit").finish()
        #expect(!run.signalled, "killed by signal \(run.status): \(run.stderr)")
        #expect(run.status == 5, "\(run.status) \(run.stderr)")
        #expect(run.stderr.contains("this process's file size limit (ulimit -f) is below the video's bytes; raise it"), "\(run.stderr)")
        // Without the limit the next run completes, byte-exact.
        let next = try VCacheBinary.run(["prefetch", origin.url("/v.bin")], cacheDir: cache)
        #expect(next.status == 0, "\(next.stderr)")
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        #expect(ls.stdout.contains("\"sha256\":\"\(TestBytes.sha256(body))\""), "\(ls.stdout)")
    }

    /// `ulimit -f` as a shell gives it: SIGXFSZ at its default, a kill (the test process ignores
    /// it, and an ignored signal stays ignored across exec, so `aFileSizeLimitIsSaidNotAKill`
    /// never met the default). Then the cache's 256 KiB reserve, made as a new cache is opened
    /// before prefetch's own handlers, killed every command; and serve, which never ignored it,
    /// died for every player at the first write past the limit.
    static let fileSizeLimited = ["/usr/bin/env", "--default-signal=XFSZ", "/usr/bin/prlimit", "--fsize=100000"]

    @Test(.requires(.prlimit))
    func aFileSizeLimitKillsNoCommandWithSIGXFSZAtItsDefault() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 65)
        origin.setResource("/v.bin", .init(body: body, etag: "\"v\""))
        let run = try VCacheBinary.start(Array(Self.fileSizeLimited.dropFirst()) + [VCacheBinary.path, "prefetch", origin.url("/v.bin")],
                                         cacheDir: cache, executable: Self.fileSizeLimited[0]).finish()
        #expect(!run.signalled, "killed by signal \(run.status): \(run.stderr)")
        #expect(run.status == 5, "\(run.status) \(run.stderr)")
        #expect(run.stderr.contains("this process's file size limit (ulimit -f) is below the video's bytes; raise it"), "\(run.stderr)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        // serve: the player gets the whole video (streamed past what could be stored), and serve stays.
        let serve = try ServeProcess(cacheDir: dir.file("serve-cache"), logDir: dir, launcher: Self.fileSizeLimited)
        let got = try Curl.fetch(["-m", "60", serve.url(origin.url("/v.bin"))], in: dir)
        #expect(got.status == 200 && got.body == body, "\(got.status) \(got.body.count)")
        #expect(serve.process.isRunning)
    }

    /// serve with a cap, and a player asking `bytes=0-` of a length near 2^63: the room
    /// arithmetic saturates (before: one request took serve away from every player).
    @Test func serveSurvivesALengthNear2To63UnderACap() throws {
        let origin = try TestOrigin()
        let small = try Fixtures.data("moov-at-end.mp4")
        origin.setResource("/huge.mp4", .init(body: small, etag: "\"h\""))
        origin.setResource("/ok.mp4", .init(body: small, etag: "\"ok\""))
        var f = TestOrigin.Faults()
        f.announcedLength = Self.nearMax
        origin.setFaults("/huge.mp4", f)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--max-size", "100K"])
        _ = try? Curl.fetch(["-m", "5", "-r", "0-", serve.url(origin.url("/huge.mp4"))], in: dir)
        let ok = try Curl.fetch(["-m", "60", serve.url(origin.url("/ok.mp4"))], in: dir)
        #expect(ok.status == 200 && ok.body == small)
        #expect(serve.process.isRunning)
    }

    /// A player asking for the end of a video whose origin announces a length near 2^63, with and
    /// without a cap, and a range near the end: serve answers and stays up (found by the hostile
    /// review: `position + waitWindow` and `p + room` in ServeDecision overflowed).
    @Test(arguments: [[], ["--max-size", "1G"]])
    func serveAnswersTheEndOfALengthNear2To63(args: [String]) throws {
        let origin = try TestOrigin()
        let small = try Fixtures.data("moov-at-end.mp4")
        origin.setResource("/huge.mp4", .init(body: small, etag: "\"h\""))
        origin.setResource("/ok.mp4", .init(body: small, etag: "\"ok\""))
        var f = TestOrigin.Faults()
        f.announcedLength = .max
        origin.setFaults("/huge.mp4", f)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: args)
        let url = serve.url(origin.url("/huge.mp4"))
        let last = Int64.max - 1
        for range in ["-100", "0-100", "\(last - 1000)-\(last - 900)", "-100"] {
            let got = try Curl.fetch(["-m", "30", "-r", range, url], in: dir)
            #expect(serve.process.isRunning, "serve died on bytes=\(range)")
            #expect(got.status == 206 || got.status == 502 || got.status == 416, "\(range): \(got.status)")
            if got.status == 206 { #expect(got.body.count == 101, "\(range): \(got.body.count) bytes") }
        }
        let ok = try Curl.fetch(["-m", "60", serve.url(origin.url("/ok.mp4"))], in: dir)
        #expect(ok.status == 200 && ok.body == small)
        #expect(serve.process.isRunning)
    }

    /// A live playlist with a target duration of 10^20 s: its cached copy's freshness is capped,
    /// and serve answers it and the next player (before: the first request killed serve).
    @Test func aLivePlaylistWithAHugeTargetDurationIsServed() throws {
        let origin = try TestOrigin()
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:99999999999999999999\n#EXT-X-MEDIA-SEQUENCE:1\n#EXTINF:4.0,\nseg1.ts\n"
        origin.setResource("/live.m3u8", .init(body: Data(playlist.utf8), contentType: "application/vnd.apple.mpegurl"))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        for _ in 0..<2 {
            let got = try Curl.fetch(["-m", "30", serve.url(origin.url("/live.m3u8"))], in: dir)
            #expect(got.status == 200)
            #expect(String(decoding: got.body, as: UTF8.self).contains("#EXT-X-TARGETDURATION:99999999999999999999"))
        }
        #expect(serve.process.isRunning)
    }

    /// Two byte ranges of 5 * 10^18 bytes in one playlist: check and ls add them up saturating.
    @Test func bytesRangesSummingPast2To63AreNotATrap() throws {
        let origin = try TestOrigin()
        let playlist = "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\n#EXT-X-BYTERANGE:5000000000000000000@0\nall.ts\n#EXTINF:4.0,\n#EXT-X-BYTERANGE:5000000000000000000@1\nall.ts\n#EXT-X-ENDLIST\n"
        origin.setResource("/s.m3u8", .init(body: Data(playlist.utf8), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/all.ts", .init(body: Data(repeating: 0x47, count: 188 * 10), contentType: "video/mp2t"))
        let url = origin.url("/s.m3u8")
        let p = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(!p.signalledOrCrashed, "\(p.stderr)")
        let check = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(check.status == 1 && !check.signalledOrCrashed, "\(check.stderr)")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.status == 0 && !ls.signalledOrCrashed, "\(ls.stderr)")
    }

    /// `VCACHE_CATALOG_TIMEOUT` that is not a number of seconds from 0 to a day: a usage error
    /// naming it (before: inf and 1e16 trapped, nan and -inf were silently 0.1 s).
    @Test(arguments: ["inf", "1e16", "0x1p70", "nan", "-inf", "-1", "soon"])
    func aCatalogTimeoutThatIsNotSecondsIsAUsageError(value: String) throws {
        for args in [["ls"], ["status"], ["prefetch", "http://127.0.0.1:9/v.mp4"]] {
            let r = try VCacheBinary.run(args, cacheDir: cache, environment: ["VCACHE_CATALOG_TIMEOUT": value])
            #expect(r.status == 2 && !r.signalledOrCrashed)
            #expect(r.stderrLines == ["vcache: VCACHE_CATALOG_TIMEOUT='\(value)' is not a number of seconds from 0 to 86400; set one (default 30) or unset it"], "\(r.stderr)")
        }
        let fine = try VCacheBinary.run(["prefetch", "http://127.0.0.1:9/v.mp4"], cacheDir: cache, environment: ["VCACHE_CATALOG_TIMEOUT": "0.05"])
        #expect(fine.status == 3 && !fine.stderr.contains("VCACHE_CATALOG_TIMEOUT"), "\(fine.stderr)")
    }

    /// An `mvhd` (version 1) whose duration over its timescale is near 2^63 seconds: info says the
    /// figure it can, it does not trap.
    @Test func anMvhdDurationNear2To63SecondsIsShown() throws {
        let file = try Self.withHugeMovieDuration(try Fixtures.data("moov-at-end.mp4"))
        let origin = try TestOrigin()
        origin.setResource("/d.mp4", .init(body: file, etag: "\"d\""))
        let url = origin.url("/d.mp4")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        #expect(info.status == 0 && !info.signalledOrCrashed, "\(info.stderr)")
        #expect(info.stdout.contains("plays offline  all >1000000d from the cache"), "\(info.stdout)")
    }

    /// `file` (its moov last, its mvhd version 0 first in it) with the mvhd made version 1 with a
    /// timescale of 1 and a duration of 2^63 - 1: 12 bytes longer, so the moov and mvhd sizes grow;
    /// the chunk offsets point before the moov and stay right.
    static func withHugeMovieDuration(_ file: Data) throws -> Data {
        var b = [UInt8](file)
        func u32(_ at: Int) -> Int { b[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        func put32(_ v: Int, _ at: Int) { for i in 0..<4 { b[at + i] = UInt8((v >> (24 - 8 * i)) & 0xFF) } }
        var moov = 0
        while moov + 8 <= b.count, String(decoding: b[moov + 4..<moov + 8], as: UTF8.self) != "moov" { moov += u32(moov) }
        let mvhd = moov + 8
        try #require(String(decoding: b[mvhd + 4..<mvhd + 8], as: UTF8.self) == "mvhd" && b[mvhd + 8] == 0)
        let p = mvhd + 8
        var v1: [UInt8] = [1] + Array(b[p + 1..<p + 4]) + [UInt8](repeating: 0, count: 16) + [0, 0, 0, 1]
        v1 += [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        b.replaceSubrange(p..<p + 20, with: v1)
        put32(u32(mvhd) + 12, mvhd)
        put32(u32(moov) + 12, moov)
        return Data(b)
    }
}
