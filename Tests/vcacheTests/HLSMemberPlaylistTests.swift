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

    /// A new choice of a stream complete for another, after a re-encode that kept the master
    /// byte for byte (hostile probe h9b, F4): the master answers 304, so its cached media
    /// playlists are asked again too; the one found changed takes what it named, so the variant
    /// this run chose (of the new encode) is never completed beside the old encode's (before:
    /// `a.m3u8` and its segments of the old encode stayed, the stream complete, a mix).
    @Test
    func aNewChoiceUnderAnUnchangedMasterAsksItsCachedMediaPlaylistsToo() throws {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "worst", master], cache).status == 0)
        let new = Self.encode(origin, seed: 50)
        let r = try run(["prefetch", "--variant", "best", master, "--progress", "none"], cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(origin.headers("/h/a.m3u8").contains { $0["if-none-match"] == "\"a1\"" }, "the cached a.m3u8 was not asked again")
        try expectCachedAsNamed("/h/b.m3u8", new, gone: [], origin, cache)
        for p in old.segments.keys { #expect(try CacheInspector(directory: cache).entry(origin.url(p)) == nil, "\(p) of the old encode stayed") }
        if try Self.cachedSHA(origin.url("/h/a.m3u8"), cache) != nil { try expectCachedAsNamed("/h/a.m3u8", new, gone: [], origin, cache) }
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
        #expect(r.stderrLines.contains("note: \(media): it is a member of the stream of \(master): a member of it changed on the origin, so what that stream's other playlists named went too (it may be of the old encode), and its master is asked for again by its next run"), "\(r.stderr)")
        // (Asked conditionally; asked once more at the run's end, under its new validators.)
        #expect(origin.headers("/h/a.m3u8").dropFirst(before).first?["if-none-match"] == "\"a1\"")
        try expectCachedAsNamed("/h/a.m3u8", new, gone: (0..<4).map { "/h/a/1-\($0).ts" }, origin, cache)
        #expect(try masterState(origin, cache) == "partial")
        // The master's next run asks for it again (unchanged: 304), and the stream is whole (it
        // fetches no member: what the worst variant needs is cached, so no end check either).
        let asked = origin.requests("/h/master.m3u8").count
        let again = try run(["prefetch", "-q", "--variant", "worst", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/h/master.m3u8").count == asked + 1)
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

    // MARK: - The invariant across a master's playlists (hostile probe h9a)

    /// A master `/s/master.m3u8` naming `a.m3u8` and `alt.m3u8` (the same three segments
    /// `seg-N.ts`, alt starting at 0) and `b.m3u8` (`b-N.ts`). A re-encode keeps every name and
    /// changes the bytes (and adds EXT-X-INDEPENDENT-SEGMENTS to each media playlist); the master
    /// stays byte for byte (304).
    @discardableResult
    static func encodeShared(_ origin: TestOrigin, seed: UInt64) -> (playlists: [String: String], segments: [String: Data]) {
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\na.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=110000\nalt.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=300000\nb.m3u8\n"
        origin.setResource("/s/master.m3u8", .init(body: Data(master.utf8), etag: "\"m\"", contentType: "application/vnd.apple.mpegurl"))
        var playlists: [String: String] = [:], segments: [String: Data] = [:]
        for (name, prefix, extra) in [("a", "seg", ""), ("alt", "seg", "#EXT-X-START:TIME-OFFSET=0\n"), ("b", "b", "")] {
            var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n" + extra
            if seed != 1 { media += "#EXT-X-INDEPENDENT-SEGMENTS\n" }
            for n in 0..<3 {
                let path = "/s/\(prefix)-\(n).ts"
                media += "#EXTINF:2.0,\n\(prefix)-\(n).ts\n"
                segments[path] = HLSHostileOriginTests.ts(20, seed: seed &* 1000 &+ (prefix == "b" ? 100 : 0) &+ UInt64(n))
                origin.setResource(path, .init(body: segments[path]!, etag: "\"\(seed)-\(prefix)\(n)\"", contentType: "video/mp2t"))
            }
            media += "#EXT-X-ENDLIST\n"
            playlists["/s/\(name).m3u8"] = media
            origin.setResource("/s/\(name).m3u8", .init(body: Data(media.utf8), etag: "\"\(name)\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
        }
        return (playlists, segments)
    }

    /// Every playlist and segment of `version` is cached with its bytes (none of another
    /// encode), the master's stream is complete, `verify` finds nothing, and every file an
    /// export of the master writes is the master or one of `version`'s files.
    func expectWhole(_ version: (playlists: [String: String], segments: [String: Data]), master: String, _ origin: TestOrigin, _ cache: String) throws {
        for (p, text) in version.playlists { #expect(try Self.cachedSHA(origin.url(p), cache) == TestBytes.sha256(Data(text.utf8)), "\(p)") }
        for (p, body) in version.segments { #expect(try Self.cachedSHA(origin.url(p), cache) == TestBytes.sha256(body), "\(p)") }
        let events = HLSCacheTests.events(try run(["ls", "--json"], cache)).filter { $0["event"] as? String == "stream" }
        #expect(events.first { $0["url"] as? String == origin.url(master) }?["state"] as? String == "complete")
        #expect(try run(["verify"], cache).status == 0)
        let out = dir.file("export-\(UUID().uuidString)")
        let ex = try run(["export", origin.url(master), out], cache)
        #expect(ex.status == 0, "\(ex.stderr)")
        let allowed = Set(version.segments.values.map { TestBytes.sha256($0) } + version.playlists.values.map { TestBytes.sha256(Data($0.utf8)) })
        var segmentsSeen = 0
        for case let f as String in FileManager.default.enumerator(atPath: out)! where f.hasSuffix(".ts") {
            let data = try Data(contentsOf: URL(fileURLWithPath: out + "/" + f))
            #expect(allowed.contains(TestBytes.sha256(data)), "exported \(f) is of another encode")
            segmentsSeen += 1
        }
        #expect(segmentsSeen >= 6)
    }

    /// F6: two media playlists name the same segments; after a re-encode, `prefetch a.m3u8` by
    /// its own URL finds it changed, and everything else the master's stream held goes with the
    /// old segments (alt.m3u8, b.m3u8 and b's segments), the master marked; the master's next run
    /// fetches them all from the new encode. Before: alt.m3u8 stayed at the old encode over the
    /// refetched new segments, and the master's run called the stream complete (exported mixed).
    @Test
    func aChangedMediaPlaylistTakesEveryMemberOfItsMastersStream() throws {
        let origin = try TestOrigin()
        Self.encodeShared(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/s/master.m3u8"), media = origin.url("/s/a.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let new = Self.encodeShared(origin, seed: 2)
        #expect(try run(["evict", origin.url("/s/seg-1.ts")], cache).status == 0)
        let r = try run(["prefetch", media, "--progress", "none"], cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderrLines.contains("note: \(media): it is a member of the stream of \(master): a member of it changed on the origin, so what that stream's other playlists named went too (it may be of the old encode), and its master is asked for again by its next run"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/alt.m3u8"))?.isComplete != true)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/b-0.ts")) == nil)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectWhole(new, master: "/s/master.m3u8", origin, cache)
    }

    /// F11: `evict a.m3u8` keeps the segments alt.m3u8 names; after a re-encode the master's next
    /// run asks alt.m3u8 again too, finds it changed, and drops the shared segments before
    /// fetching a.m3u8 anew. Before: only the master was asked (304), a.m3u8 was fetched from
    /// the new encode and completed with the old shared segments.
    @Test
    func aMasterMarkedByAnEvictedPlaylistAsksItsOtherPlaylistsAgain() throws {
        let origin = try TestOrigin()
        Self.encodeShared(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/s/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let ev = try run(["evict", origin.url("/s/a.m3u8")], cache)
        #expect(ev.status == 0, "\(ev.stderr)")
        #expect(ev.stdout.contains("evicted 1 entry"), "\(ev.stdout)")
        let new = Self.encodeShared(origin, seed: 2)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.headers("/s/alt.m3u8").contains { $0["if-none-match"] == "\"alt1\"" })
        try expectWhole(new, master: "/s/master.m3u8", origin, cache)
    }

    /// F2: a master marked (its media playlist a.m3u8 evicted) answering 304 no longer clears
    /// the mark alone: b.m3u8, cached, is asked again, found re-encoded, and fetched from the new
    /// encode with a. The common case costs one conditional request per cached playlist: a
    /// stream partial for an evicted segment, nothing changed, asks each playlist once (304)
    /// and fetches only that segment.
    @Test
    func aMarkedMasterAnswering304AsksItsCachedPlaylistsAgain() throws {
        let origin = try TestOrigin()
        Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try run(["evict", origin.url("/h/a/1-2.ts")], cache).status == 0)
        let before = ["/h/master.m3u8", "/h/a.m3u8", "/h/b.m3u8", "/h/a/1-0.ts", "/h/a/1-2.ts", "/h/b/1-0.ts"].map { origin.requests($0).count }
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let after = ["/h/master.m3u8", "/h/a.m3u8", "/h/b.m3u8", "/h/a/1-0.ts", "/h/a/1-2.ts", "/h/b/1-0.ts"].map { origin.requests($0).count }
        // (The master and a.m3u8 once more at the run's end: it fetched a member under them.)
        #expect(zip(after, before).map { $0 - $1 } == [2, 2, 1, 0, 1, 0])
        #expect(origin.headers("/h/b.m3u8").last?["if-none-match"] == "\"b1\"")
        #expect(try run(["evict", origin.url("/h/a.m3u8")], cache).status == 0)
        let new = Self.encode(origin, seed: 50)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectWhole(new, master: "/h/master.m3u8", origin, cache)
        for p in (0..<4).map({ "/h/b/1-\($0).ts" }) { #expect(try CacheInspector(directory: cache).entry(origin.url(p)) == nil, "\(p)") }
    }

    /// F5: `evict a.m3u8` killed after its rows went: its master was marked first, so the stream
    /// is partial, and the next run asks the master and its playlists again and completes it
    /// from the new encode. Before: the mark came after the deletes, the stream said complete
    /// and the master was never asked again.
    @Test
    func anEvictKilledAfterItsDeletesLeavesTheMasterMarked() throws {
        let origin = try TestOrigin()
        Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let pause = PausePoint("evict-after-delete", in: dir)
        let ev = try VCacheBinary.start(["evict", origin.url("/h/a.m3u8")], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        ev.kill(SIGKILL)
        _ = ev.finish()
        #expect(try masterState(origin, cache) == "partial")
        let new = Self.encode(origin, seed: 50)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectWhole(new, master: "/h/master.m3u8", origin, cache)
    }

    /// F10: `verify --fix` killed after it dropped the damaged b.m3u8 and before it dropped b's
    /// segments: the master's next run (after a re-encode keeping the names) drops those
    /// segments, named by no cached playlist, before it fetches b.m3u8 anew. Before: they were
    /// taken as cached and completed the new playlist with the old encode.
    @Test
    func aVerifyFixKilledBeforeDroppingTheSegmentsLeavesNothingToMix() throws {
        let origin = try TestOrigin()
        Self.encodeShared(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/s/master.m3u8"), media = origin.url("/s/b.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let path = inspector.store.dataPath(try #require(try inspector.entry(media)).key)
        let fh = try #require(FileHandle(forUpdatingAtPath: path))
        try fh.seek(toOffset: 20)
        try fh.write(contentsOf: Data("X".utf8))
        try fh.close()
        let pause = PausePoint("evict-before-delete", in: dir)
        let fix = try VCacheBinary.start(["verify", "--fix"], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        fix.kill(SIGKILL)
        _ = fix.finish()
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/b-0.ts"))?.isComplete == true)
        let new = Self.encodeShared(origin, seed: 2)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        try expectWhole(new, master: "/s/master.m3u8", origin, cache)
    }

    /// F1: a master marked while every member is cached (a.m3u8 evicted, then fetched again by
    /// its own URL) is partial to `check` and `info` as to `ls`: `check` says missing, exit 1;
    /// `info` says why (no `manifest-to-asks` row), its JSON root member keeps the role
    /// `manifest` with `ask_again`. The master's next run clears it.
    @Test
    func aMarkedMasterIsPartialToCheckAndInfo() throws {
        let origin = try TestOrigin()
        Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try run(["evict", origin.url("/h/a.m3u8")], cache).status == 0)
        #expect(try run(["prefetch", "-q", origin.url("/h/a.m3u8")], cache).status == 0)
        #expect(try masterState(origin, cache) == "partial")
        let check = try run(["check", "--variant", "all", master], cache)
        #expect(check.status == 1, "\(check.stdout)")
        #expect(check.stdout.split(separator: "\n").dropFirst().first.map(String.init) == "missing  \(master)  a media playlist of its stream changed on the origin, was evicted or dropped by 'verify --fix': prefetch asks for the master again before the stream is cached whole", "\(check.stdout)")
        let info = try run(["info", master], cache)
        #expect(info.stdout.contains("state          partial; its master is asked for again by the next prefetch (a media playlist of it changed on the origin, was evicted or dropped by verify --fix)\n"), "\(info.stdout)")
        #expect(!info.stdout.contains("manifest-to-ask"), "\(info.stdout)")
        let json = HLSCacheTests.events(try run(["info", "--json", master], cache)).first { $0["event"] as? String == "stream" }
        let root = (json?["members"] as? [[String: Any]])?.first
        #expect(root?["role"] as? String == "manifest")
        #expect(root?["ask_again"] as? Bool == true)
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try run(["check", "--variant", "all", master], cache).status == 0)
        #expect(try masterState(origin, cache) == "complete")
    }

    /// An AES-128 master: `lo/index.m3u8` and `hi/index.m3u8` both name `../enc.key`, one key
    /// for the stream. Encode `seed` (1: testsrc2, else smptebars) has its own key and IV, the same
    /// file names; made with ffmpeg in `dir`, served by `origin`. Returns the files by path.
    static func encodeAES(_ origin: TestOrigin, seed: Int, in dir: TempDirectory) throws -> [String: Data] {
        let base = dir.file("aes\(seed)")
        var files: [String: Data] = [:]
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let key = Data((0..<16).map { UInt8(($0 * 7 + seed * 31) & 0xff) })
        try key.write(to: URL(fileURLWithPath: base + "/enc.key"))
        let iv = String(repeating: String(format: "%02x", seed), count: 16)
        try Data("../enc.key\n\(base)/enc.key\n\(iv)\n".utf8).write(to: URL(fileURLWithPath: base + "/ki"))
        files["/k/enc.key"] = key
        for (v, size) in [("lo", "160x90"), ("hi", "320x180")] {
            try FileManager.default.createDirectory(atPath: base + "/" + v, withIntermediateDirectories: true)
            let source = (seed == 1 ? "testsrc2" : "smptebars") + "=size=\(size):rate=10"
            let made = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", source, "-t", "3", "-c:v", "mpeg2video", "-g", "10",
                                                       "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_key_info_file", base + "/ki",
                                                       "-hls_segment_filename", base + "/\(v)/s%02d.ts", base + "/\(v)/index.m3u8"])
            guard made.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: made.err]) }
            for name in try FileManager.default.contentsOfDirectory(atPath: base + "/" + v) {
                files["/k/\(v)/\(name)"] = try Data(contentsOf: URL(fileURLWithPath: base + "/\(v)/\(name)"))
            }
        }
        files["/k/master.m3u8"] = Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\nlo/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=300000\nhi/index.m3u8\n".utf8)
        for (path, body) in files {
            let type = path.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : path.hasSuffix(".ts") ? "video/mp2t" : "application/octet-stream"
            origin.setResource(path, .init(body: body, etag: "\"\(TestBytes.sha256(body).prefix(16))\"", contentType: type))
        }
        return files
    }

    /// F11 with a shared AES key: `evict hi/index.m3u8` keeps the key (lo names it); after a
    /// re-encode with a new key the master's next run asks lo again, finds it changed and drops
    /// lo, its segments and the key with it: every cached file is the new encode's, and both
    /// variants of the export decode (ffmpeg). Before: hi was fetched from the new encode under
    /// the old key, and did not decode.
    @Test(.requires(.ffmpeg))
    func aSharedKeyIsNeverKeptUnderANewEncode() throws {
        let origin = try TestOrigin()
        _ = try Self.encodeAES(origin, seed: 1, in: dir)
        let cache = dir.file("c")
        let master = origin.url("/k/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try run(["evict", origin.url("/k/hi/index.m3u8")], cache).status == 0)
        let new = try Self.encodeAES(origin, seed: 2, in: dir)
        let again = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(again.status == 0, "\(again.stderr)")
        for (p, body) in new { #expect(try Self.cachedSHA(origin.url(p), cache) == TestBytes.sha256(body), "\(p)") }
        let out = dir.file("export-aes")
        let ex = try run(["export", master, out], cache)
        #expect(ex.status == 0, "\(ex.stderr)")
        origin.stop()
        let variants = try FileManager.default.subpathsOfDirectory(atPath: out).filter { $0.hasSuffix("index.m3u8") }
        #expect(variants.count == 2, "\(variants)")
        for playlist in variants {
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-allowed_extensions", "ALL", "-i", out + "/" + playlist, "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(playlist): \(play.err)")
        }
    }

    /// A marked master's media playlist asked for again that the origin does not answer (503):
    /// the item fails as for the master's own (exit 3), nothing is dropped or fetched, and the
    /// stream stays marked. Before: b.m3u8 was not asked at all and the mark was cleared.
    @Test
    func aMarkedMastersPlaylistNotAnsweredFailsTheItemDroppingNothing() throws {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        let cache = dir.file("c")
        let master = origin.url("/h/master.m3u8")
        #expect(try run(["prefetch", "-q", "--variant", "all", master], cache).status == 0)
        #expect(try run(["evict", origin.url("/h/a.m3u8")], cache).status == 0)
        var f = TestOrigin.Faults()
        // 503 to the request and to each of its 3 retries (--retries).
        f.statuses = Array(repeating: (503, [:]), count: 4)
        origin.setFaults("/h/b.m3u8", f)
        let asked = origin.requests("/h/a.m3u8").count
        let r = try run(["prefetch", "-q", "--variant", "all", master], cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderrLines.contains("vcache: cannot prefetch \(master): its stream is partly cached and its manifest could not be asked for again (\(origin.url("/h/b.m3u8")): origin answered 503): nothing more was fetched, so the stream is not completed from a cached copy the origin may have changed; run again once the origin answers"), "\(r.stderr)")
        #expect(origin.requests("/h/a.m3u8").count == asked)
        try expectCachedAsNamed("/h/b.m3u8", old, gone: [], origin, cache)
        #expect(try masterState(origin, cache) == "partial")
    }
}
