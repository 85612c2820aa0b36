import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A master's media playlist handled on its own (Docs/hls.md, "The stream in the cache"): given
/// by its own URL it is a stream root for that run, asked for again when partly cached (F6);
/// evicted, or dropped by `verify --fix`, it takes the members only it named, and the master's
/// stream is partial (F7). Served by TestOrigin, whose encode changes between runs.
@Suite struct HLSMemberPlaylistTests {
    let dir = TempDirectory("vcache-hlsmember")

    /// A master naming the variants `a.m3u8` (320x180) and `b.m3u8` (640x360), each a VOD
    /// playlist of four 2 s segments `a/SEED-N.ts`, `b/SEED-N.ts` of `seed`'s own MPEG-TS bytes
    /// (a re-encode names new files). Returns the media playlists' text and each segment's bytes.
    @discardableResult
    static func encode(_ origin: TestOrigin, seed: UInt64) -> (playlists: [String: String], segments: [String: Data]) {
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\na.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=640x360\nb.m3u8\n"
        origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"m\"", contentType: "application/vnd.apple.mpegurl"))
        var playlists: [String: String] = [:], segments: [String: Data] = [:]
        for (v, salt) in [("a", UInt64(0)), ("b", UInt64(100))] {
            var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            for n in 0..<4 {
                let path = "/h/\(v)/\(seed)-\(n).ts"
                media += "#EXTINF:2.0,\n\(v)/\(seed)-\(n).ts\n"
                segments[path] = HLSHostileOriginTests.ts(20, seed: seed &+ salt &+ UInt64(n))
                origin.setResource(path, .init(body: segments[path]!, etag: "\"\(seed)-\(v)\(n)\"", contentType: "video/mp2t"))
            }
            media += "#EXT-X-ENDLIST\n"
            playlists["/h/\(v).m3u8"] = media
            origin.setResource("/h/\(v).m3u8", .init(body: Data(media.utf8), etag: "\"\(v)\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
        }
        return (playlists, segments)
    }

    func run(_ args: [String], _ cache: String) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    /// The cached bytes of `url`'s entry, hashed; nil when it is not cached whole.
    static func cachedSHA(_ url: String, _ cache: String) throws -> String? {
        let store = try CacheStore(directory: cache, readOnly: true)
        guard let e = try CacheInspector(directory: cache).entry(url), e.isComplete, let length = e.length else { return nil }
        return store.cachedBytes(of: e, at: 0, count: length).map { TestBytes.sha256(Data($0)) }
    }

    /// `ls --json`'s stream event of the master.
    func masterState(_ origin: TestOrigin, _ cache: String) throws -> String? {
        let events = HLSCacheTests.events(try run(["ls", "--json"], cache)).filter { $0["event"] as? String == "stream" }
        return events.first { $0["url"] as? String == origin.url("/h/master.m3u8") }?["state"] as? String
    }

    /// Every segment the cached media playlist `path` names is cached with the bytes of the
    /// version it names, and nothing of `gone` is cached.
    func expectCachedAsNamed(_ path: String, _ version: (playlists: [String: String], segments: [String: Data]), gone: [String],
                             _ origin: TestOrigin, _ cache: String) throws {
        #expect(try Self.cachedSHA(origin.url(path), cache) == TestBytes.sha256(Data(version.playlists[path]!.utf8)), "\(path)")
        for (p, body) in version.segments where p.hasPrefix(String(path.dropLast(5)) + "/") {
            #expect(try Self.cachedSHA(origin.url(p), cache) == TestBytes.sha256(body), "\(p)")
        }
        for p in gone { #expect(try CacheInspector(directory: cache).entry(origin.url(p)) == nil, "\(p)") }
    }

    /// F6: the master's stream is warmed for 2 s, the origin re-encodes, and the 320x180 media
    /// playlist is prefetched by its own URL. It is asked for again (before: not asked, its old
    /// segments completed under the old playlist, or 404 once the origin removed them), the old
    /// segment cached goes, the stream is completed from the new playlist, and the master's
    /// stream says partial until its master is asked again by the next run of the master.
    @Test
    func aMediaPlaylistGivenByItsOwnURLIsAskedAgainAndCompletedFromItsNewVersion() throws {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8"), media = origin.url("/h/a.m3u8")
        #expect(try run(["prefetch", "-q", "--seconds", "2", "--variant", "worst", master], cache).status == 0)
        #expect(try Self.cachedSHA(origin.url("/h/a/1-0.ts"), cache) == TestBytes.sha256(old.segments["/h/a/1-0.ts"]!))
        let new = Self.encode(origin, seed: 50)
        let before = origin.headers("/h/a.m3u8").count
        let r = try run(["prefetch", media, "--progress", "none"], cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderrLines.contains("note: \(media): its manifest changed on the origin since the stream was partly cached: the stream is completed from the new one; the 1 entry cached from the old one was dropped"), "\(r.stderr)")
        #expect(r.stderrLines.contains("note: \(media): it is a member of the stream of \(master), whose master is asked for again by its next run: a member of it changed on the origin"), "\(r.stderr)")
        // Asked with the old copy's validators as the run began (and again at its end, with the new's).
        #expect(origin.headers("/h/a.m3u8").dropFirst(before).first?["if-none-match"] == "\"a1\"")
        try expectCachedAsNamed("/h/a.m3u8", new, gone: (0..<4).map { "/h/a/1-\($0).ts" }, origin, cache)
        #expect(try masterState(origin, cache) == "partial")
        // The master's next run asks for it again (unchanged: 304), and the stream is whole; it
        // asks once more at its end, having fetched members (Prefetcher+EndCheck.swift).
        let asked = origin.requests("/h/master.m3u8").count
        let again = try run(["prefetch", "-q", "--variant", "worst", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/h/master.m3u8").count == asked + 2)
        #expect(try masterState(origin, cache) == "complete")
        let rerun = origin.requests("/h/master.m3u8").count
        #expect(try run(["prefetch", "-q", "--variant", "worst", master], cache).status == 0)
        #expect(origin.requests("/h/master.m3u8").count == rerun)
        #expect(try run(["verify"], cache).status == 0)
    }

    /// F6, the lock: a run of the media playlist given by its own URL waits for a run of its
    /// master completing the stream (with --no-wait it skips it, exit 3) instead of reading the
    /// playlist the master's run is replacing (before: it took no lock and went on).
    @Test
    func aMediaPlaylistGivenByItsOwnURLWaitsForItsMastersRun() throws {
        let origin = try TestOrigin()
        Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8"), media = origin.url("/h/a.m3u8")
        #expect(try run(["prefetch", "-q", "--seconds", "2", "--variant", "worst", master], cache).status == 0)
        let new = Self.encode(origin, seed: 50)
        origin.hold("/h/a/50-3.ts", at: 10)
        let first = try VCacheBinary.start(["prefetch", "-q", "-j", "1", "--variant", "worst", master], cacheDir: cache)
        #expect(origin.waitUntilHeld("/h/a/50-3.ts"))
        let skipped = try run(["prefetch", "--no-wait", media], cache)
        #expect(skipped.status == 3, "\(skipped.stderr)")
        #expect(skipped.stderrLines.contains("vcache: cannot prefetch \(media): another vcache process is completing this stream; skipped (--no-wait)"), "\(skipped.stderr)")
        origin.release("/h/a/50-3.ts")
        let r1 = first.finish()
        #expect(r1.status == 0, "\(r1.stderr)")
        let again = try run(["prefetch", "-q", media], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectCachedAsNamed("/h/a.m3u8", new, gone: (0..<4).map { "/h/a/1-\($0).ts" }, origin, cache)
        #expect(try masterState(origin, cache) == "complete")
    }

    /// F7: `evict` of a media playlist takes the segments only it named (before: they stayed,
    /// and the master's stream said complete with the variant gone); the other variant stays
    /// whole, and the master's stream is partial, so its next run asks for its master again and
    /// fetches the variant from the playlist the origin serves now.
    @Test
    func evictingAMediaPlaylistTakesWhatOnlyItNamed() throws {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8"), media = origin.url("/h/a.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try masterState(origin, cache) == "complete")
        let ev = try run(["evict", media], cache)
        #expect(ev.status == 0, "\(ev.stderr)")
        #expect(ev.stdout.contains("evicted 5 entries"), "\(ev.stdout)")
        for n in 0..<4 { #expect(ev.stdout.contains(origin.url("/h/a/1-\(n).ts")), "\(ev.stdout)") }
        try expectCachedAsNamed("/h/b.m3u8", old, gone: ["/h/a.m3u8"] + (0..<4).map { "/h/a/1-\($0).ts" }, origin, cache)
        #expect(try masterState(origin, cache) == "partial")
        let check = try run(["check", master, "--variant", "all"], cache)
        #expect(check.status == 1, "\(check.stdout)")
        let new = Self.encode(origin, seed: 50)
        let again = try run(["prefetch", "-q", "--variant", "worst", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectCachedAsNamed("/h/a.m3u8", new, gone: [], origin, cache)
        #expect(try run(["verify"], cache).status == 0)
    }

    /// F7 for `verify --fix`: a damaged media playlist is dropped with the segments only it named
    /// (before: they stayed, named by no cached playlist), each said; the master's stream is
    /// partial, and the other variant stays whole.
    @Test
    func verifyFixDroppingAMediaPlaylistTakesWhatOnlyItNamed() throws {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8"), media = origin.url("/h/a.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let path = inspector.store.dataPath(try #require(try inspector.entry(media)).key)
        let fh = try #require(FileHandle(forUpdatingAtPath: path))
        try fh.seek(toOffset: 20)
        try fh.write(contentsOf: Data("X".utf8))
        try fh.close()
        let fixed = try run(["verify", "--fix"], cache)
        #expect(fixed.status == 1, "\(fixed.stdout)")
        #expect(fixed.stdout.contains("fixed  \(media)"), "\(fixed.stdout)")
        for n in 0..<4 {
            let seg = origin.url("/h/a/1-\(n).ts")
            let detail = "the media playlist naming it was dropped (\(media)), and no cached playlist names it: nothing says which version it is; -> dropped it; 'vcache prefetch \(master)' fetches it again"
            let row = fixed.stdout.split(separator: "\n").first { $0.hasPrefix("fixed  \(seg) ") }
            #expect(row.map { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(2).joined(separator: " ") } == detail, "\(fixed.stdout)")
        }
        try expectCachedAsNamed("/h/b.m3u8", old, gone: (0..<4).map { "/h/a/1-\($0).ts" }, origin, cache)
        #expect(try masterState(origin, cache) == "partial")
        #expect(try run(["verify"], cache).status == 0)
    }
}
