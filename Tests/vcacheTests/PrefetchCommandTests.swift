import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

@Suite struct PrefetchCommandTests {
    let dir = TempDirectory("vcache-e2e")
    var cache: String { dir.file("cache") }

    @Test func prefetchAHeadThenTheRestThenListIt() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-end.mp4")
        let url = try nginx.publish("clip.mp4", body)

        // moov sits at the end: a head alone could not start playback, so the moov comes too.
        let head = try VCacheBinary.run(["prefetch", url, "--bytes", "64K"], cacheDir: cache)
        #expect(head.status == 0)
        let headLines = head.stderr.split(separator: "\n")
        #expect(headLines.first?.hasSuffix(" note: \(url): its moov (9.4 KiB at offset 286439) lies outside the requested bytes; fetching it too so playback can start (--no-moov skips it)") == true)
        #expect(headLines.last?.hasPrefix("fetched 73.4 KiB, 0 B already cached, in ") == true)
        let ls1 = try VCacheBinary.run(["ls"], cacheDir: cache)
        let row1 = ls1.stdout.split(separator: "\n")[1]
        #expect(row1.hasPrefix("partial  73.4 KiB  289 KiB  25  just now"))
        #expect(row1.hasSuffix(url))

        let rest = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(rest.status == 0)
        // In a log (stderr is not a terminal) a single URL gets the batch's timestamped ok line too.
        #expect(rest.stderr.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ok "#, options: .regularExpression) != nil, "\(rest.stderr)")
        #expect(rest.stderrLines.first?.hasPrefix("ok \(url): fetched 216 KiB, 73.4 KiB already cached, complete, ") == true)
        #expect(rest.stderrLines.last?.hasPrefix("fetched 216 KiB, 73.4 KiB already cached, in ") == true)

        let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(again.status == 0)
        #expect(again.stderrLines.first?.hasPrefix("ok \(url): fetched 0 B, 289 KiB already cached, complete, ") == true)
        #expect(again.stderrLines.last?.hasPrefix("nothing to fetch: 289 KiB already cached") == true)

        let ls2 = try VCacheBinary.run(["ls"], cacheDir: cache)
        let lines = ls2.stdout.split(separator: "\n")
        #expect(lines[0] == "STATE      CACHED    TOTAL    %  LAST USED  URL")
        #expect(lines[1] == "complete  289 KiB  289 KiB  100  just now   \(url)")
        #expect(lines[2].hasPrefix("1 entry, 289 KiB cached, "))

        let json = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let first = try #require(json.stdout.split(separator: "\n").first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect(object["sha256"] as? String == TestBytes.sha256(body))
        #expect(object["state"] as? String == "complete")
        #expect(object["length_bytes"] as? Int == body.count)
        #expect(object["event"] as? String == "entry")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))

