import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// The sweep of orphan folders (`evict`, `verify --fix`) removes a folder only when the catalog,
/// read again under the entry's locks, says it has no row. A catalog that cannot be read at that
/// moment (an I/O error, busy past VCACHE_CATALOG_TIMEOUT) proves nothing: before, the failed
/// read counted as "no row", and the folder of an entry whose first checkpoint landed since the
/// sweep listed the catalog was removed, leaving a complete entry whose `data` was gone.
@Suite struct OrphanSweepTests {
    let dir = TempDirectory("vcache-sweep")

    @Test(.requires(.strace))
    func aCatalogThatCannotBeReadAtTheRecheckKeepsTheFolder() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 2553)
        origin.setResource("/o.mp4", .init(body: body, etag: "\"o\""))
        let url = origin.url("/o.mp4")
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let key = try #require(try inspector.entry(url)).key
        let data = inspector.store.dataPath(key)
        let db = cache + "/catalog.db"
        func sqlite(_ sql: String) throws {
            let r = try Tool.run("/usr/bin/sqlite3", [db, sql])
            #expect(r.status == 0, "\(r.err)")
        }
        // The row goes (kept aside): the folder is an orphan when the sweep lists the catalog.
        try sqlite("""
            CREATE TABLE saved AS SELECT * FROM entries WHERE key = '\(key)';
            CREATE TABLE saved_ranges AS SELECT * FROM ranges WHERE key = '\(key)';
            DELETE FROM ranges WHERE key = '\(key)';
            DELETE FROM entries WHERE key = '\(key)';
            """)
        let pause = PausePoint("sweep-before-recheck", in: dir)
        let evict = try VCacheBinary.start(["evict", "--older-than", "3650d"], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        // Meanwhile the entry's writer commits its row (as a first checkpoint would), and the
        // catalog's disk fails the sweep's read (EIO from every pread64 of the catalog and its
        // WAL, injected by strace attached to the paused evict).
        try sqlite("INSERT INTO entries SELECT * FROM saved; INSERT INTO ranges SELECT * FROM saved_ranges; DROP TABLE saved; DROP TABLE saved_ranges;")
        let tracer = try Child(FaultInjectionTests.strace, ["-f", "-p", "\(evict.pid)", "-o", "/dev/null", "-e", "trace=pread64",
                                                           "-e", "inject=pread64:error=EIO", "-P", db, "-P", db + "-wal"],
                               stdout: .capture, stderr: .capture)
        // strace says on stderr when it is attached ("Process N attached").
        let deadline = Date().addingTimeInterval(60)
        while !String(decoding: tracer.output().err, as: UTF8.self).contains("attached") && Date() < deadline { usleep(10_000) }
        #expect(String(decoding: tracer.output().err, as: UTF8.self).contains("attached"))
        pause.release()
        let ended = evict.finish()
        _ = tracer.finish()
        try? FileManager.default.removeItem(atPath: pause.prefix + ".reached")
        // The folder stayed: the entry is complete and byte-exact.
        #expect(FileSystem.exists(data), "evict: \(ended.status) \(ended.stderr)")
        let out = dir.file("o.out")
        let exported = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}
