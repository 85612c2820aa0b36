import Foundation
import Synchronization
import Testing
@testable import VCacheCore
import VCacheTestSupport

@Suite struct CatalogTests {
    let dir = TempDirectory("vcache-catalog")

    func update(_ key: CacheKey, _ ranges: [ByteRange], sha: String? = nil) -> Catalog.Update {
        var u = Catalog.Update(key: key, url: "http://h/\(key)", validators: Validators(length: 1000, etag: "\"e\"", lastModified: nil))
        u.added = RangeSet(ranges)
        u.sha256 = sha
        return u
    }

    @Test func commitsMergeRangesAndCreateTheEntryOnce() throws {
        let c = try Catalog(path: dir.file("c.db"))
        try c.commit(update("k", [ByteRange(0, 100)]))
        let all = try c.commit(update("k", [ByteRange(100, 200), ByteRange(500, 600)]))
        #expect(all.ranges == [ByteRange(0, 200), ByteRange(500, 600)])
        let e = try #require(try c.entry(key: "k"))
        #expect(e.cachedBytes == 300)
        #expect(e.length == 1000)
        #expect(e.etag == "\"e\"")
        #expect(try c.storedRanges(key: "k").map { [$0.start, $0.end] } == [[0, 200], [500, 600]])
        #expect(try c.allEntries().count == 1)
    }

    /// Each field is read from its own column: a row written by name with a distinct value in
    /// every column reads back into the matching field (a SELECT list and a reader that disagree
    /// on a position would swap two of them).
    @Test func everyColumnReadsIntoItsOwnField() throws {
        let c = try Catalog(path: dir.file("cols.db"))
        try c.database.write { db in
            try db.run("""
                INSERT INTO entries (disk_bytes, cached_bytes, pinned, sha256, completed, last_used, created, content_type,
                                     last_modified, etag, length, latest_url, url, key)
                VALUES (14, 13, 1, 'sha', 10.5, 9.5, 8.5, 'video/mp4', 'lm', '"et"', 4, 'http://h/latest', 'http://h/first', 'k')
                """)
        }
        let e = try #require(try c.entry(key: "k"))
        #expect(e.key == "k" && e.url == "http://h/first" && e.latestURL == "http://h/latest")
        #expect(e.length == 4 && e.etag == "\"et\"" && e.lastModified == "lm" && e.contentType == "video/mp4")
        #expect(e.created.timeIntervalSince1970 == 8.5 && e.lastUsed.timeIntervalSince1970 == 9.5)
        #expect(e.completed?.timeIntervalSince1970 == 10.5 && e.sha256 == "sha" && e.pinned)
        #expect(e.cachedBytes == 13 && e.diskBytes == 14)
    }

