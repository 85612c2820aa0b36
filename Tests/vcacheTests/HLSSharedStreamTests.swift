import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Streams that share members, and what `info`, `ls` and `check` count of a stream evicted in
/// part (Docs/hls.md, "The stream in the cache").
@Suite struct HLSSharedStreamTests {
    let dir = TempDirectory("vcache-hlsshared")

    /// The fixture streams, and a second master naming the abr stream's 180p variant and its
    /// audio rendition (what two masters of one title, say two ladders, share).
    static func streams() throws -> Nginx {
        let nginx = try HLSCacheTests.streams()
        let alt = """
            #EXTM3U
            #EXT-X-VERSION:7
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="group_aud",NAME="audio_2",DEFAULT=YES,LANGUAGE="en",URI="audio/index.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=400400,RESOLUTION=320x180,CODECS="avc1.42c00d,mp4a.40.2",AUDIO="group_aud"
            180p/index.m3u8

            """
        try alt.write(toFile: nginx.root + "/hls/abr/alt.m3u8", atomically: true, encoding: .utf8)
        return nginx
    }

    func keys(_ cache: String) throws -> Set<String> { Set(try CacheInspector(directory: cache).store.catalog.allEntries().map(\.latestURL)) }

    /// `evict STREAM` removes what that stream alone names: a playlist, segment or init section
    /// another cached stream names too stays for it, and that stream still plays whole.
    @Test(.requires(.nginx, .streamTools))
    func evictingAStreamKeepsWhatAnotherStreamAlsoNames() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8"), alt = nginx.url("/hls/abr/alt.m3u8")
        func run(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }
        #expect(try run(["prefetch", "-q", master, "--variant", "all"]).status == 0)
        let masterURLs = try keys(cache)
        #expect(masterURLs.count == 14, "\(masterURLs.sorted())")
        #expect(try run(["prefetch", "-q", alt]).status == 0)
        #expect(try keys(cache) == masterURLs.union([alt]))
        // alt named: only its own root goes; everything else is master's too.
        let evictAlt = try run(["evict", alt])
        #expect(evictAlt.status == 0 && evictAlt.stdout.contains("evicted 1 entry"), "\(evictAlt.stdout) \(evictAlt.stderr)")
        #expect(try keys(cache) == masterURLs)
        let check = try run(["check", master, "--variant", "all"])
        #expect(check.status == 0, "\(check.stdout)")
        // Again, the other way round: master named keeps what alt names (180p, the audio).
        #expect(try run(["prefetch", "-q", alt]).status == 0)
        let evictMaster = try run(["evict", master])
        #expect(evictMaster.status == 0, "\(evictMaster.stderr)")
        let left = try keys(cache)
        #expect(left.contains(alt) && !left.contains(master) && !left.contains { $0.contains("/90p/") }, "\(left.sorted())")
        #expect(left.count == 10, "\(left.sorted())")
        #expect(try run(["check", alt]).status == 0)
        let verify = try run(["verify"])
        #expect(verify.status == 0 && verify.stdout.contains("10 entries checked, 0 with problems"), "\(verify.stdout)")
        #expect(try CacheInspector(directory: cache).consistencyProblems() == [])
        // Under a cap the older stream goes first, then what both named with the last of them.
        #expect(try run(["prefetch", "-q", master, "--variant", "all"]).status == 0)
        #expect(try run(["evict", "--all"]).status == 0)
        #expect(try keys(cache).isEmpty)
        #expect(try CacheInspector(directory: cache).store.catalog.streams().isEmpty)
    }

    /// After some members are evicted, `ls`, `info` and `check` count the same things: entries
    /// (`ls`'s entries, `info`'s members, what `check --variant all` asks), and segments (each
    /// one a cached media playlist lists, cached when its own bytes are).
    @Test(.requires(.nginx, .streamTools))
    func lsInfoAndCheckCountAStreamEvictedInPartAlike() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8")
        func run(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }
        #expect(try run(["prefetch", "-q", master]).status == 0)
        #expect(try run(["evict", nginx.url("/hls/abr/180p/seg_001.m4s"), nginx.url("/hls/abr/audio/init_2.mp4")]).status == 0)
        let ls = try #require(HLSCacheTests.events(try run(["ls", "--json"])).first { $0["event"] as? String == "stream" })
        let info = try #require(HLSCacheTests.events(try run(["info", master, "--json"])).first)
        let members = try #require(info["members"] as? [[String: Any]])
        let cachedMembers = members.filter { $0["cached"] as? Bool == true }.count
        // 11 named (master, 3 playlists, 2 init sections, 5 segments; 90p's never fetched), 2 evicted.
        #expect(members.count == 11 && cachedMembers == 8, "\(members)")
        #expect(ls["entries"] as? Int == cachedMembers && info["entries"] as? Int == cachedMembers, "\(ls)")
        #expect(ls["segments"] as? Int == 5 && ls["segments_cached"] as? Int == 4, "\(ls)")
        let playlists = try #require(ls["playlists"] as? [[String: Any]])
        #expect(playlists.reduce(0) { $0 + ($1["segments_cached"] as? Int ?? 0) } == 4)
        let text = try run(["info", master]).stdout
        #expect(text.contains("members        8 of the 11 it names cached") && text.contains("segments       4 of 5 cached"), "\(text)")
        #expect(text.contains("init sections  1 of 2 cached"), "\(text)")
        let all = try run(["check", master, "--variant", "all"])
        #expect(all.stdout.contains("3 of the 11 playlists, segments, init sections and keys of the whole stream are not cached"), "\(all.stdout)")
        let best = try run(["check", master])
        #expect(best.stdout.contains("2 of the 10 playlists, segments, init sections and keys"), "\(best.stdout)")
    }
    /// Two streams of one run name the same segments; one of them is gone. The segment is asked
    /// once and fails once, and both streams fail for it (before, the second stream to name it
    /// was counted done and complete, and the run said "1 done, 1 failed").
    @Test(.requires(.nginx, .streamTools))
    func aSegmentTwoStreamsNameFailsBothStreams() throws {
        let nginx = try HLSCacheTests.streams()
        let cache = dir.file("cache")
        let root = nginx.root + "/hls/ts"
        try FileManager.default.copyItem(atPath: root + "/index.m3u8", toPath: root + "/copy.m3u8")
        try FileManager.default.removeItem(atPath: root + "/seg_001.ts")
        let a = nginx.url("/hls/ts/index.m3u8"), b = nginx.url("/hls/ts/copy.m3u8")
        let r = try VCacheBinary.run(["prefetch", a, b, "--progress", "none"], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        let gone = nginx.url("/hls/ts/seg_001.ts")
        #expect(r.stderrLines.filter { $0.hasSuffix("vcache: cannot prefetch \(gone): origin answered 404 Not Found") }.count == 1, "\(r.stderr)")
        #expect(r.stderrLines.contains("  \(a): member \(gone): origin answered 404 Not Found"), "\(r.stderr)")
        #expect(r.stderrLines.contains("  \(b): member \(gone): origin answered 404 Not Found"), "\(r.stderr)")
        #expect(r.stderrLines.last?.hasPrefix("0 done, 2 failed;") == true, "\(r.stderr)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)")
    }
    /// A master given whole and its variant given on another line with `2s`: the variant joins
    /// the master's stream whole (before: only its first 2 s, the run said both done and exit 0,
    /// and `check` of the master said a segment missing, exit 1).
    @Test(.requires(.nginx, .streamTools))
    func aVariantGivenWithLessIsFetchedWholeForTheMasterThatNamesIt() throws {
        let nginx = try HLSCacheTests.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8")
        let list = dir.file("list")
        try "\(master)\n\(nginx.url("/hls/abr/180p/index.m3u8")) 2s\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.run(["prefetch", "-i", list, "--progress", "none"], cacheDir: cache)
        #expect(r.status == 0 && r.stderrLines.last?.hasPrefix("2 done, 0 failed") == true, "\(r.stderr)")
        let check = try VCacheBinary.run(["check", master], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}
