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
    @Test(.timeLimit(.minutes(6)))
    func serveNeverEvictsTheStreamItPlaysToStoreItsNextSegment() throws {
        guard let nginx = try HLSCacheTests.streams() else { return }
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
        #expect(try inspector.consistencyProblems() == [])
    }
}