        let noMoov = try VCacheBinary.run(["prefetch", url, "--bytes", "64K", "--no-moov"], cacheDir: dir.file("other"))
        #expect(noMoov.stderrLines.last?.hasPrefix("fetched 64.0 KiB, 0 B already cached, in ") == true)
    }

    @Test func aLongDownloadInALogPrintsPlainProgressLinesAtAnInterval() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 12)
        origin.setResource("/slow.mp4", .init(body: body, etag: "\"s\""))
        origin.throttle("/slow.mp4", to: 1 << 20)  // about 3 s
        let url = origin.url("/slow.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--stats", "0.5s"], cacheDir: cache, environment: ["TERM": "dumb"])
        #expect(r.status == 0)
        let lines = r.stderr.split(separator: "\n").filter { $0.contains(" progress \(url): ") }
        #expect(lines.count >= 2, "\(r.stderr)")
        #expect(lines.allSatisfy { $0.contains(" of 3.0 MiB (") && $0.hasSuffix("/s") })
        #expect(!r.stderr.contains("\u{1b}"))  // no escape codes in a log
        let quiet = try VCacheBinary.run(["prefetch", origin.url("/slow.mp4"), "--progress", "none"], cacheDir: dir.file("c2"))
        #expect(!quiet.stderr.contains("progress "))
        #expect(quiet.stderrLines.last?.hasPrefix("fetched 3.0 MiB") == true)
        #expect(try VCacheBinary.run(["prefetch", url, "--progress", "fancy"], cacheDir: cache).status == 2)
    }

    /// A head cached from an origin with no validator is dropped before the rest is fetched (it
    /// cannot be combined with new bytes), and the note says so as what it is: nothing changed
    /// on the origin (probe M1: the note said "changed on the origin").
    @Test func bytesWithoutAValidatorDroppedAreNotSaidToHaveChanged() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(1 << 20, seed: 13)
        origin.setResource("/nv.mp4", .init(body: body))
        let url = origin.url("/nv.mp4")
        #expect(try VCacheBinary.run(["prefetch", url, "--bytes", "64K", "-q"], cacheDir: cache).status == 0)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): cached bytes dropped and fetched again: the cached bytes have no strong validator (ETag or Last-Modified), so they cannot be combined with new ones\n"), "\(r.stderr)")
        #expect(!r.stderr.contains("changed on the origin"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    @Test func secondsFromTheCommandLineAndFromAListLine() throws {
        let nginx = try Nginx()
        let end = try nginx.publish("end.mp4", try Fixtures.data("moov-at-end.mp4"))
        let front = try nginx.publish("front.mp4", try Fixtures.data("moov-at-front.mp4"))
        let page = try nginx.publish("page.mp4", Data(String(repeating: "<html></html>\n", count: 100).utf8))
        let one = try VCacheBinary.run(["prefetch", end, "--seconds", "5", "-q"], cacheDir: cache)
        #expect(one.status == 0)
        #expect(try CacheInspector(directory: cache).entry(end)?.cachedBytes == 131_077 + 9_630)
        let list = "\(front) 5s\n\(page) 2s\n"
        let batch = try VCacheBinary.run(["prefetch", "-i", "-", "-q"], cacheDir: cache, stdin: list)
        #expect(batch.status == 4)
        #expect(batch.stderr.contains("cannot prefetch \(page): origin's answer for a .mp4 is not an MP4: its first bytes '<html></' are not an ISO BMFF box header (ftyp, moov, mdat...); nothing of it was kept"), "\(batch.stderr)")
        #expect(try CacheInspector(directory: cache).entry(front)?.cachedBytes ?? 0 > 100_000)
        // A head of a file that is not MP4 (nor named one) is just a head: no note about a moov.
        let plain = try nginx.publish("page.bin", Data(String(repeating: "<html></html>\n", count: 100).utf8))
        let head = try VCacheBinary.run(["prefetch", plain, "--bytes", "1K"], cacheDir: dir.file("plain"))
        #expect(head.status == 0)
        #expect(head.stderrLines.last?.hasPrefix("fetched 1.0 KiB, 0 B already cached, in ") == true)
        #expect(!head.stderr.contains("note:"))
        let bad = try VCacheBinary.run(["prefetch", end, "--seconds", "soon"], cacheDir: cache)
        #expect(bad.status == 2)
        #expect(bad.stderr == "vcache: invalid duration 'soon' for --seconds; use e.g. 30s, 5m, 2h (at most 3650d)\n")
    }

    @Test func a404IsOneClearLineAndExitFourFixTheOrigin() throws {
        let nginx = try Nginx()
        let url = nginx.url("/nope.mp4")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderr.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ vcache: "#, options: .regularExpression) != nil, "\(r.stderr)")
        #expect(r.stderrLines.first == "vcache: cannot prefetch \(url): origin answered 404 Not Found")
    }

    @Test func jsonPrintsParsableEventsAndASummary() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-front.mp4")
        let url = try nginx.publish("f.mp4", body)
        let r = try VCacheBinary.run(["prefetch", url, "--json"], cacheDir: cache)
        #expect(r.status == 0)
        let events = try r.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(events.first?["event"] as? String == "start")
        #expect(events.contains { $0["event"] as? String == "done" && $0["fetched_bytes"] as? Int == body.count && $0["complete"] as? Bool == true })
        let summary = try #require(events.last)
        #expect(summary["event"] as? String == "summary")
        #expect(summary["failed"] as? Int == 0)
        #expect(summary["fetched_bytes"] as? Int == body.count)
    }

    @Test func quietPrintsNothingOnSuccess() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("q.mp4", try Fixtures.data("moov-at-end.mp4"))
        let r = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty)
        #expect(r.stdout.isEmpty)
    }

    @Test func onATerminalAProgressBarShowsPercentRateAndETA() throws {
        let origin = try TestOrigin()
        origin.setResource("/tty.mp4", .init(body: TestBytes.make(2 << 20, seed: 6)))
        origin.throttle("/tty.mp4", to: 1 << 20)
        // util-linux `script` gives vcache a pseudo-terminal as stderr, as an interactive shell would.
        var env = ProcessInfo.processInfo.environment
        env["VCACHE_DIR"] = cache
        let r = try Child.run("/usr/bin/script", ["-qefc", "'\(VCacheBinary.path)' prefetch '\(origin.url("/tty.mp4"))'", "/dev/null"], environment: env)
        let screen = String(decoding: r.out, as: UTF8.self)
        #expect(r.exit.status == 0)
        #expect(screen.contains("tty.mp4"))
        #expect(screen.contains("%  "))
        #expect(screen.contains("/2.0 MiB"))
        #expect(screen.contains("ETA "))
        #expect(screen.contains("\u{1B}[1A\u{1B}[2K"))  // bars are redrawn in place
        #expect(screen.contains("fetched 2.0 MiB, 0 B already cached, in "))
    }

    @Test func headersAndUserAgentReachTheOrigin() throws {
        let origin = try TestOrigin()
        origin.setResource("/h.mp4", .init(body: TestBytes.make(1000)))
        let r = try VCacheBinary.run(["prefetch", origin.url("/h.mp4"), "-H", "Authorization: Bearer t0k", "--user-agent", "kiosk/1"], cacheDir: cache)
        #expect(r.status == 0)
        let seen = origin.headers("/h.mp4").first ?? [:]
        #expect(seen["authorization"] == "Bearer t0k")
        #expect(seen["user-agent"] == "kiosk/1")
    }
}
