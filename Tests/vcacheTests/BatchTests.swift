import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 4: the nightly cron warm-up. Lists, concurrency, retries, caps, signed URLs, overlap.
@Suite struct BatchTests {
    let dir = TempDirectory("vcache-batch")
    var cache: String { dir.file("cache") }

    func lines(_ r: VCacheRun) -> [[String: Any]] {
        r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func twoHundredHeadsEightAtATimeAreByteExactAndASecondRunFetchesNothing() throws {
        let nginx = try Nginx()
        var bodies: [Data] = []
        for f in 0..<8 {
            let body = TestBytes.make(1_500_000, seed: UInt64(100 + f))
            bodies.append(body)
            try nginx.publish("src\(f).mp4", body)
        }
        var urls: [String] = []
        for i in 0..<200 { urls.append(try nginx.alias("v\(i).mp4", to: "src\(i % 8).mp4")) }
        let list = try dir.write("urls.txt", Data(("# nightly list\n\n" + urls.joined(separator: "\n") + "\n").utf8))

        let first = try VCacheBinary.run(["prefetch", "-i", list, "-j", "8", "--bytes", "1M"], cacheDir: cache)
        #expect(first.status == 0)
        #expect(first.stderr.split(separator: "\n").last?.hasPrefix("200 done, 0 failed; fetched 200 MiB, 0 B already cached") == true)
        let inspector = try CacheInspector(directory: cache)
        for (i, url) in urls.enumerated() {
            let head = bodies[i % 8].prefix(1 << 20)
            let data = try Data(contentsOf: URL(fileURLWithPath: inspector.store.dataPath(try #require(try inspector.entry(url)).key)))
            #expect(TestBytes.sha256(data.prefix(1 << 20)) == TestBytes.sha256(head), "\(url)")
            #expect(try inspector.entry(url)?.ranges.ranges == [ByteRange(0, 1 << 20)])
        }
        let second = try VCacheBinary.run(["prefetch", "-i", list, "-j", "8", "--bytes", "1M"], cacheDir: cache)
        #expect(second.status == 0)
        #expect(second.stderr.split(separator: "\n").last?.hasPrefix("200 done, 0 failed; nothing to fetch: 200 MiB already cached") == true)
        nginx.stop()
        #expect(nginx.accessLog().count == 200)
    }

    @Test func notFoundURLsAndAMalformedLineAreNamedAndTheRestAreCached() throws {
        let nginx = try Nginx()
        let good = try (0..<3).map { try nginx.publish("ok\($0).mp4", TestBytes.make(50_000, seed: UInt64($0))) }
        let list = """
        \(good[0])
        \(nginx.url("/missing-a.mp4"))
        not a url at all
        \(good[1]) 10K
        \(nginx.url("/missing-b.mp4"))
        \(good[2])
        """
        let file = try dir.write("list.txt", Data(list.utf8))
        let r = try VCacheBinary.run(["prefetch", "-i", file], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderr.contains("vcache: \(file):3: not an http(s) URL: 'not'; line skipped\n"))
        #expect(r.stderr.contains("vcache: cannot prefetch \(nginx.url("/missing-a.mp4")): origin answered 404 Not Found\n"))
        #expect(r.stderr.contains("vcache: cannot prefetch \(nginx.url("/missing-b.mp4")): origin answered 404 Not Found\n"))
        #expect(r.stderr.contains("failed:\n  \(nginx.url("/missing-a.mp4")): origin answered 404 Not Found\n  \(nginx.url("/missing-b.mp4")): origin answered 404 Not Found\n3 done"))
        let last = String(r.stderr.split(separator: "\n").last ?? "")
        #expect(last.hasPrefix("3 done, 2 failed, 1 bad input line; fetched 108 KiB, 0 B already cached, in "))
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(good[0])?.isComplete == true)
        #expect(try inspector.entry(good[1])?.cachedBytes == 10 * 1024)
        #expect(try inspector.entry(good[2])?.isComplete == true)
    }

    @Test func anEmptyListIsNothingToDoNotAnError() throws {
        let list = try dir.write("empty.txt", Data("# nothing tonight\n\n".utf8))
        let r = try VCacheBinary.run(["prefetch", "-i", list], cacheDir: cache)
        #expect(r.status == 0)
        #expect(r.stderr == "no URLs in \(list); nothing to do\n")
        let missing = try VCacheBinary.run(["prefetch", "-i", dir.file("nope.txt")], cacheDir: cache)
        #expect(missing.status == 2)
        #expect(missing.stderr == "vcache: cannot read URL list '\(dir.file("nope.txt"))': no such file\n")
    }

    @Test func jsonSummaryNamesEachFailureWithItsReason() throws {
        let origin = try TestOrigin()
        origin.setResource("/a.mp4", .init(body: TestBytes.make(10_000)))
        let r = try VCacheBinary.run(["prefetch", "--json", origin.url("/a.mp4"), origin.url("/gone.mp4")], cacheDir: cache)
        #expect(r.status == 4)
        let summary = try #require(lines(r).last)
        #expect(summary["event"] as? String == "summary")
        #expect(summary["done"] as? Int == 1)
        #expect(summary["failed"] as? Int == 1)
        let failures = try #require(summary["failures"] as? [[String: Any]])
        #expect(failures.count == 1)
        #expect(failures.first?["url"] as? String == origin.url("/gone.mp4"))
        let error = try #require(failures.first?["error"] as? [String: Any])
        #expect(error["kind"] as? String == "http")
        #expect(error["http_status"] as? Int == 404)
        #expect(error["exit_code"] as? Int == 4)
        #expect(error["message"] as? String == "origin answered 404 Not Found")
        let failed = try #require(lines(r).first { $0["event"] as? String == "failed" })
        #expect((failed["error"] as? [String: Any])?["http_status"] as? Int == 404)
    }

    @Test func urlsFromStdinAndDuplicatesAreFetchedOnce() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 4)
        origin.setResource("/d.mp4", .init(body: body))
        let url = origin.url("/d.mp4")
        let r = try VCacheBinary.run(["prefetch", "-i", "-", url], cacheDir: cache, stdin: "\(url)\n\(url)#frag\n")
        #expect(r.status == 0)
        #expect(origin.requests("/d.mp4").count == 1)
        #expect(origin.servedBytes("/d.mp4") == body.count)
    }

    /// Issue 32: a URL given three times is one request, one item done, its bytes counted once,
    /// and the duplicates said once in the summary.
    @Test func duplicatesAreCountedOnceAndSaidOnce() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(50_000, seed: 5)
        origin.setResource("/u.mp4", .init(body: body))
        let url = origin.url("/u.mp4")
        let r = try VCacheBinary.run(["prefetch", url, url, url, "--json"], cacheDir: cache)
        #expect(r.status == 0)
        #expect(origin.requests("/u.mp4").count == 1)
        let summary = try #require(lines(r).first { $0["event"] as? String == "summary" })
        #expect(summary["done"] as? Int == 1)
        #expect(summary["fetched_bytes"] as? Int == body.count)
        #expect(summary["merged_urls"] as? Int == 2)
        #expect(lines(r).filter { $0["event"] as? String == "done" }.count == 1)

        let list = try dir.write("four.txt", Data(String(repeating: url + "\n", count: 4).utf8))
        let again = try VCacheBinary.run(["prefetch", "-i", list, "--progress", "lines"], cacheDir: dir.file("other"))
        #expect(again.status == 0)
        #expect(again.stderrLines.filter { $0.hasPrefix("ok ") }.count == 1, "\(again.stderr)")
        #expect(again.stderrLines.last?.hasPrefix("1 done, 0 failed, 3 duplicate URLs merged; fetched 48.8 KiB, 0 B already cached, in ") == true, "\(again.stderr)")
    }

