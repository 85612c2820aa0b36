import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A stream and the size cap (Docs/hls.md, "Eviction"): the stream serve plays is in use as a
/// whole, and prefetch decides before evicting whether a stream can fit at all.
@Suite struct HLSCapTests {
    let dir = TempDirectory("vcache-hlscap")

    static func usage(_ cache: String) throws -> Int64 {
        let r = try VCacheBinary.run(["evict", "--dry-run", "--max-size", "1T", "--json"], cacheDir: cache)
        return try #require(HLSCacheTests.events(r).last?["usage_bytes"] as? Int64)
    }

    /// serve --max-size with room for part of the stream being played: an older video goes to
    /// make room, never a member of the stream being played (its segments were eaten one by one
    /// to store the next, its master first); what does not fit streams through unstored.
    @Test(.requires(.nginx, .streamTools))
    func serveNeverEvictsTheStreamItPlaysToStoreItsNextSegment() throws {
        let nginx = try HLSCacheTests.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8")
        let plain = try nginx.publish("plain.bin", TestBytes.make(100_000, seed: 9))
        #expect(try VCacheBinary.run(["prefetch", "-q", plain], cacheDir: cache).status == 0)
        // Room for the plain video and about half the stream (both variants and the audio: 300 KB).
        let cap = try Self.usage(cache) + 150_000
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--max-size", "\(cap)"])
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(master), "-map", "0", "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        let left = try inspector.store.catalog.allEntries()
        #expect(!left.contains { $0.latestURL == plain }, "the older video goes first")
        let stream = try #require(try inspector.store.catalog.streams().first, "the played stream is kept")
        #expect(try inspector.entry(master) != nil)
        // Nothing of the stream was evicted for the stream: every entry left is its member (none
        // left as an entry of no stream once its master went).
        #expect(left.allSatisfy { stream.keys.contains($0.key) }, "\(left.map(\.latestURL))")
        #expect(left.contains { $0.latestURL.hasSuffix(".m4s") }, "some segments fit and were stored")
        #expect(try Self.usage(cache) <= cap)
        let problems = try inspector.consistencyProblems()
        #expect(problems.isEmpty, "\(problems)")
    }

    /// prefetch --max-size of a stream that cannot fit even in an empty cache: decided before
    /// anything is evicted for it (complete streams and videos were evicted, then the stream
    /// failed anyway), said in one line, exit 5. What is judged is what was asked: its first
    /// seconds, which fit once the older stream goes, are fetched.
    @Test(.requires(.nginx, .streamTools))
    func aStreamThatCannotFitEvictsNothingAndSaysSoInOneLine() throws {
        let nginx = try HLSCacheTests.streams()
        let cache = dir.file("cache")
        let abr = nginx.url("/hls/abr/master.m3u8"), ts = nginx.url("/hls/ts/index.m3u8")
        // A complete stream of about 100 KB.
        #expect(try VCacheBinary.run(["prefetch", "-q", abr, "--variant", "worst"], cacheDir: cache).status == 0)
        let before = try CacheInspector(directory: cache).store.catalog.allEntries().map(\.key)
        // Room for it and 150 KB more; the ts stream is 376 KB, its first segment 178 KB.
        let cap = try Self.usage(cache) + 150_000
        let r = try VCacheBinary.run(["prefetch", ts, "--max-size", "\(cap)"], cacheDir: cache)
        #expect(r.status == 5, "\(r.stderr)")
        let failures = r.stderr.split(separator: "\n").filter { $0.contains("cannot prefetch") }
        #expect(failures.count == 1 && failures[0].contains("vcache: cannot prefetch \(ts): needs about ")
                && failures[0].hasSuffix(", more than --max-size \(Units.formatSize(cap)) holds even in an empty cache; nothing was evicted for it: raise the cap, or ask for less (--seconds N)"), "\(r.stderr)")
        #expect(!r.stderr.contains("to make room"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).store.catalog.allEntries().map(\.key).sorted() == before.sorted())
        #expect(try CacheInspector(directory: cache).consistencyProblems() == [])
        // Its first 2 seconds fit an empty cache: the older stream goes for them.
        let short = try VCacheBinary.run(["prefetch", ts, "--seconds", "2", "--max-size", "\(cap)"], cacheDir: cache)
        #expect(short.status == 0 && short.stderr.contains("to make room"), "\(short.stderr)")
        #expect(try CacheInspector(directory: cache).entry(nginx.url("/hls/ts/seg_000.ts"))?.isComplete == true)
        #expect(try Self.usage(cache) <= cap)
    }
    /// A stream refused for the cap gives back what the run stored of it, but not a member the
    /// user pinned meanwhile from another process: the pin wins (before: the give-back named
    /// it, and a named entry went even pinned).
    @Test func aMemberPinnedDuringTheRunStaysWhenItsStreamIsRefused() throws {
        let origin = try TestOrigin()
        var packet = Data(repeating: 0xff, count: 188)
        packet[0] = 0x47
        packet[1] = 0x00
        packet[3] = 0x10
        func segment(_ packets: Int) -> Data { Data((0..<packets).flatMap { _ in packet }) }
        origin.setResource("/s/seg_0.ts", .init(body: segment(100), etag: "\"0\"", contentType: "video/mp2t"))
        origin.setResource("/s/seg_1.ts", .init(body: segment(100), etag: "\"1\"", contentType: "video/mp2t"))
        origin.setResource("/s/seg_2.ts", .init(body: segment(12_000), etag: "\"2\"", contentType: "video/mp2t"))
        let playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n" + (0..<3).map { "#EXTINF:2.0,\nseg_\($0).ts\n" }.joined() + "#EXT-X-ENDLIST\n"
        origin.setResource("/s/index.m3u8", .init(body: Data(playlist.utf8), etag: "\"p\"", contentType: "application/vnd.apple.mpegurl"))
        let cache = dir.file("cache")
        let url = origin.url("/s/index.m3u8"), first = origin.url("/s/seg_0.ts")
        origin.hold("/s/seg_1.ts", at: 1000)
        let running = try VCacheBinary.start(["prefetch", url, "-j", "1", "--max-size", "1M", "--progress", "none"], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/seg_1.ts"))
        // seg_0 is stored (-j 1: it ended before seg_1 began); another process pins it.
        #expect(try VCacheBinary.run(["pin", first], cacheDir: cache).status == 0)
        origin.release("/s/seg_1.ts")
        let r = running.finish()
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): needs about "), "\(r.stderr)")
        let left = try CacheInspector(directory: cache).store.catalog.allEntries()
        #expect(left.map(\.latestURL) == [first], "\(left.map(\.latestURL))")
        #expect(left.first?.pinned == true && left.first?.isComplete == true)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}
