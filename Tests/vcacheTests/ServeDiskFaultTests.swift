import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, disk faults under `serve`: a storing job whose writes to `data`, or whose commits to
/// the catalog (its WAL), fail with EIO (injected with strace into serve). The player still gets
/// every byte, from the origin, byte-exact; the catalog claims only the origin's bytes; and serve
/// says so in one line of its own (before: nothing at all, so a failing disk left no trace while
/// every play went to the origin again).
@Suite struct ServeDiskFaultTests {
    let dir = TempDirectory("vcache-servedisk")

    /// The pid of the process strace started (its child).
    static func tracee(of pid: pid_t) -> pid_t? {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { pid_t($0) }
    }

    /// serve under `strace -f` with `calls` traced, each `inject` rule applied to `path`; then
    /// `body`, then serve stopped (strace holds on to SIGTERM: serve itself is sent it).
    func underStrace(_ cache: String, calls: String, inject: [String], path: String, _ body: (ServeProcess) throws -> Void) throws {
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, launcher: [FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null",
                                                                            "-e", "trace=" + calls] + inject.flatMap { ["-e", "inject=" + $0] } + ["-P", path])
        let pid = Self.tracee(of: serve.process.pid)
        defer {
            if let pid { kill(pid, SIGTERM) }
            serve.stop()
        }
        #expect(pid != nil)
        try body(serve)
    }

    @Test(.requires(.strace), arguments: ["data", "catalog"])
    func aStoringJobTheDiskFailsSaysSoInOneLineAndThePlayerGetsEveryByte(file: String) throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 2551)
        origin.setResource("/d.mp4", .init(body: body, etag: "\"d\""))
        let url = origin.url("/d.mp4")
        let cache = dir.file("cache-\(file)")
        // The head first, so that `data` and the catalog's WAL exist for strace's -P.
        #expect(try VCacheBinary.run(["prefetch", "-q", "--bytes", "256K", url], cacheDir: cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let path = file == "data" ? inspector.store.dataPath(try #require(try inspector.entry(url)).key) : cache + "/catalog.db-wal"
        #expect(FileManager.default.fileExists(atPath: path))
        try underStrace(cache, calls: "pwrite64", inject: ["pwrite64:error=EIO:when=2+"], path: path) { serve in
            let got = try Curl.fetch([serve.url(url)], in: dir)
            #expect(got.status == 200 && got.body == body, "\(got.status), \(got.body.count) bytes; \(serve.log.suffix(3))")
            // The job's failure comes once it meets the fault (its commit may follow the response's end).
            let lines = serve.logLines(within: 120) { $0.hasPrefix("vcache serve: cannot store ") }
            let cause = file == "data" ? "cannot write '\(path)': Input/output error" : "disk I/O error"
            #expect(lines.count == 1 && lines[0].hasPrefix("vcache serve: cannot store \(url): ") && lines[0].contains(cause)
                    && lines[0].hasSuffix("; players are served from the origin meanwhile"), "\(serve.log)")
        }
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil && claims.claimed >= 256 << 10)
    }

    /// A cached video sent by sendfile, and the disk failing under it (EIO from sendfile, then
    /// from libmicrohttpd's pread fallback): the player's response is cut, what it got is the
    /// video's own bytes, and the log line says the file could not be read (before: "the client
    /// left before the end", the client having left nothing).
    @Test(.requires(.strace))
    func aCachedFileTheDiskCannotReadIsCutAndTheLogSaysWhy() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(6 << 20, seed: 2552)
        origin.setResource("/r.mp4", .init(body: body, etag: "\"r\""))
        let url = origin.url("/r.mp4")
        let cache = dir.file("cache-read")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let data = inspector.store.dataPath(try #require(try inspector.entry(url)).key)
        try underStrace(cache, calls: "sendfile,pread64", inject: ["sendfile:error=EIO:when=2+", "pread64:error=EIO:when=2+"], path: data) { serve in
            let out = dir.file("r.bin")
            let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, serve.url(url)])
            let got = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
            #expect(r.status == 18 && got.count < body.count && got == body.prefix(got.count), "curl \(r.status), \(got.count) bytes")
            let lines = serve.logLines(within: 60) { $0.contains(" GET \(url) ") }
            #expect(lines.count == 1 && lines[0].hasSuffix("(cannot read the cached bytes: cannot read '\(data)': Input/output error)"), "\(serve.log)")
        }
    }

    /// serve running while `verify --fix` repairs a damaged catalog (sets it aside, starts a new
    /// one), then the video changes at the origin and a prefetch stores the new version: before,
    /// serve went on reading the old catalog, and answered a range with the new version's bytes
    /// (from the file the prefetch made) under the old version's ETag, as a HIT. Now it answers
    /// 503, says why in one line and stops with exit 5 (systemd's Restart=on-failure starts it
    /// again); started again, it serves the new version, byte-exact.
    @Test
    func serveStopsWhenARepairReplacedTheCatalogAndNeverSendsStaleClaims() throws {
        let origin = try TestOrigin()
        let old = TestBytes.make(3 << 20, seed: 2554), new = TestBytes.make(3 << 20, seed: 2555)
        origin.setResource("/c.mp4", .init(body: old, etag: "\"old\""))
        let url = origin.url("/c.mp4")
        let cache = dir.file("cache-repair")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--bytes", "1M", url], cacheDir: cache).status == 0)
        let db = cache + "/catalog.db"
        // Rows enough for many pages, so that damage to the newest rows' page spares the video's.
        let fill = try Tool.run("/usr/bin/sqlite3", [db, """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
            INSERT INTO entries (key, url, latest_url, created, last_used)
            SELECT printf('%064x', i), 'http://f/' || i || '/' || hex(zeroblob(150)), 'http://f/' || i || '/' || hex(zeroblob(150)), 1, 2 FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            """])
        #expect(fill.status == 0, "\(fill.err)")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { serve.stop() }
        let first = try Curl.fetch(["-r", "0-99", serve.url(url)], in: dir)
        #expect(first.status == 206 && first.headers["etag"] == "\"old\"" && first.body == old.prefix(100))

        let query = try Tool.run("/usr/bin/sqlite3", [db, "SELECT pageno FROM dbstat WHERE name='entries' AND pagetype='leaf' ORDER BY path DESC LIMIT 1"])
        let page = try #require(Int(String(decoding: query.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        let file = try #require(FileHandle(forUpdatingAtPath: db))
        try file.seek(toOffset: UInt64((page - 1) * 4096 + 8))
        file.write(Data(repeating: 0xff, count: 4000))
        try file.close()
        let fixed = try VCacheBinary.run(["verify", "--fix"], cacheDir: cache)
        #expect(fixed.stdout.contains("started a new one"), "\(fixed.stdout)\(fixed.stderr)")
        origin.setResource("/c.mp4", .init(body: new, etag: "\"new\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)

        let after = try Curl.fetch(["-r", "0-1048575", serve.url(url)], in: dir)
        #expect(!(after.body == new.prefix(after.body.count) && after.headers["etag"] == "\"old\""), "the new version's bytes under the old ETag")
        #expect(after.status == 503, "\(after.status) \(after.headers)")
        // It stops by itself after the 503 (a serve that does not would be stopped by the defer).
        guard after.status == 503 else { return }
        let ended = serve.process.finish()
        #expect(ended.exit.status == 5 && !ended.exit.signalled, "\(ended.exit)")
        #expect(serve.log.contains { $0.hasPrefix("vcache serve: the catalog of ") && $0.hasSuffix("was replaced (a repair by 'vcache verify --fix'); stopping: start serve again to use the new one") }, "\(serve.log)")

        let again = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { again.stop() }
        let played = try Curl.fetch(["-r", "0-1048575", again.url(url)], in: dir)
        #expect(played.status == 206 && played.headers["etag"] == "\"new\"" && played.body == new.prefix(1 << 20))
    }
}
