import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A catalog held by another process: one clear line, nothing false claimed. (A full disk:
/// FaultInjectionTests, with ENOSPC injected by strace.)
@Suite struct ResourceErrorTests {
    let dir = TempDirectory("vcache-resource")
    var cache: String { dir.file("cache") }

    @Test func aCatalogLockedTooLongIsReportedWhileReadersCarryOn() throws {
        let origin = try TestOrigin()
        origin.setResource("/l.mp4", .init(body: TestBytes.make(100_000, seed: 2)))
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)

        let release = try holdCatalogWriteLock()
        let env = ["VCACHE_CATALOG_TIMEOUT": "1"]
        let blocked = try VCacheBinary.run(["prefetch", origin.url("/l.mp4")], cacheDir: cache, environment: env)
        let reader = try VCacheBinary.run(["ls"], cacheDir: cache, environment: env)
        release()

        #expect(blocked.status == 3)
        #expect(blocked.stderrLines.first == "vcache: cannot prefetch \(origin.url("/l.mp4")): the catalog stayed locked by another process for too long; try again later, or raise VCACHE_CATALOG_TIMEOUT (seconds)")
        #expect(blocked.stderrLines.last?.hasPrefix("0 done, 1 failed; nothing fetched, 0 B already cached, in ") == true, "\(blocked.stderr)")
        #expect(reader.status == 0)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/l.mp4")) == nil)
        // Once the lock is gone the same command works.
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/l.mp4")], cacheDir: cache).status == 0)
    }

    /// Another process holds the catalog's write lock (the sqlite3 CLI in a transaction) until
    /// the returned closure is called.
    func holdCatalogWriteLock() throws -> () -> Void {
        let holder = try Child("/usr/bin/sqlite3", [cache + "/catalog.db"], stdin: .pipe)
        holder.stdin?.write(Data("BEGIN IMMEDIATE;\nINSERT INTO config VALUES ('held', 'yes');\nSELECT 'locked';\n".utf8))
        let seen = holder.waitForOutput(timeout: 60) { String(decoding: $0, as: UTF8.self).contains("locked") }
        #expect(String(decoding: seen, as: UTF8.self).contains("locked"))
        return {
            holder.stdin?.write(Data("ROLLBACK;\n.quit\n".utf8))
            holder.closeStdin()
            holder.wait()
        }
    }

    /// A checkpoint that cannot commit stops that download: bytes it could never claim are not
    /// worth fetching (before, the transfer ran to the end of the video).
    @Test func aFailedCheckpointStopsTheDownload() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(8 << 20, seed: 8)
        origin.setResource("/c.mp4", .init(body: body, etag: "\"c\""))
        origin.throttle("/c.mp4", to: 2 << 20)
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        let release = try holdCatalogWriteLock()
        let r = try VCacheBinary.run(["prefetch", origin.url("/c.mp4")], cacheDir: cache, environment: ["VCACHE_CATALOG_TIMEOUT": "0.5"])
        release()
        #expect(r.status == 3)
        #expect(r.stderr.contains("vcache: cannot prefetch \(origin.url("/c.mp4")): the catalog stayed locked by another process for too long"))
        #expect(origin.servedBytes("/c.mp4") < 6 << 20)
        #expect(try CacheInspector(directory: cache).verifyClaims(origin.url("/c.mp4"), origin: body).mismatch == nil)
    }
}
