import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24, the cache: a stream is one thing to the user. `ls` shows one row per stream, the cap
/// and `evict --lru` take a stream whole by its most recent use, `pin` pins all of it.
@Suite struct HLSCacheTests {
    let dir = TempDirectory("vcache-hlscache")

    static func events(_ r: VCacheRun) -> [[String: Any]] {
        r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// nginx serving the fixture streams, or nil when ffmpeg is missing (the test says so).
    static func streams() throws -> Nginx? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else {
            print("skipped: ffmpeg is not installed")
            return nil
        }
        let nginx = try Nginx()
        let made = try Tool.run("/usr/bin/env", ["bash", Fixtures.path("hls/make-streams.sh"), nginx.root + "/hls"])
        #expect(made.status == 0, "\(made.err)")
        return nginx
    }

    @Test(.timeLimit(.minutes(2)))
    func aStreamIsOneRowOfLsAndOneUnitToEvictionAndPin() throws {
        guard let nginx = try Self.streams() else { return }
        let cache = dir.file("cache")
        let abr = nginx.url("/hls/abr/master.m3u8"), ts = nginx.url("/hls/ts/index.m3u8")
        let plain = try nginx.publish("plain.bin", TestBytes.make(300_000, seed: 7))
        for url in [abr, ts, plain] {
            let r = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
            #expect(r.status == 0, "\(url): \(r.stderr)")
        }
        let inspector = try CacheInspector(directory: cache)
        let all = try inspector.store.catalog.allEntries()
        let abrKeys = Set(all.filter { $0.latestURL.contains("/hls/abr/") }.map(\.key))
        let tsKeys = Set(all.filter { $0.latestURL.contains("/hls/ts/") }.map(\.key))
        // master; 180p playlist, init and 2 segments; audio playlist, init and 3 segments (AAC's boundaries).
        #expect(abrKeys.count == 10 && tsKeys.count == 3, "\(abrKeys.count) \(tsKeys.count)")

        // ls: one row per stream, its members folded.
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        #expect(ls.status == 0, "\(ls.stderr)")
        let events = Self.events(ls)
        let streams = events.filter { $0["event"] as? String == "stream" }
        #expect(streams.count == 2)
        #expect(events.filter { $0["event"] as? String == "entry" }.map { $0["url"] as? String } == [plain])
        let a = try #require(streams.first { $0["url"] as? String == abr })
        #expect(a["variants"] as? Int == 2 && a["variants_cached"] as? Int == 1, "\(a)")
        #expect(a["segments"] as? Int == 5 && a["segments_cached"] as? Int == 5, "\(a)")
        #expect(a["entries"] as? Int == 10 && a["state"] as? String == "complete", "\(a)")
        #expect(abs((a["seconds_cached"] as? Double ?? 0) - 4.0) < 0.1, "\(a)")
        let summary = try #require(events.last)
        #expect(summary["streams"] as? Int == 2 && summary["entries"] as? Int == 1, "\(summary)")
        let text = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(text.stdout.split(separator: "\n").filter { $0.contains("/hls/") }.count == 2, "\(text.stdout)")
        #expect(text.stdout.contains("HLS, 2 variants (1 cached), 1 rendition, 5/5 segments, 4.0 of 4.0 s, 10 entries"), "\(text.stdout)")
        #expect(text.stdout.contains("1 entry, 2 streams"), "\(text.stdout)")

        // The abr stream's last segment is used now: the stream is the most recently used unit,
        // though its master and first segments are the oldest entries of all.
        let segment = nginx.url("/hls/abr/180p/seg_001.m4s")
        #expect(try VCacheBinary.run(["export", segment, "/dev/null"], cacheDir: cache).status == 0)
        let measured = try VCacheBinary.run(["evict", "--dry-run", "--max-size", "1T", "--json"], cacheDir: cache)
        let usage = try #require(Self.events(measured).last?["usage_bytes"] as? Int64)
        // One byte over: the least recently used unit goes, the whole ts stream; nothing of abr.
        let evict = try VCacheBinary.run(["evict", "--lru", "--max-size", "\(usage - 1)", "--json"], cacheDir: cache)
        #expect(evict.status == 0, "\(evict.stderr)")
        let gone = Set(Self.events(evict).filter { $0["event"] as? String == "evicted" }.compactMap { $0["key"] as? String })
        #expect(gone == tsKeys, "\(evict.stdout)")
        let plainKey = try #require(all.first { $0.latestURL == plain }?.key)
        #expect(Set(try inspector.store.catalog.allEntries().map(\.key)) == abrKeys.union([plainKey]))

        // pin pins all of it: --all takes the plain video and keeps every entry of the stream.
        #expect(try VCacheBinary.run(["pin", abr], cacheDir: cache).status == 0)
        let rest = try inspector.store.catalog.allEntries()
        #expect(rest.filter { abrKeys.contains($0.key) }.allSatisfy(\.pinned) && rest.filter(\.pinned).count == 10)
        let evictAll = try VCacheBinary.run(["evict", "--all"], cacheDir: cache)
        #expect(evictAll.status == 0, "\(evictAll.stderr)")
        #expect(Set(try inspector.store.catalog.allEntries().map(\.key)) == abrKeys)
        // Named, the root takes its stream with it (pinned: a name says so).
        #expect(try VCacheBinary.run(["evict", abr], cacheDir: cache).status == 0)
        #expect(try inspector.store.catalog.allEntries().isEmpty)
        #expect(try inspector.store.catalog.streams().isEmpty)
    }
}
