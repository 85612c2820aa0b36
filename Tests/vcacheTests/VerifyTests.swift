import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// verify's findings, end to end: each problem named, --fix making the catalog true again.
@Suite struct VerifyTests {
    let dir = TempDirectory("vcache-verify")
    let origin: TestOrigin
    var cache: String { dir.file("cache") }

    init() throws { origin = try TestOrigin() }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    func cached(_ path: String, _ body: Data, _ extra: [String] = []) throws -> (url: String, key: CacheKey, data: String) {
        origin.setResource(path, .init(body: body, etag: "\"\(path)\""))
        let url = origin.url(path)
        #expect(try vcache(["prefetch", "-q", url] + extra).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let key = try #require(try inspector.entry(url)).key
        return (url, key, inspector.store.dataPath(key))
    }

    /// fallocate(1) punches a hole: the range reads back as zeros, with no block behind it.
    func punchHole(_ path: String, offset: Int, length: Int) throws {
        let r = try Tool.run("/usr/bin/fallocate", ["--punch-hole", "--offset", "\(offset)", "--length", "\(length)", path])
        #expect(r.status == 0, "\(r.err)")
    }

    func sqlite(_ sql: String) throws {
        let r = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", sql])
        #expect(r.status == 0, "\(r.err)")
    }

    @Test func aHoleInAPartialEntryIsFoundAndFixKeepsTheRest() throws {
        let body = TestBytes.make(2 << 20, seed: 81)
        let (url, _, data) = try cached("/h.mp4", body, ["--bytes", "1M"])
        try punchHole(data, offset: 256 << 10, length: 128 << 10)
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("bytes from \(256 << 10) of a claimed range were never written (a hole in data)"))
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        let entry = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(entry.ranges == RangeSet([ByteRange(0, 256 << 10), ByteRange(384 << 10, 1 << 20)]))
        #expect(try CacheInspector(directory: cache).verifyClaims(url, origin: body).mismatch == nil)
    }

    /// ZFS and btrfs keep blocks of zeros as holes: a complete entry whose digest holds is fine.
    @Test func holesOfZerosInACompleteEntryWhoseDigestHoldsAreNoProblem() throws {
        let body = TestBytes.make(1 << 20, seed: 82) + Data(count: 1 << 20) + TestBytes.make(1 << 20, seed: 83)
        let (_, _, data) = try cached("/z.mp4", body)
        try punchHole(data, offset: 1 << 20, length: 1 << 20)
        let r = try vcache(["verify"])
        #expect(r.status == 0, "\(r.stdout)")
        #expect(r.stdout.contains("ok  "))
    }

    @Test func aCachedBytesCountThatDisagreesWithTheRangesIsFixed() throws {
        let (_, key, _) = try cached("/n.mp4", TestBytes.make(300_000, seed: 84), ["--bytes", "100000"])
        try sqlite("UPDATE entries SET cached_bytes = 5 WHERE key = '\(key)';")
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("cached_bytes says 5 but the ranges hold 100000"))
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        #expect(try CacheInspector(directory: cache).store.catalog.entry(key: key)?.cachedBytes == 100_000)
    }

    @Test func aCompleteMP4WhoseStructureIsBrokenIsReportedAndItsBytesKept() throws {
        let body = try Fixtures.data("truncated.mp4")
        let (url, _, _) = try cached("/t.mp4", body)
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("problem  \(url)  MP4 structure: "))
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.stdout.contains("kept: the bytes match what the origin served"))
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    @Test func anEntryAnotherProcessIsWritingIsSkipped() throws {
        let body = TestBytes.make(4 << 20, seed: 85)
        origin.setResource("/w.mp4", .init(body: body, etag: "\"w\""))
        // The writer is held at 2 MiB until verify has run: it is writing the entry then, however
        // slowly the machine runs verify.
        origin.hold("/w.mp4", at: 2 << 20)
        let url = origin.url("/w.mp4")
        let writer = try VCacheBinary.start(["prefetch", "-q", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/w.mp4"))
        // Wait for its first checkpoint, so the entry is listed.
        let deadline = Date().addingTimeInterval(30)
        while (try? CacheInspector(directory: cache).entry(url)) ?? nil == nil && Date() < deadline { usleep(10_000) }
        let r = try vcache(["verify", "--json"])
        writer.kill(SIGTERM)
        _ = writer.finish()
        #expect(r.status == 0)
        let first = try #require(r.stdout.split(separator: "\n").first)
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect(obj["event"] as? String == "checked")
        #expect(obj["state"] as? String == "skipped")
        #expect(obj["problems"] as? [String] == ["another vcache process is writing it"])
    }

    /// An entry whose folder is gone is reported as it is: checking makes no folder (only --fix,
    /// which takes the writer lock, may), and --fix then drops its claims.
    @Test func aMissingEntryFolderIsReportedWithoutBeingMade() throws {
        let (url, _, data) = try cached("/gone.mp4", TestBytes.make(50_000, seed: 88))
        let folder = (data as NSString).deletingLastPathComponent
        try FileManager.default.removeItem(atPath: folder)
        let r = try vcache(["verify"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("problem  \(url)  its data file is missing"))
        #expect(!FileManager.default.fileExists(atPath: folder))
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        #expect(try CacheInspector(directory: cache).entry(url)?.cachedBytes == 0)
    }

    @Test func fixRemovesOrphanFoldersAndJSONSaysSo() throws {
        let (url, _, _) = try cached("/o.mp4", TestBytes.make(100_000, seed: 86))
        let orphan = String(repeating: "ab", count: 32)
        let folder = cache + "/entries/ab/" + orphan
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: folder + "/data", contents: Data("left by a crash".utf8)))
        let r = try vcache(["verify", "--fix", "--json"])
        #expect(r.status == 1)  // something was wrong, even though it is fixed now
        let objects = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == 2)
        #expect(objects[0]["url"] as? String == url)
        #expect(objects[0]["state"] as? String == "ok")
        #expect(objects[1]["event"] as? String == "summary")
        #expect(objects[1]["orphans_removed"] as? Int == 1)
        #expect(objects[1]["entries"] as? Int == 1)
        #expect(!FileManager.default.fileExists(atPath: folder))
        #expect(try vcache(["verify"]).status == 0)
    }

    @Test func aDamagedIndexIsRebuiltAndNoEntryIsLost() throws {
        let (url, key, _) = try cached("/i.mp4", TestBytes.make(100_000, seed: 87))
        // Make the index disagree with its table: while the last-use index is declared over
        // `created`, a row goes in (indexed by its `created`); then the declaration is put back.
        try sqlite("PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql='CREATE INDEX entries_by_last_used ON entries(created)' WHERE name='entries_by_last_used';")
        try sqlite("INSERT INTO entries (key, url, latest_url, created, last_used) VALUES ('\(String(repeating: "cd", count: 32))', 'http://x/a', 'http://x/a', 1, 2);")
        try sqlite("PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql='CREATE INDEX entries_by_last_used ON entries(last_used)' WHERE name='entries_by_last_used';")
        let found = try vcache(["verify"])
        #expect(found.status == 5)
        #expect(found.stderr.contains("is corrupt"))
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.stdout.contains("the catalog's indexes were damaged"))
        #expect(fixed.stdout.contains("rebuilt them (REINDEX); no entry was lost"))
        #expect(try vcache(["verify"]).status == 0)
        #expect(try CacheInspector(directory: cache).store.catalog.entry(key: key)?.latestURL == url)
    }

    @Test func settingACorruptCatalogAsideLeavesAFolderItsWriterStillHolds() throws {
        let (_, key, _) = try cached("/k.mp4", TestBytes.make(100_000, seed: 88))
        let (_, other, _) = try cached("/k2.mp4", TestBytes.make(100_000, seed: 89))
        let store = try CacheInspector(directory: cache).store
        // A writer of the first entry is still running (its lock is the entry folder's flock).
        let held = try RawFile.open(store.entryDirectory(key), flags: O_RDONLY | O_DIRECTORY)
        #expect(try held.lock(exclusive: true, nonBlocking: true))
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: cache + "/catalog.db"))
        try? FileManager.default.removeItem(atPath: cache + "/catalog.db-wal")
        try? FileManager.default.removeItem(atPath: cache + "/catalog.db-shm")
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.stdout.contains("not one row of it could be read"), "\(fixed.stdout)")
        #expect(fixed.stdout.contains("the 1 data folder it described was removed"), "\(fixed.stdout)")
        #expect(FileSystem.exists(store.dataPath(key)))
        #expect(!FileSystem.exists(store.entryDirectory(other)))
        held.close()
    }

    /// One damaged page in a catalog of many rows loses the rows on that page, not the cache:
    /// `verify --fix` used to set the catalog aside and remove every data folder (all videos).
    /// Damage in the entries table (the page of the newest rows) or in the ranges table (a row
    /// then reads without its ranges: a complete entry is kept and checked whole by its SHA-256).
    @Test(arguments: ["SELECT pageno FROM dbstat WHERE name='entries' AND pagetype='leaf' ORDER BY path DESC LIMIT 1",
                      "SELECT rootpage FROM sqlite_schema WHERE name='ranges'"])
    func aDamagedCatalogPageLosesOnlyItsRowsAndTheVideosStay(pageQuery: String) throws {
        let one = TestBytes.make(100_000, seed: 90), two = TestBytes.make(120_000, seed: 91)
        let (u1, _, _) = try cached("/s1.mp4", one)
        let (u2, _, _) = try cached("/s2.mp4", two)
        // 400 more rows (no data behind them) after the two real ones, with long URLs, so the
        // table spans many pages; then the page holding the newest rows is overwritten.
        try sqlite("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
            INSERT INTO entries (key, url, latest_url, created, last_used)
            SELECT printf('%064x', i), 'http://f/' || i || '/' || hex(zeroblob(150)), 'http://f/' || i || '/' || hex(zeroblob(150)), 1, 2 FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        let query = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", pageQuery])
        let page = try #require(Int(String(decoding: query.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(page > 2)
        let db = try #require(FileHandle(forUpdatingAtPath: cache + "/catalog.db"))
        try db.seek(toOffset: UInt64((page - 1) * 4096 + 8))
        db.write(Data(repeating: 0xff, count: 4000))
        try db.close()

        let found = try vcache(["verify"])
        #expect(found.status == 5)
        #expect(found.stderr.contains("is corrupt"))
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1)
        #expect(fixed.stdout.contains("started a new one with the"))
        #expect(fixed.stdout.contains("that could still be read"))
        // The two videos are still cached, complete and true to the byte.
        let list = try vcache(["ls", "--complete", "--json"])
        #expect(list.stdout.contains(u1) && list.stdout.contains(u2))
        for (u, body) in [(u1, one), (u2, two)] {
            let dest = cache + "/../out-\(body.count).mp4"
            #expect(try vcache(["export", u, dest, "--force"]).status == 0)
            #expect(TestBytes.sha256(try Data(contentsOf: URL(fileURLWithPath: dest))) == TestBytes.sha256(body))
        }
        #expect(try vcache(["verify"]).status == 0)
    }

    /// `verify --fix` of a corrupt catalog killed after it set the catalog aside and before the
    /// rows were copied into the new one: no entry is lost. Before, the cache then read as empty
    /// ("there is no cache"), and the next `evict` (a cron's) swept every entry folder as an
    /// orphan, complete videos included, saying it evicted nothing. Now every command but
    /// `verify --fix` refuses the cache (exit 5, one line naming the repair), nothing is swept,
    /// and the next `verify --fix` finishes the repair: the videos are there, byte-exact.
    @Test
    func aRepairKilledMidwayLosesNoEntryAndTheNextFixFinishesIt() throws {
        let one = TestBytes.make(100_000, seed: 95), two = TestBytes.make(120_000, seed: 96)
        let (u1, _, d1) = try cached("/k1.mp4", one)
        let (u2, _, d2) = try cached("/k2.mp4", two)
        try sqlite("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
            INSERT INTO entries (key, url, latest_url, created, last_used)
            SELECT printf('%064x', i), 'http://f/' || i || '/' || hex(zeroblob(150)), 'http://f/' || i || '/' || hex(zeroblob(150)), 1, 2 FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        let query = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", "SELECT pageno FROM dbstat WHERE name='entries' AND pagetype='leaf' ORDER BY path DESC LIMIT 1"])
        let page = try #require(Int(String(decoding: query.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        let db = try #require(FileHandle(forUpdatingAtPath: cache + "/catalog.db"))
        try db.seek(toOffset: UInt64((page - 1) * 4096 + 8))
        db.write(Data(repeating: 0xff, count: 4000))
        try db.close()

        let pause = PausePoint("salvage-before-write", in: dir)
        let running = try VCacheBinary.start(["verify", "--fix"], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        _ = running.finish()
        try? FileManager.default.removeItem(atPath: pause.prefix + ".reached")

        let ls = try vcache(["ls"])
        #expect(ls.status == 5 && ls.stderr.hasPrefix("vcache: a repair of the catalog '") && ls.stderr.hasSuffix("run 'vcache verify --fix' to finish it\n"), "\(ls.status) \(ls.stderr)")
        let evict = try vcache(["evict", "--lru", "--max-size", "100G"])
        #expect(evict.status == 5, "\(evict.stdout)\(evict.stderr)")
        #expect(FileSystem.exists(d1) && FileSystem.exists(d2))

        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1, "\(fixed.stderr)")
        #expect(fixed.stdout.contains("an earlier repair was interrupted"), "\(fixed.stdout)")
        for (u, body) in [(u1, one), (u2, two)] {
            let dest = dir.file("out-\(body.count).mp4")
            let exported = try vcache(["export", u, dest, "--force"])
            #expect(exported.status == 0, "\(exported.stderr)")
            #expect(TestBytes.sha256(file: dest) == TestBytes.sha256(body))
        }
        #expect(try vcache(["verify"]).status == 0)
        #expect(try vcache(["ls"]).status == 0)
    }
}
