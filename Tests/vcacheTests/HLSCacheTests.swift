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
    static func streams() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeStreams(into: nginx.root + "/hls")
        return nginx
    }

    /// `check` of a playlist says whether what prefetch would fetch of the stream is cached: the
    /// chosen variant, its audio and the segments that reach N seconds (or all of them), read
    /// from the cached playlists without asking the origin.
    @Test(.requires(.nginx, .streamTools))
    func checkOfAPlaylistAsksWhatPrefetchWouldFetchOfTheStream() throws {
        let nginx = try Self.streams()
        let cache = dir.file("check-cache")
        let ts = nginx.url("/hls/ts/index.m3u8"), abr = nginx.url("/hls/abr/master.m3u8")
        func check(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(["check"] + args, cacheDir: cache) }
        #expect(try VCacheBinary.run(["prefetch", "-q", ts, "--seconds", "2"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", abr, "--seconds", "2"], cacheDir: cache).status == 0)
        let before = nginx.accessLog().count
        #expect(try check([ts, "--seconds", "2"]).status == 0)
        let four = try check([ts, "--seconds", "4"])
        #expect(four.status == 1 && four.stdout.contains("1 of the 3 playlists, segments, init sections and keys of its first 4.0s are not cached"), "\(four.stdout)")
        #expect(try check([ts]).status == 1)
        #expect(try check([abr, "--seconds", "2"]).status == 0)
        #expect(try check([abr, "--seconds", "2", "--variant", "worst"]).status == 1)
        let bytes = try check([ts, "--bytes", "1M"])
        #expect(bytes.status == 1 && bytes.stdout.contains("--bytes and --range do not apply to a stream"))
        let list = dir.file("streams.txt")
        try "\(ts) 2s\n\(abr) 2s\n".write(toFile: list, atomically: true, encoding: .utf8)
        #expect(try check(["-i", list]).stdout.hasSuffix("2 of 2 ready\n"))
        #expect(nginx.accessLog().count == before)
        #expect(try VCacheBinary.run(["prefetch", "-q", ts], cacheDir: cache).status == 0)
        #expect(try check([ts]).status == 0)
        let status = Self.events(try VCacheBinary.run(["status", "--json"], cacheDir: cache)).first
        #expect(status?["streams"] as? Int == 2 && status?["stream_member_entries"] as? Int == 10)
        // evict names a stream once, its members summed.
        let evict = try VCacheBinary.run(["evict", "--dry-run", "--all"], cacheDir: cache)
        #expect(evict.stdout.contains("\(ts) (HLS stream, 3 entries)") && evict.stdout.contains("\(abr) (HLS stream, 7 entries)"), "\(evict.stdout)")
        #expect(evict.stdout.contains("would evict 10 entries"))
    }

    @Test(.requires(.nginx, .streamTools))
    func aStreamIsOneRowOfLsAndOneUnitToEvictionAndPin() throws {
        let nginx = try Self.streams()
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
        let gone = Set(Self.events(evict).filter { $0["event"] as? String == "evicted" }.compactMap { ($0["key"] as? String).flatMap(CacheKey.init) })
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

    /// `export STREAM DIR`: a self-contained folder, playlists rewritten to relative local names,
    /// that ffmpeg plays from disk with the origin stopped.
    @Test(.requires(.nginx, .streamTools))
    func aStreamExportsAsAFolderThatPlaysFromDisk() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let streams = ["abr/master.m3u8", "fmp4/index.m3u8", "br/index.m3u8", "br/implicit.m3u8", "ts/index.m3u8"]
        for s in streams {
            let r = try VCacheBinary.run(["prefetch", "-q", nginx.url("/hls/" + s)], cacheDir: cache)
            #expect(r.status == 0, "\(s): \(r.stderr)")
        }
        let worst = dir.file("worst")
        #expect(try VCacheBinary.run(["prefetch", "-q", nginx.url("/hls/abr/master.m3u8"), "--variant", "worst"], cacheDir: worst).status == 0)
        let short = dir.file("short")
        #expect(try VCacheBinary.run(["prefetch", "-q", nginx.url("/hls/ts/index.m3u8"), "--seconds", "1"], cacheDir: short).status == 0)
        let origin = nginx.root + "/hls/"
        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }

        for (i, s) in streams.enumerated() {
            let out = dir.file("out\(i)")
            let r = try VCacheBinary.run(["export", nginx.url("/hls/" + s), out], cacheDir: cache)
            #expect(r.status == 0 && r.stdout.hasPrefix("exported \(out)/master.m3u8 ("), "\(s): \(r.stdout) \(r.stderr)")
            // Every playlist names local files only.
            let files = FileManager.default.enumerator(atPath: out)?.compactMap { $0 as? String } ?? []
            for f in files where f.hasSuffix(".m3u8") {
                let text = try String(contentsOfFile: out + "/" + f, encoding: .utf8)
                #expect(!text.contains("http"), "\(s) \(f):\n\(text)")
            }
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", out + "/master.m3u8", "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) from disk: \(play.err)")
        }
        // The bytes are the origin's.
        #expect(TestBytes.sha256(file: dir.file("out0/180p/seg_001.m4s")) == TestBytes.sha256(file: origin + "abr/180p/seg_001.m4s"))
        #expect(TestBytes.sha256(file: dir.file("out4/seg_000.ts")) == TestBytes.sha256(file: origin + "ts/seg_000.ts"))
        // Again into the same folder: refused without --force, done with it.
        // (-q drops notes and reports, never the error: it said nothing, exit 1 alone: h4 F4.)
        let again = try VCacheBinary.run(["-q", "export", nginx.url("/hls/ts/index.m3u8"), dir.file("out4")], cacheDir: cache)
        #expect(again.status == 1 && again.stderr.contains("'\(dir.file("out4"))/master.m3u8' already exists; use --force to overwrite it"), "\(again.stderr)")
        #expect(try VCacheBinary.run(["export", nginx.url("/hls/ts/index.m3u8"), dir.file("out4"), "--force"], cacheDir: cache).status == 0)

        // Into a file that exists: refused, the file untouched.
        let file = try dir.write("file.m3u8", Data("mine".utf8))
        let onFile = try VCacheBinary.run(["export", nginx.url("/hls/ts/index.m3u8"), file], cacheDir: cache)
        #expect(onFile.status == 1 && onFile.stderr.contains("'\(file)' exists and is not a folder"), "\(onFile.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "mine")

        // A master keeps the variants that play from the cache; the one never warmed is left out.
        let low = try VCacheBinary.run(["export", nginx.url("/hls/abr/master.m3u8"), dir.file("low")], cacheDir: worst)
        #expect(low.status == 0 && low.stderr.contains("left out \(nginx.url("/hls/abr/180p/index.m3u8")): it does not play from the cache"), "\(low.stderr)")
        let master = try String(contentsOfFile: dir.file("low/master.m3u8"), encoding: .utf8)
        #expect(master.components(separatedBy: "#EXT-X-STREAM-INF").count == 2 && master.contains("90p/index.m3u8"), "\(master)")
        let lowPlay = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", dir.file("low/master.m3u8"), "-f", "null", "-"])
        #expect(lowPlay.status == 0 && lowPlay.err.isEmpty, "\(lowPlay.err)")
        // A stream cached in part is not exported: nothing written, the reason said.
        let part = try VCacheBinary.run(["export", nginx.url("/hls/ts/index.m3u8"), dir.file("part")], cacheDir: short)
        #expect(part.status == 1 && part.stderr.contains("does not play from the cache: 1 of the 2 segments of \(nginx.url("/hls/ts/index.m3u8")) are not cached"), "\(part.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("part")))
    }

    /// `info STREAM` lists its variants and renditions and what of each is cached; `verify
    /// STREAM` checks every member.
    @Test(.requires(.nginx, .streamTools))
    func infoAndVerifyOfAStreamCoverEveryMember() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", master, "--variant", "worst"], cacheDir: cache).status == 0)
        let info = try VCacheBinary.run(["info", master], cacheDir: cache)
        #expect(info.status == 0, "\(info.stderr)")
        let lines = info.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("variant") && $0.contains("160x90") && $0.contains("2/2 segments, 4.0 of 4.0 s") }, "\(info.stdout)")
        #expect(lines.contains { $0.hasPrefix("variant") && $0.contains("320x180") && $0.contains("not cached") }, "\(info.stdout)")
        #expect(lines.contains { $0.hasPrefix("audio") && $0.contains("\"audio") && $0.contains("3/3 segments") }, "\(info.stdout)")
        #expect(lines.contains { $0.hasPrefix("segments ") && $0.hasSuffix("5 of 5 cached") }, "\(info.stdout)")
        // Complete: every playlist cached holds all its segments (the variant never warmed is not a hole).
        #expect(lines.contains { $0.hasPrefix("state ") && $0.hasSuffix(" complete") }, "\(info.stdout)")
        #expect(lines.contains { $0.hasPrefix("plays offline ") && $0.hasSuffix(" 4.0 of 4.0 s") }, "\(info.stdout)")
        let json = try VCacheBinary.run(["info", master, "--json"], cacheDir: cache)
        let o = try #require(Self.events(json).first)
        #expect(o["event"] as? String == "stream" && o["variants"] as? Int == 2 && o["variants_cached"] as? Int == 1, "\(o)")
        let members = try #require(o["members"] as? [[String: Any]])
        #expect(members.filter { $0["cached"] as? Bool == true }.count == 10 && members.first?["role"] as? String == "manifest", "\(members)")

        // verify STREAM checks all ten members, fragments and playlists alike, and finds them sound.
        let ok = try VCacheBinary.run(["verify", master, "--json"], cacheDir: cache)
        #expect(ok.status == 0, "\(ok.stdout)")
        #expect(Self.events(ok).filter { $0["event"] as? String == "checked" && $0["state"] as? String == "ok" }.count == 10, "\(ok.stdout)")
        // One byte of a segment flipped: verify of the stream finds it.
        let segment = nginx.url("/hls/abr/90p/seg_001.m4s")
        let e = try #require(try CacheInspector(directory: cache).entry(segment))
        let data = try CacheInspector(directory: cache).store.dataPath(e.key)
        let handle = try #require(FileHandle(forUpdatingAtPath: data))
        try handle.seek(toOffset: 100)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data([byte ^ 0xFF]))
        try handle.close()
        let bad = try VCacheBinary.run(["verify", master], cacheDir: cache)
        #expect(bad.status == 1, "\(bad.stdout)")
        #expect(bad.stdout.split(separator: "\n").contains { $0.hasPrefix("problem") && $0.contains(segment) && $0.contains("SHA-256") }, "\(bad.stdout)")
        #expect(bad.stdout.contains("10 entries checked, 1 with problems"), "\(bad.stdout)")
    }

    /// serve records the stream a player plays through it: played once, it is one row of `ls`.
    @Test(.requires(.nginx, .streamTools))
    func aStreamPlayedThroughServeIsOneStream() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let master = nginx.url("/hls/abr/master.m3u8")
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(master), "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
        serve.stop()
        let all = try CacheInspector(directory: cache).store.catalog.allEntries()
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let events = Self.events(ls)
        let streams = events.filter { $0["event"] as? String == "stream" }
        #expect(streams.count == 1 && streams.first?["url"] as? String == master, "\(ls.stdout)")
        #expect(streams.first?["entries"] as? Int == all.count && events.filter { $0["event"] as? String == "entry" }.isEmpty, "\(ls.stdout)")
        // A player fetched every segment of the variant it chose, and the audio.
        #expect(streams.first?["segments_cached"] as? Int ?? 0 >= 5, "\(ls.stdout)")
    }

    /// A cache the vcache before streams wrote (catalog schema 1: migration 1 is unchanged, so
    /// today's cache with migrations 2 to 4 taken off is that cache) reads as it is, upgrades in place
    /// when a command writes, and keeps every entry and byte.
    @Test
    func aCacheOfTheVcacheBeforeStreamsUpgradesInPlaceAndKeepsItsEntries() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(200_000, seed: 11)
        origin.setResource("/a.mp4", .init(body: body))
        origin.setResource("/b.mp4", .init(body: TestBytes.make(300_000, seed: 12)))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/a.mp4")], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/b.mp4"), "--bytes", "100K"], cacheDir: cache).status == 0)
        func sql(_ s: String) throws -> String {
            let r = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", s])
            #expect(r.status == 0, "\(r.err)")
            return String(decoding: r.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        _ = try sql("DROP TABLE expected_digests; DROP TABLE final_urls; DROP TABLE stream_members; DROP TABLE streams; DROP TABLE chunk_states; PRAGMA user_version = 1")
        #expect(try sql("PRAGMA user_version") == "1")
        // Reading does not upgrade.
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        #expect(ls.status == 0 && Self.events(ls).filter { $0["event"] as? String == "entry" }.count == 2, "\(ls.stdout) \(ls.stderr)")
        #expect(try sql("PRAGMA user_version") == "1")
        // Writing does, and keeps both entries, their state and their bytes.
        let out = dir.file("a.mp4")
        #expect(try VCacheBinary.run(["export", origin.url("/a.mp4"), out], cacheDir: cache).status == 0)
        #expect(try sql("PRAGMA user_version") == "\(Catalog.schemaVersion)")
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
        let entries = try CacheInspector(directory: cache).store.catalog.allEntries()
        #expect(entries.count == 2 && entries.filter(\.isComplete).count == 1 && entries.map(\.cachedBytes).sorted() == [102_400, 200_000], "\(entries)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0 && verify.stdout.contains("2 entries checked, 0 with problems"), "\(verify.stdout)")
    }

    /// The cap never takes half a stream's segments to make room for an unrelated video: the
    /// stream goes whole.
    @Test(.requires(.nginx, .streamTools))
    func theCapTakesAStreamWholeOrNotAtAll() throws {
        let nginx = try Self.streams()
        let cache = dir.file("cache")
        let master = nginx.url("/hls/abr/master.m3u8")
        let plain = try nginx.publish("plain.bin", TestBytes.make(300_000, seed: 8))
        #expect(try VCacheBinary.run(["prefetch", "-q", master, "--variant", "worst"], cacheDir: cache).status == 0)
        let abrKeys = try CacheInspector(directory: cache).store.catalog.allEntries().map(\.key)
        #expect(abrKeys.count == 10)
        func usage() throws -> Int64 {
            let r = try VCacheBinary.run(["evict", "--dry-run", "--max-size", "1T", "--json"], cacheDir: cache)
            return try #require(Self.events(r).last?["usage_bytes"] as? Int64)
        }
        // What the cache uses with the plain video too, then without it again.
        #expect(try VCacheBinary.run(["prefetch", "-q", plain], cacheDir: cache).status == 0)
        let both = try usage()
        #expect(try VCacheBinary.run(["evict", plain], cacheDir: cache).status == 0)
        // 20 KB short of room for both: a few of the stream's oldest segments would do; the
        // stream goes whole instead.
        let r = try VCacheBinary.run(["prefetch", "-q", plain, "--max-size", "\(both - 20_000)"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let left = try CacheInspector(directory: cache).store.catalog.allEntries()
        #expect(left.map(\.latestURL) == [plain], "\(left.map(\.latestURL))")
    }
}
