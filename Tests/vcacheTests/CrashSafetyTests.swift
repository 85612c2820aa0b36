import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Invariant 1 and 4 with real processes: kill -9 at random moments, Ctrl-C, and two writers at once.
@Suite struct CrashSafetyTests {
    let dir = TempDirectory("vcache-crash")
    var cache: String { dir.file("cache") }

    @Test func sigkillAtRandomMomentsLeavesATrueCatalogAndAResumeCompletesByteExact() throws {
        let origin = try TestOrigin()
        let total = 64 << 20
        let body = TestBytes.make(total, seed: 64)
        origin.setResource("/big.mp4", .init(body: body, etag: "\"big\""))
        origin.throttle("/big.mp4", to: 24 << 20)
        let url = origin.url("/big.mp4")

        var kills = 0
        var lastClaimed: Int64 = 0
        for _ in 0..<4 {
            let already = origin.servedBytes("/big.mp4")
            let running = try VCacheBinary.start(["prefetch", url, "-q"], cacheDir: cache)
            // Kill once the origin has sent a random further amount: a real event, not a timer.
            let target = already + Int.random(in: (1 << 20)...(10 << 20))
            guard origin.waitUntilServed("/big.mp4", atLeast: target, timeout: 60) else { break }
            running.kill(SIGKILL)
            let r = running.finish()
            #expect(r.signalled && r.status == SIGKILL)
            kills += 1
            let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
            #expect(claims.mismatch == nil, "after kill \(kills) the catalog claims bytes that differ from the origin")
            #expect(claims.claimed >= lastClaimed)
            lastClaimed = claims.claimed
        }
        #expect(kills == 4)

        origin.throttle("/big.mp4", to: nil)
        let resume = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(resume.status == 0)
        let entry = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(entry.sha256 == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        // Each kill loses at most about one checkpoint window (4 MiB or 1 s) plus what was in flight.
        #expect(origin.bytesServedTwice("/big.mp4") <= Int64(kills) * (24 << 20 + 4 << 20))
    }

    @Test func sigintCheckpointsThenDiesBySIGINTAndTheRerunFetchesOnlyTheRest() throws {
        let origin = try TestOrigin()
        let total = 16 << 20
        let body = TestBytes.make(total, seed: 5)
        origin.setResource("/i.mp4", .init(body: body, etag: "\"i\""))
        origin.throttle("/i.mp4", to: 8 << 20)
        let url = origin.url("/i.mp4")

        let running = try VCacheBinary.start(["prefetch", url], cacheDir: cache)
        #expect(origin.waitUntilServed("/i.mp4", atLeast: 3 << 20))
        running.kill(SIGINT)
        let r = running.finish()
        // It dies by the signal itself (the shell shows 130), so a shell loop stops on Ctrl-C.
        #expect(r.signalled && r.status == SIGINT)
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): interrupted; what arrived is saved and a rerun resumes"))
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed >= 3 << 20)

        origin.throttle("/i.mp4", to: nil)
        let rerun = try VCacheBinary.run(["prefetch", url, "--json"], cacheDir: cache)
        #expect(rerun.status == 0)
        let done = rerun.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "done" }
        #expect(done?["fetched"] as? Int64 == Int64(total) - claims.claimed)
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    @Test func sigtermDiesByTheSignalAfterTheCheckpoint() throws {
        let origin = try TestOrigin()
        origin.setResource("/t.mp4", .init(body: TestBytes.make(8 << 20, seed: 9)))
        origin.throttle("/t.mp4", to: 2 << 20)
        let running = try VCacheBinary.start(["prefetch", origin.url("/t.mp4"), "-q"], cacheDir: cache)
        #expect(origin.waitUntilServed("/t.mp4", atLeast: 1 << 20))
        running.kill(SIGTERM)
        let r = running.finish()
        #expect(r.signalled && r.status == SIGTERM)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/t.mp4"))?.cachedBytes ?? 0 >= Int64(512 << 10))
    }

    @Test func twoPrefetchesOfTheSameURLServeEachByteOnceAndEndByteExact() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(8 << 20, seed: 21)
        origin.setResource("/same.mp4", .init(body: body, etag: "\"s\""))
        origin.throttle("/same.mp4", to: 4 << 20)  // slow enough that the second run starts mid-way, even on a loaded machine
        let url = origin.url("/same.mp4")

        let a = try VCacheBinary.start(["prefetch", url], cacheDir: cache)
        #expect(origin.waitUntilServed("/same.mp4", atLeast: 1 << 20))
        let b = try VCacheBinary.start(["prefetch", url], cacheDir: cache)
        let ra = a.finish(), rb = b.finish()
        #expect(ra.status == 0)
        #expect(rb.status == 0)
        #expect(rb.stderr.contains("waiting: another vcache process is writing \(url)"))
        #expect(origin.bytesServedTwice("/same.mp4") == 0)
        #expect(origin.servedBytes("/same.mp4") == body.count)
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }
}