    @Test func fiveHundredThreesThenSuccessResumeFromWhereTheDropLeftOff() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(1_000_000, seed: 8)
        origin.setResource("/f.mp4", .init(body: body, etag: "\"f\""))
        var faults = TestOrigin.Faults()
        faults.statuses = [(0, [:]), (503, [:]), (503, [:])]
        faults.dropAfterBytes = 300_000
        origin.setFaults("/f.mp4", faults)
        let r = try VCacheBinary.run(["prefetch", origin.url("/f.mp4"), "--json"], cacheDir: cache)
        #expect(r.status == 0)
        #expect(lines(r).filter { $0["event"] as? String == "retry" }.count == 3)
        #expect(origin.requests("/f.mp4") == ["bytes=0-", "bytes=300000-999999", "bytes=300000-999999", "bytes=300000-999999"])
        #expect(origin.bytesServedTwice("/f.mp4") == 0)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/f.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func tooManyRequestsWithRetryAfterIsWaitedOut() throws {
        let origin = try TestOrigin()
        origin.setResource("/r.mp4", .init(body: TestBytes.make(20_000, seed: 2)))
        var faults = TestOrigin.Faults()
        faults.statuses = [(429, ["Retry-After": "1"])]
        origin.setFaults("/r.mp4", faults)
        let r = try VCacheBinary.run(["prefetch", origin.url("/r.mp4"), "--json"], cacheDir: cache)
        #expect(r.status == 0)
        let retry = try #require(lines(r).first { $0["event"] as? String == "retry" })
        #expect(retry["delay_seconds"] as? Double == 1)
        #expect(retry["reason"] as? String == "origin answered 429 Too Many Requests")
    }

    /// Exit codes by cause: 3 try later (a 503 past its retries), 4 fix the origin (a 404), 1 a bad
    /// line; with several, the most pressing wins (4 over 1 over 3).
    @Test func theExitCodeSaysWhetherToWaitOrToFix() throws {
        let origin = try TestOrigin()
        origin.setResource("/busy.mp4", .init(body: Data(count: 1000)))
        var f = TestOrigin.Faults()
        f.statuses = Array(repeating: (503, [:]), count: 50)
        origin.setFaults("/busy.mp4", f)
        let busy = origin.url("/busy.mp4"), missing = origin.url("/missing.mp4")
        func run(_ list: String) throws -> Int32 {
            try VCacheBinary.run(["prefetch", "-q", "--retries", "1", "-i", "-"], cacheDir: cache, stdin: list).status
        }
        #expect(try run(busy) == 3)
        #expect(try run(busy + "\nnot-a-url\n") == 1)
        #expect(try run(busy + "\n" + missing + "\nnot-a-url\n") == 4)
    }

    /// A 4xx, or a 508 (a loop of proxies: no wait undoes it), is asked once: exit 4.
    @Test(arguments: [(403, "403 Forbidden"), (508, "508 Loop Detected")])
    func aClientErrorOrALoopIsNotRetried(status: Int, said: String) throws {
        let origin = try TestOrigin()
        var faults = TestOrigin.Faults()
        faults.statuses = [(status, [:])]
        origin.setFaults("/x.mp4", faults)
        let r = try VCacheBinary.run(["prefetch", origin.url("/x.mp4")], cacheDir: cache)
        #expect(r.status == 4)
        #expect(origin.requests("/x.mp4").count == 1)
        #expect(r.stderr.contains("origin answered \(said)"), "\(r.stderr)")
    }

    @Test func twoOverlappingRunsNeverServeAByteTwiceForTheSameEntry() throws {
        let origin = try TestOrigin()
        var bodies: [String: Data] = [:]
        for i in 0..<10 {
            let body = TestBytes.make(1 << 20, seed: UInt64(300 + i))
            bodies["/o\(i).mp4"] = body
            origin.setResource("/o\(i).mp4", .init(body: body, etag: "\"o\(i)\""))
            origin.throttle("/o\(i).mp4", to: 4 << 20)
        }
        let a = try dir.write("a.txt", Data((0..<7).map { origin.url("/o\($0).mp4") }.joined(separator: "\n").utf8))
        let b = try dir.write("b.txt", Data((3..<10).reversed().map { origin.url("/o\($0).mp4") }.joined(separator: "\n").utf8))
        let ra = try VCacheBinary.start(["prefetch", "-i", a, "-j", "3"], cacheDir: cache)
        let rb = try VCacheBinary.start(["prefetch", "-i", b, "-j", "3"], cacheDir: cache)
        let resultA = ra.finish(), resultB = rb.finish()
        #expect(resultA.status == 0, "\(resultA.stderr)")
        #expect(resultB.status == 0, "\(resultB.stderr)")
        let inspector = try CacheInspector(directory: cache)
        for (path, body) in bodies {
            #expect(origin.bytesServedTwice(path) == 0, "\(path)")
            #expect(try inspector.entry(origin.url(path))?.sha256 == TestBytes.sha256(body), "\(path)")
        }
    }

    @Test func noWaitSkipsAnEntryAnotherProcessIsWriting() throws {
        let origin = try TestOrigin()
        origin.setResource("/w.mp4", .init(body: TestBytes.make(4 << 20, seed: 1)))
        origin.throttle("/w.mp4", to: 2 << 20)
        let writer = try VCacheBinary.start(["prefetch", "-q", origin.url("/w.mp4")], cacheDir: cache)
        #expect(origin.waitUntilServed("/w.mp4", atLeast: 256 << 10))
        let r = try VCacheBinary.run(["prefetch", "--no-wait", origin.url("/w.mp4")], cacheDir: cache)
        writer.kill(SIGTERM)
        _ = writer.finish()
        #expect(r.status == 3)
        #expect(r.stderr.contains("vcache: cannot prefetch \(origin.url("/w.mp4")): another vcache process is writing this entry; skipped (--no-wait)\n"))
    }

    @Test func maxSizeEvictsOlderEntriesButKeepsEveryEntryOfThisRun() throws {
        let origin = try TestOrigin()
        for i in 0..<6 { origin.setResource("/m\(i).mp4", .init(body: TestBytes.make(1 << 20, seed: UInt64(i)))) }
        let old = (0..<3).map { origin.url("/m\($0).mp4") }
        let new = (3..<6).map { origin.url("/m\($0).mp4") }
        #expect(try VCacheBinary.run(["prefetch", "-q"] + old, cacheDir: cache).status == 0)
        let r = try VCacheBinary.run(["prefetch", "--max-size", "3500K"] + new, cacheDir: cache)
        #expect(r.status == 0)
        #expect(r.stderr.contains("evicted"))
        let inspector = try CacheInspector(directory: cache)
        for u in new { #expect(try inspector.entry(u)?.isComplete == true) }
        let usage = Evictor(store: inspector.store).footprint().total(try inspector.store.catalog.allEntries())
        #expect(usage <= 3500 * 1024)
        #expect(try old.filter { try inspector.entry($0) != nil }.count == 0)
        #expect(try duSize(cache) <= 3500 * 1024)
    }

    @Test func maxSizeEvictsDuringALongDownloadNotOnlyAfterIt() throws {
        let origin = try TestOrigin()
        for i in 0..<2 { origin.setResource("/old\(i).mp4", .init(body: TestBytes.make(2 << 20, seed: UInt64(70 + i)))) }
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/old0.mp4"), origin.url("/old1.mp4")], cacheDir: cache).status == 0)
        origin.setResource("/long.mp4", .init(body: TestBytes.make(6 << 20, seed: 72)))
        origin.throttle("/long.mp4", to: 2 << 20)
        let r = try VCacheBinary.run(["prefetch", "--json", "--max-size", "8M", origin.url("/long.mp4")], cacheDir: cache)
        #expect(r.status == 0)
        let events = lines(r).compactMap { $0["event"] as? String }
        let firstEviction = try #require(events.firstIndex(of: "evicted"))
        let done = try #require(events.firstIndex(of: "done"))
        #expect(firstEviction < done, "\(events)")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/long.mp4"))?.isComplete == true)
        #expect(try duSize(cache) <= 8 << 20)
    }

    /// The cap is a promise (Docs/cron.md): a list whose own videos do not fit ends at or under
    /// it, the last of the list given back, the run failing with the reason (it ended at 175% of
    /// the cap with exit 0 and a warning).
    @Test func aListThatDoesNotFitTheCapEndsUnderItAndSaysSo() throws {
        let origin = try TestOrigin()
        var list: [String] = []
        for i in 0..<4 {
            origin.setResource("/f\(i).mp4", .init(body: TestBytes.make(1 << 20, seed: UInt64(80 + i))))
            list.append(origin.url("/f\(i).mp4"))
        }
        let r = try VCacheBinary.run(["prefetch", "-j", "1", "--max-size", "2500K", "--json"] + list, cacheDir: cache)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(try duSize(cache) <= 2500 * 1024)
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(list[0])?.isComplete == true && inspector.entry(list[1])?.isComplete == true)
        #expect(try inspector.entry(list[3]) == nil)
        let failed = lines(r).filter { $0["event"] as? String == "failed" }
        #expect(!failed.isEmpty && failed.allSatisfy { ($0["error"] as? [String: Any])?["kind"] as? String == "over_cap" }, "\(r.stdout)")
        // The item never started is in the summary's failures, with the same reason.
        let failures = lines(r).last?["failures"] as? [[String: Any]] ?? []
        #expect(failures.contains { $0["url"] as? String == list[3] && ($0["error"] as? [String: Any])?["kind"] as? String == "over_cap" }, "\(failures)")
        #expect(lines(r).last?["exit_code"] as? Int == 5)
        // With several at once, the run's account is true: an item is among the failures exactly
        // when it is not complete in the cache at the end (stored items were reported failed).
        let parallel = dir.file("cache-j4")
        let p = try VCacheBinary.run(["prefetch", "-j", "4", "--max-size", "2500K", "--json"] + list, cacheDir: parallel)
        let inspector4 = try CacheInspector(directory: parallel)
        let failedURLs = Set((lines(p).last?["failures"] as? [[String: Any]] ?? []).compactMap { $0["url"] as? String })
        for u in list {
            let complete = try inspector4.entry(u)?.isComplete == true
            #expect(failedURLs.contains(u) != complete, "\(u): complete \(complete), failed \(failedURLs.contains(u))")
        }
        #expect(try duSize(parallel) <= 2500 * 1024)
    }

    @Test func theConfiguredMaxSizeAppliesToEveryRun() throws {
        let origin = try TestOrigin()
        for i in 0..<4 { origin.setResource("/c\(i).mp4", .init(body: TestBytes.make(1 << 20, seed: UInt64(50 + i)))) }
        #expect(try VCacheBinary.run(["config", "set", "max-size", "2500K"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["config", "get", "max-size"], cacheDir: cache).stdout == "max-size = 2500K\n")
        #expect(try VCacheBinary.run(["config"], cacheDir: cache).stdout == "max-size = 2500K\nmin-free = (unset)\nconnections = (unset)\nkey-ignore-query = (unset)\nkey-strip-param = (unset)\n")
        let typo = try VCacheBinary.run(["config", "set", "maxsize", "1G"], cacheDir: cache)
        #expect(typo.status == 2)
        #expect(typo.stderr == "vcache: unknown setting 'maxsize'; did you mean 'max-size'?\n")
        for i in 0..<4 { #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/c\(i).mp4")], cacheDir: cache).status == 0) }
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/c3.mp4"))?.isComplete == true)
        #expect(try inspector.entry(origin.url("/c0.mp4")) == nil)
        #expect(try duSize(cache) <= 2500 * 1024)
    }

    @Test func signedURLsWithDifferentTokensAreOneEntryAndTheLatestURLIsShown() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(600_000, seed: 77)
        origin.setResource("/s.mp4", .init(body: body, etag: "\"s\""))
        let u1 = origin.url("/s.mp4?token=aaa&q=1"), u2 = origin.url("/s.mp4?token=bbb&q=1"), u3 = origin.url("/s.mp4?q=1&token=ccc")
        #expect(try VCacheBinary.run(["prefetch", "-q", u1, "--bytes", "100K", "--key-strip-param", "token"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", u2, "--bytes", "200K", "--key-strip-param", "token"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", u3, "--key-strip-param", "token"], cacheDir: cache).status == 0)
        #expect(origin.bytesServedTwice("/s.mp4") == 0)
        // Each resume went out with the newest URL's token, not the one the entry was made with.
        #expect(origin.queries("/s.mp4") == ["token=aaa&q=1", "token=bbb&q=1", "q=1&token=ccc"])
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let entries = lines(ls).filter { $0["event"] as? String == "entry" }
        #expect(entries.count == 1)
        #expect(entries.first?["latest_url"] as? String == u3)
        #expect(entries.first?["sha256"] as? String == TestBytes.sha256(body))
    }

    /// Key rules given only on prefetch's command line key entries that ls, export and serve (which
    /// read the config's rules) do not find (hostile probe h9b, F7): the run says so once, with the
    /// config line that keeps them; nothing when the config has them, or with -q.
    @Test func keyRulesTheConfigLacksAreSaidOnce() throws {
        let origin = try TestOrigin()
        origin.setResource("/k.mp4", .init(body: TestBytes.make(50_000, seed: 91), etag: "\"k\""))
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "expires"], cacheDir: cache).status == 0)
        let urls = [origin.url("/k.mp4?token=a&expires=1"), origin.url("/k.mp4?token=b&expires=2")]
        let r = try VCacheBinary.run(["prefetch", "--key-strip-param", "token"] + urls, cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let note = "note: --key-strip-param token is not in the cache's config: ls, info, export, verify and serve key URLs by the config's rules "
            + "and will not find what this run keys by it; 'vcache config set key-strip-param expires,token' makes it every command's"
        #expect(r.stderrLines.filter { $0.hasSuffix(note) }.count == 1, "\(r.stderr)")
        #expect(!(try VCacheBinary.run(["prefetch", "-q", "--key-strip-param", "token", urls[0]], cacheDir: cache).stderr.contains("note:")))
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "expires,token"], cacheDir: cache).status == 0)
        let again = try VCacheBinary.run(["prefetch", "--key-strip-param", "token", urls[1]], cacheDir: cache)
        #expect(again.status == 0 && !again.stderr.contains("note:"), "\(again.stderr)")
        let ignore = try VCacheBinary.run(["prefetch", "--key-ignore-query", urls[1]], cacheDir: cache)
        #expect(ignore.stderrLines.contains { $0.hasSuffix("note: --key-ignore-query is not in the cache's config: ls, info, export, verify and serve key URLs by the config's rules and will not find what this run keys by it; 'vcache config set key-ignore-query true' makes it every command's") }, "\(ignore.stderr)")
    }

    /// The deadline is not work: with every cron flag at once, the run ends when its downloads do.
    @Test
    func aRunEndsWhenItsWorkEndsNotAtItsMaxTime() throws {
        let origin = try TestOrigin()
        let bodies = (0..<4).map { TestBytes.make(512 << 10, seed: UInt64(200 + $0)) }
        for (i, b) in bodies.enumerated() { origin.setResource("/mt\(i).mp4", .init(body: b, etag: "\"\(i)\"")) }
        let list = (0..<4).map { origin.url("/mt\($0).mp4") }.joined(separator: "\n")
        let r = try VCacheBinary.run(["prefetch", "-i", "-", "-j", "2", "--max-time", "3h", "--limit-rate", "8M", "--max-size", "1G", "-q"],
                                     cacheDir: cache, stdin: list)
        #expect(r.status == 0)
        for (i, b) in bodies.enumerated() {
            #expect(try CacheInspector(directory: cache).entry(origin.url("/mt\(i).mp4"))?.sha256 == TestBytes.sha256(b))
        }
    }

    @Test func maxTimeStopsALongRunCleanlyAndASecondRunCompletesIt() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(6 << 20, seed: 99)
        origin.setResource("/long.mp4", .init(body: body, etag: "\"l\""))
        origin.throttle("/long.mp4", to: 2 << 20)
        let url = origin.url("/long.mp4")
        origin.setResource("/later.mp4", .init(body: TestBytes.make(100_000, seed: 98)))
        let first = try VCacheBinary.run(["prefetch", "-j", "1", url, origin.url("/later.mp4"), "--max-time", "2s"], cacheDir: cache)
        #expect(first.status == 3)
        // Planned, not a failure: said as a stop, and counted apart.
        #expect(first.stderr.contains("stopped \(url) at the --max-time deadline: "), "\(first.stderr)")
        #expect(!first.stderr.contains("cannot prefetch"), "\(first.stderr)")
        // The item the deadline came before is named too.
        #expect(first.stderr.contains("stopped \(origin.url("/later.mp4")) at the --max-time deadline: "), "\(first.stderr)")
        #expect(first.stderrLines.last?.hasPrefix("0 done, 2 stopped at --max-time, 0 failed; fetched ") == true, "\(first.stderr)")
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed > 0)
        origin.throttle("/long.mp4", to: nil)
        let second = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(second.status == 0)
        // Only what was in flight on the socket at the deadline is sent again, never a stored byte.
        #expect(origin.bytesServedTwice("/long.mp4") < 1 << 20)
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    /// A stream stopped at the deadline with most of its segments never started: one line for
    /// the stream, with all it fetched, and one per segment that was running; none per segment
    /// never started (before: a line each, thousands for a long VOD in a cron log).
    @Test func aStreamStoppedAtTheDeadlineIsOneLineNotOnePerSegment() throws {
        let origin = try TestOrigin()
        // MPEG-TS-like segments: 188-byte packets starting with the sync byte.
        var packet = Data(repeating: 0xff, count: 188)
        packet[0] = 0x47
        packet[1] = 0x00
        packet[3] = 0x10  // not scrambled, payload only
        let segment = Data((0..<100).flatMap { _ in packet })
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
        for i in 0..<20 {
            playlist += "#EXTINF:2.0,\nseg_\(i).ts\n"
            origin.setResource("/s/seg_\(i).ts", .init(body: segment, etag: "\"s\(i)\"", contentType: "video/mp2t"))
        }
        playlist += "#EXT-X-ENDLIST\n"
        origin.setResource("/s/index.m3u8", .init(body: Data(playlist.utf8), etag: "\"p\"", contentType: "application/vnd.apple.mpegurl"))
        origin.throttle("/s/seg_1.ts", to: 2_000)
        let url = origin.url("/s/index.m3u8")
        let r = try VCacheBinary.run(["prefetch", "-j", "1", url, "--max-time", "2s", "--progress", "lines"], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        let stopped = r.stderrLines.filter { $0.hasPrefix("stopped ") }
        #expect(stopped.count == 2, "\(r.stderr)")
        #expect(stopped.contains { $0.contains("stopped \(origin.url("/s/seg_1.ts")) at the --max-time deadline: ") }, "\(r.stderr)")
        #expect(stopped.contains { $0.contains("stopped \(url) at the --max-time deadline: ") }, "\(r.stderr)")
        #expect(r.stderrLines.last?.hasPrefix("0 done, 1 stopped at --max-time, 0 failed; fetched ") == true, "\(r.stderr)")
        #expect(origin.requests("/s/seg_2.ts").isEmpty)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    @Test func limitRateStillDeliversByteExactData() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 31)
        origin.setResource("/lr.mp4", .init(body: body))
        let r = try VCacheBinary.run(["prefetch", "-q", origin.url("/lr.mp4"), "--limit-rate", "1M"], cacheDir: cache)
        #expect(r.status == 0)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/lr.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    /// The cap holds: 4 MiB at 1 MiB/s cannot arrive in much under 4 s (3.9 s after the bucket's
    /// 0.1 s burst). A lower bound only, which a slow machine cannot break. Timed on this side:
    /// the origin's clock says nothing here, as the kernel buffers megabytes of a paused socket.
    @Test func limitRateHoldsTheTotalRate() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(4 << 20, seed: 32)
        origin.setResource("/rate.mp4", .init(body: body, etag: "\"r\""))
        let start = ContinuousClock.now
        let r = try VCacheBinary.run(["prefetch", "-q", origin.url("/rate.mp4"), "--limit-rate", "1M"], cacheDir: cache)
        let elapsed = (ContinuousClock.now - start).inSeconds
        #expect(r.status == 0)
        #expect(elapsed >= 3.5)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/rate.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    /// What `du` counts for the cache folder, in bytes.
    func duSize(_ path: String) throws -> Int64 {
        var total: Int64 = 0
        let e = FileManager.default.enumerator(atPath: path)
        while let name = e?.nextObject() as? String {
            if let st = FileSystem.status(path + "/" + name), (st.st_mode & S_IFMT) == S_IFREG { total += FileSystem.allocatedBytes(st) }
        }
        return total
    }
}