    /// Group commit: eight threads committing at once (as eight downloads' checkpoints do) share
    /// transactions, and every caller gets back a range set holding its own update, and all of
    /// them land.
    @Test func concurrentCommitsAllLandAndEachCallerSeesItsOwn() throws {
        let c = try Catalog(path: dir.file("g.db"))
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<50 {
                let r = ByteRange(Int64(i) * 10, Int64(i) * 10 + 5)
                do {
                    let all = try c.commit(update(CacheKey(stored: "k\(t)"), [r]))
                    if !all.contains(r) { failures.withLock { $0.append("k\(t) \(i): \(all)") } }
                } catch {
                    failures.withLock { $0.append("k\(t) \(i): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        for t in 0..<8 {
            let e = try #require(try c.entry(key: CacheKey(stored: "k\(t)")))
            #expect(e.ranges.ranges.count == 50 && e.cachedBytes == 250)
        }
    }

    @Test func invalidationDropsRangesCompletionAndDigest() throws {
        let c = try Catalog(path: dir.file("c.db"))
        try c.commit(update("k", [ByteRange(0, 1000)], sha: "abc"))
        #expect(try c.entry(key: "k")?.isComplete == true)
        try c.invalidate(key: "k", validators: Validators(length: 2000, etag: "\"f\"", lastModified: nil))
        let e = try #require(try c.entry(key: "k"))
        #expect(e.ranges.isEmpty)
        #expect(e.cachedBytes == 0)
        #expect(!e.isComplete)
        #expect(e.sha256 == nil)
        #expect(e.length == 2000)
    }

    @Test func aNewerSchemaIsRefusedWithAClearMessage() throws {
        let path = dir.file("new.db")
        _ = try Catalog(path: path)
        let db = try Database(path: path)
        try db.write { try $0.execute("PRAGMA user_version = 99") }
        #expect(throws: Catalog.NewerSchema(found: 99, known: Catalog.schemaVersion)) { try Catalog(path: path) }
    }

    /// A catalog of schema 1 (entries, ranges, config) opens, upgrades in place and keeps its rows.
    @Test func aSchemaOneCatalogUpgradesInPlaceAndKeepsItsEntries() throws {
        let path = dir.file("v1.db")
        do {
            let c = try Catalog(path: path)
            try c.commit(update("k", [ByteRange(0, 1000)], sha: "abc"))
            try c.database.write { db in
                try db.execute("DROP TABLE chunk_states; DROP TABLE streams; DROP TABLE stream_members; DROP TABLE final_urls; DROP TABLE expected_digests")
                try db.execute("PRAGMA user_version = 1")
            }
        }
        let c = try Catalog(path: path)
        #expect(try c.database.read { try $0.userVersion } == Catalog.schemaVersion)
        let e = try #require(try c.entry(key: "k"))
        #expect(e.isComplete && e.sha256 == "abc" && e.ranges == RangeSet([ByteRange(0, 1000)]))
        #expect(try c.chunkStates(key: "k") == nil)
    }

    /// A playlist's final URL (migration 4): recorded for an entry that exists, replaced by the
    /// next, gone with its entry.
    @Test func aFinalURLIsKeptPerEntryAndGoesWithIt() throws {
        let c = try Catalog(path: dir.file("c.db"))
        try c.recordFinalURL(key: "k", url: "http://h/moved/k")
        #expect(try c.finalURL(of: "k") == nil)
        try c.commit(update("k", [ByteRange(0, 10)]))
        let e = try #require(try c.entry(key: "k"))
        #expect(c.baseURL(of: e) == "http://h/k")
        try c.recordFinalURL(key: "k", url: "http://h/moved/k")
        try c.recordFinalURL(key: "k", url: "http://h/moved/again/k")
        #expect(try c.finalURL(of: "k") == "http://h/moved/again/k" && c.baseURL(of: e) == "http://h/moved/again/k")
        #expect(try c.removeEntries([(key: "k", lastUsed: e.lastUsed)], evenIfPinned: false) == ["k"])
        #expect(try c.finalURL(of: "k") == nil)
    }

    @Test func configValuesAreSetReadAndUnset() throws {
        let c = try Catalog(path: dir.file("c.db"))
        #expect(try c.config("max-size") == nil)
        try c.setConfig("max-size", "20G")
        #expect(try c.config("max-size") == "20G")
        try c.setConfig("max-size", nil)
        #expect(try c.config("max-size") == nil)
    }

    /// A URL's key is remembered for the URLs asked last (serve asks the same ones again and
    /// again), with the rules it was made under: the same text under other rules is keyed anew.
    @Test func aRememberedKeyIsOnlyTheSameRules() {
        let url = "https://cdn/remembered.mp4?token=a#f"
        let plain = CacheKeyRules(), ignore = CacheKeyRules(ignoreQuery: true), strip = CacheKeyRules(stripParameters: ["token"])
        for _ in 0..<2 {
            #expect(plain.key(for: url) == plain.key(for: URL(string: url)!))
            #expect(ignore.key(for: url) == ignore.key(for: URL(string: url)!))
            #expect(strip.key(for: url) == strip.key(for: URL(string: url)!))
            #expect(plain.key(for: url) != ignore.key(for: url))
            #expect(ignore.key(for: url) == strip.key(for: url))
        }
        // A text that is no URL is keyed as given, remembered or not.
        #expect(plain.key(for: "no url") == plain.key(for: "no url"))
    }

    @Test func keyRulesStripTokensAndNormaliseTheURL() {
        let plain = CacheKeyRules()
        #expect(plain.normalise(URL(string: "HTTP://Example.COM:80/v.mp4#t=3")!) == "http://example.com/v.mp4")
        let strip = CacheKeyRules(stripParameters: ["token"])
        #expect(strip.key(for: URL(string: "https://cdn/v.mp4?token=a&q=1")!) == strip.key(for: URL(string: "https://cdn/v.mp4?q=1&token=b")!))
        #expect(strip.normalise(URL(string: "https://cdn/v.mp4?token=a&q=1")!) == "https://cdn/v.mp4?q=1")
        // Found by the Keys fuzzer: an empty item left after stripping kept a bare `?`.
        #expect(strip.normalise(URL(string: "https://cdn/v.mp4?token=a&")!) == "https://cdn/v.mp4")
        #expect(strip.key(for: URL(string: "https://cdn/v.mp4?token=a&")!) == strip.key(for: URL(string: "https://cdn/v.mp4?token=b")!))
        #expect(strip.normalise(URL(string: "https://cdn/v.mp4?&q=1&&token=a")!) == "https://cdn/v.mp4?q=1")
        let ignore = CacheKeyRules(ignoreQuery: true)
        #expect(ignore.key(for: URL(string: "https://cdn/v.mp4?x=1")!) == ignore.key(for: URL(string: "https://cdn/v.mp4")!))
        #expect(plain.key(for: URL(string: "https://cdn/v.mp4?x=1")!) != plain.key(for: URL(string: "https://cdn/v.mp4")!))
        // Found by the Keys fuzzer: a host URLComponents parses but will not write back once
        // changed (`%EF%BF%BB`) kept the URL as given, its query under ignoreQuery too.
        let odd = "HTTP://>@%EF%BF%BBD"
        #expect(ignore.normalise(URL(string: odd + "?")!) == "http://%3E@%EF%BF%BBD")
        #expect(ignore.key(for: URL(string: odd + "?a=1#f")!) == ignore.key(for: URL(string: odd)!))
        #expect(strip.normalise(URL(string: odd + "?token=a&q=1#f")!) == "http://%3E@%EF%BF%BBD?q=1")
        #expect(strip.key(for: URL(string: odd + "?token=a")!) == strip.key(for: URL(string: odd + "?token=b")!))
    }
}
