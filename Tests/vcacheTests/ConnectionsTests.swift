import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `prefetch --connections N`: one entry's missing bytes over several ranged transfers into the
/// same `data`, with the checkpoints, resume and response rules of one connection.
@Suite struct ConnectionsTests {
    let dir = TempDirectory("vcache-conn")
    var cache: String { dir.file("cache") }

    /// The byte ranges of `Range: bytes=A-B` headers, as half-open ranges (`A-`: to `length`).
    static func ranges(_ specs: [String?], length: Int64) -> [ByteRange] {
        specs.compactMap { spec in
            guard let spec, spec.hasPrefix("bytes=") else { return nil }
            let parts = spec.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let a = Int64(parts[0]) else { return nil }
            return ByteRange(a, parts[1].isEmpty ? length : (Int64(parts[1]) ?? length - 1) + 1)
        }
    }

    @Test func fourConnectionsFetchAByteExactEntryInFourPieces() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(40 << 20, seed: 41)
        let url = try nginx.publish("big.mp4", body)
        let r = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        // The first request establishes the version and keeps the first 10 MiB; the other three
        // pieces go out with If-Range, one each.
        let asked = nginx.accessLog().filter { $0.path == "/big.mp4" }.map(\.range)
        // (nginx logs each when it ends: the first, cut at 10 MiB, may come last.)
        #expect(Set(asked.compactMap { $0 }) == ["bytes=0-", "bytes=10485760-20971519", "bytes=20971520-31457279", "bytes=31457280-41943039"],
                "\(asked)")
        #expect(asked.count == 4)

        // With one connection (the default) nothing changes: one request for the whole video.
        let one = try VCacheBinary.run(["prefetch", url], cacheDir: dir.file("one"))
        #expect(one.status == 0)
        #expect(nginx.accessLog().filter { $0.path == "/big.mp4" }.count == 5)
    }

    @Test func aHeadUnderTheMinimumPieceStaysOneRequest() throws {
        let origin = try TestOrigin()
        origin.setResource("/h.mp4", .init(body: TestBytes.make(20 << 20, seed: 42), etag: "\"h\""))
        let url = origin.url("/h.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--bytes", "2M", "--no-moov", "--connections", "8", "-q"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(origin.requests("/h.mp4") == ["bytes=0-2097151"])
    }

    @Test func connectionsDroppedMidRangeStillGiveAByteExactEntry() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(24 << 20, seed: 43)
        origin.setResource("/cut.mp4", .init(body: body, etag: "\"cut\""))
        var faults = TestOrigin.Faults()
        faults.dropAfterBytes = 1 << 20  // the first three responses are cut after 1 MiB
        faults.dropCount = 3
        origin.setFaults("/cut.mp4", faults)
        let url = origin.url("/cut.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        // The first connection and two others were cut, and each went on where it stopped.
        let retries = r.stderrLines.filter { $0.hasPrefix("retry 1 in ") }
        #expect(retries.count == 3, "\(r.stderr)")
        #expect(retries.filter { $0.contains(": connection 2: ") || $0.contains(": connection 3: ") || $0.contains(": connection 4: ") }.count == 2)
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        // Each retry asks only for what its connection had not written.
        #expect(origin.bytesServedTwice("/cut.mp4") == 0)
        #expect(origin.requests("/cut.mp4").count >= 7)
    }

    @Test func aConnectionRefusedForGoodHandsItsPieceBackToTheFirst() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(40 << 20, seed: 49)
        origin.setResource("/r.mp4", .init(body: body, etag: "\"r\""))
        var faults = TestOrigin.Faults()
        faults.statuses = [(0, [:]), (404, [:]), (404, [:]), (404, [:])]  // the first answer, then three 404s
        origin.setFaults("/r.mp4", faults)
        // The first connection waits at 5 MiB until the other three have had their 404.
        origin.hold("/r.mp4", at: 5 << 20)
        let url = origin.url("/r.mp4")
        let running = try VCacheBinary.start(["prefetch", url, "--connections", "4", "-q"], cacheDir: cache)
        #expect(origin.waitUntilHeld("/r.mp4", timeout: 60))
        let deadline = ContinuousClock.now + .seconds(60)
        while origin.requests("/r.mp4").count < 4, ContinuousClock.now < deadline {
            usleep(10_000)  // polling the origin's log: nothing says a request was read
        }
        origin.release("/r.mp4")
        let r = running.finish()
        #expect(r.status == 0, "\(r.stderr)")
        // The three pieces come back to the first connection once its own piece is done (in one
        // request, or two when a 404 was read after that), each byte asked once, nothing split again.
        let asked = origin.requests("/r.mp4")
        #expect((5...6).contains(asked.count), "\(asked)")
        let after = Self.ranges(Array(asked.dropFirst(4)), length: 40 << 20)
        #expect(RangeSet(after) == RangeSet([ByteRange(10 << 20, 40 << 20)]), "\(asked)")
        #expect(after.reduce(0) { $0 + $1.count } == 30 << 20, "\(asked)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
    }

    @Test func aKillMidDownloadThenASecondRunAsksOnlyForTheGaps() throws {
        let origin = try TestOrigin()
        let length: Int64 = 40 << 20
        let body = TestBytes.make(Int(length), seed: 44)
        origin.setResource("/k.mp4", .init(body: body, etag: "\"k\""))
        // The third piece (20-30 MiB) stops at 25 MiB; the others run to their end.
        origin.hold("/k.mp4", at: 25 << 20)
        let url = origin.url("/k.mp4")
        let running = try VCacheBinary.start(["prefetch", url, "--connections", "4", "-q"], cacheDir: cache)
        #expect(origin.waitUntilHeld("/k.mp4", timeout: 60))
        // Everything that arrived is claimed within a checkpoint interval or two (nothing says when).
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? CacheInspector(directory: cache).entry(url)?.ranges.count) ?? 0 < length - (5 << 20), ContinuousClock.now < deadline {
            usleep(20_000)  // polling the catalog: no event says a commit landed
        }
        running.kill(SIGKILL)
        #expect(running.finish().signalled)
        origin.release("/k.mp4")
        let claimed = try #require(try CacheInspector(directory: cache).entry(url)).ranges
        #expect(claimed == RangeSet([ByteRange(0, 25 << 20), ByteRange(30 << 20, length)]), "\(claimed)")
        #expect(try CacheInspector(directory: cache).verifyClaims(url, origin: body).mismatch == nil)

        let before = origin.requests("/k.mp4").count
        let again = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        var gaps = RangeSet([ByteRange(0, length)])
        for r in claimed.ranges { gaps.remove(r) }
        let second = Self.ranges(Array(origin.requests("/k.mp4")[before...]), length: length)
        // Only the gap, once (5 MiB is one piece: under two minimum pieces of 4 MiB).
        #expect(second == gaps.ranges, "\(second)")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    @Test func theMaxTimeDeadlineStopsEveryConnectionAndARerunFillsEachGap() throws {
        let origin = try TestOrigin()
        let length: Int64 = 40 << 20
        let body = TestBytes.make(Int(length), seed: 48)
        origin.setResource("/t.mp4", .init(body: body, etag: "\"t\""))
        origin.throttle("/t.mp4", to: 2 << 20)  // each response: about 2 MiB/s, so none ends in 2 s
        let url = origin.url("/t.mp4")
        let first = try VCacheBinary.run(["prefetch", url, "--connections", "4", "--max-time", "2s"], cacheDir: cache)
        #expect(first.status == 3, "\(first.stderr)")
        #expect(first.stderr.contains("stopped \(url) at the --max-time deadline: "), "\(first.stderr)")
        // Every connection's bytes that arrived are claimed, each at its own piece's start, and true.
        let claimed = try #require(try CacheInspector(directory: cache).entry(url)).ranges
        #expect(claimed.ranges.map(\.lowerBound) == [0, 10 << 20, 20 << 20, 30 << 20], "\(claimed)")
        #expect(try CacheInspector(directory: cache).verifyClaims(url, origin: body).mismatch == nil)

        origin.throttle("/t.mp4", to: nil)
        let before = origin.requests("/t.mp4").count
        let again = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        var gaps = RangeSet([ByteRange(0, length)])
        for r in claimed.ranges { gaps.remove(r) }
        let second = RangeSet(Self.ranges(Array(origin.requests("/t.mp4")[before...]), length: length))
        // (Bytes the origin had sent into a socket when the deadline came were never read: asked again.)
        #expect(second == gaps, "\(second) against the gaps \(gaps)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    @Test func aWeakETagFallsBackToOneConnectionWithALineSayingSo() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(20 << 20, seed: 45)
        origin.setResource("/w.mp4", .init(body: body, etag: "W/\"w\""))
        let url = origin.url("/w.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let notes = r.stderrLines.filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1, "\(r.stderr)")
        #expect(notes.first == "note: \(url): the origin gives no strong validator (its ETag is weak, or it sends neither ETag nor Last-Modified), so pieces fetched apart cannot be proven one version: fetched over one connection, not 4", "\(r.stderr)")
        #expect(origin.requests("/w.mp4") == ["bytes=0-"])
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
    }

    @Test func anOriginThatChangesBetweenConnectionsIsCaughtAndTheVersionDropped() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(20 << 20, seed: 46)
        // The first answer is version "a"; from the second on the origin has "b": a connection's
        // If-Range "a" gets the whole of "b" (200).
        origin.setResource("/v.mp4", .init(body: body, etag: "\"b\""))
        var faults = TestOrigin.Faults()
        faults.rotateETags = ["\"a\""] + Array(repeating: "\"b\"", count: 99)
        origin.setFaults("/v.mp4", faults)
        let url = origin.url("/v.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains(" note: \(url) changed on the origin ("), "\(r.stderr)")
        #expect(origin.headers("/v.mp4").contains { $0["if-range"] == "\"a\"" })
        let entry = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(entry.validators.etag == "\"b\"")
        #expect(entry.sha256 == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    @Test func backendsThatDisagreeOnTheETagFallBackToOneConnectionInsteadOfFailing() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(20 << 20, seed: 51)
        // Two backends behind one name, each with its own strong ETag for the same bytes (nginx's
        // mtime-size ETag on servers deployed apart), taking turns request by request: with three
        // connections besides the first, one always meets the other backend's ETag.
        origin.setResource("/lb.mp4", .init(body: body, etag: "\"a\""))
        var faults = TestOrigin.Faults()
        faults.rotateETags = ["\"a\"", "\"b\""]
        faults.ignoreIfRange = true
        origin.setFaults("/lb.mp4", faults)
        let url = origin.url("/lb.mp4")
        let r = try VCacheBinary.run(["prefetch", url, "--connections", "4"], cacheDir: cache)
        // The version is dropped once, then the video comes over one connection, as without --connections.
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderrLines.filter { $0.hasPrefix("note: \(url) changed on the origin (") }.count == 1, "\(r.stderr)")
        let entry = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(entry.sha256 == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    @Test(arguments: ["0", "abc", "65", "-1", "nan", "9223372036854775808"])
    func nonsenseConnectionCountsAreRefused(_ value: String) throws {
        let r = try VCacheBinary.run(["prefetch", "http://127.0.0.1:9/a.mp4", "--connections", value], cacheDir: cache)
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: invalid count '\(value)' for --connections; use 1 to 64\n")
    }

    @Test func jobsTimesConnectionsIsCappedAt64Transfers() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(40 << 20, seed: 50)
        origin.setResource("/j.mp4", .init(body: body, etag: "\"j\""))
        let url = origin.url("/j.mp4")
        // -j 32: at most 2 connections per video, whatever --connections asks.
        let r = try VCacheBinary.run(["prefetch", url, "-j", "32", "--connections", "8", "-q"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Set(origin.requests("/j.mp4").compactMap { $0 }) == ["bytes=0-", "bytes=20971520-41943039"])
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    /// A low `ulimit -n` with `-j 8 --connections 8`: further connections would take the sockets
    /// other videos' own transfers need (before, under `ulimit -n 32`, 3 videos of 8 failed with
    /// "Too many open files" where one connection each fetched all 8; under 48 every video's
    /// connections met it and retried). What the limit leaves is one connection per video now.
    @Test(.requires(.prlimit))
    func aLowOpenFileLimitKeepsOneConnectionPerVideoSoNoneFails() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(40 << 20, seed: 60)  // eight pieces each, were they split
        let paths = (0..<8).map { "/n\($0).mp4" }
        for (i, path) in paths.enumerated() { origin.setResource(path, .init(body: body, etag: "\"n\(i)\"")) }
        let list = dir.file("list.txt")
        try paths.map { origin.url($0) }.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.start(["--nofile=48", VCacheBinary.path, "prefetch", "-i", list, "-j", "8", "--connections", "8"],
                                       cacheDir: cache, executable: "/usr/bin/prlimit").finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("Too many open files"), "\(r.stderr)")
        for path in paths { #expect(origin.requests(path) == ["bytes=0-"], "\(path): \(origin.requests(path))") }
        let inspector = try CacheInspector(directory: cache)
        for path in paths { #expect(try inspector.entry(origin.url(path))?.sha256 == TestBytes.sha256(body)) }
    }

    /// `-j 32` under `ulimit -n 40`: the downloads at once are what the limit carries (2 here),
    /// so none fails. Before, items failed with "Too many open files" (exit 5), and now and then
    /// libdispatch ended the whole run (SIGILL: its pool monitor could not open /proc/<tid>/stat).
    @Test(.requires(.prlimit))
    func moreJobsThanTheOpenFileLimitCarriesAreLoweredSoNoneFails() throws {
        let origin = try TestOrigin()
        let paths = (0..<24).map { "/f\($0).bin" }
        let bodies = paths.indices.map { TestBytes.make(1 << 20, seed: 70 + UInt64($0)) }
        for (i, path) in paths.enumerated() { origin.setResource(path, .init(body: bodies[i], etag: "\"f\(i)\"")) }
        let list = dir.file("jobs.txt")
        try paths.map { origin.url($0) }.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        #expect(PrefetchOptions.jobs(32, descriptors: 40) == 2 && PrefetchOptions.jobs(32, descriptors: 24) == 1 && PrefetchOptions.jobs(8, descriptors: 1024) == 8)
        let r = try VCacheBinary.start(["--nofile=40:40", VCacheBinary.path, "prefetch", "-q", "-i", list, "-j", "32"],
                                       cacheDir: cache, executable: "/usr/bin/prlimit").finish()
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.status): \(r.stderr)")
        let inspector = try CacheInspector(directory: cache)
        for (i, path) in paths.enumerated() { #expect(try inspector.entry(origin.url(path))?.sha256 == TestBytes.sha256(bodies[i]), "\(path)") }
    }

    /// A `connections` value in the catalog that `config set` would have refused (written there by
    /// hand, or by another program): prefetch says so and what to do, instead of silently
    /// fetching over one connection; `--connections` on the command line overrides it.
    @Test(.requires(.python3), arguments: ["garbage", "0", "999", "3.5", ""])
    func aStoredConnectionsValueThatIsNotACountIsAnError(_ value: String) throws {
        #expect(try VCacheBinary.run(["config", "set", "connections", "2"], cacheDir: cache).status == 0)
        let edit = "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"update config set value=? where name='connections'\", (sys.argv[2],)); c.commit()"
        let made = try Tool.run("/usr/bin/python3", ["-c", edit, cache + "/catalog.db", value])
        #expect(made.status == 0, "\(made.err)")
        let origin = try TestOrigin()
        let body = TestBytes.make(16 << 20, seed: 52)
        origin.setResource("/g.mp4", .init(body: body, etag: "\"g\""))
        let url = origin.url("/g.mp4")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: invalid value '\(value)' for config connections in the cache; use a whole number from 1 to 64: 'vcache config set connections N', or 'vcache config unset connections'\n")
        #expect(origin.requests("/g.mp4").isEmpty)
        let given = try VCacheBinary.run(["prefetch", url, "--connections", "1", "-q"], cacheDir: cache)
        #expect(given.status == 0, "\(given.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["config", "unset", "connections"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", url, "-q"], cacheDir: cache).status == 0)
    }

    @Test func theConfigDefaultIsCheckedAndUsed() throws {
        let bad = try VCacheBinary.run(["config", "set", "connections", "65"], cacheDir: cache)
        #expect(bad.status == 2, "\(bad.stderr)")
        #expect(try VCacheBinary.run(["config", "set", "connections", "2"], cacheDir: cache).status == 0)
        let origin = try TestOrigin()
        let body = TestBytes.make(16 << 20, seed: 47)
        origin.setResource("/c.mp4", .init(body: body, etag: "\"c\""))
        let url = origin.url("/c.mp4")
        #expect(try VCacheBinary.run(["prefetch", url, "-q"], cacheDir: cache).status == 0)
        #expect(origin.requests("/c.mp4") == ["bytes=0-", "bytes=8388608-16777215"])
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }
}
