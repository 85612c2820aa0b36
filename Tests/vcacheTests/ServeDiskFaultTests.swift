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

    @Test(.timeLimit(.minutes(5)), arguments: ["data", "catalog"])
    func aStoringJobTheDiskFailsSaysSoInOneLineAndThePlayerGetsEveryByte(file: String) throws {
        guard FaultInjectionTests.has(FaultInjectionTests.strace, "strace") else { return }
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
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, launcher: [
            FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=pwrite64",
            "-e", "inject=pwrite64:error=EIO:when=2+", "-P", path])
        // strace holds on to SIGTERM: serve itself is stopped.
        let pid = Self.tracee(of: serve.process.pid)
        defer {
            if let pid { kill(pid, SIGTERM) }
            serve.stop()
        }
        #expect(pid != nil)
        let got = try Curl.fetch([serve.url(url)], in: dir)
        #expect(got.status == 200 && got.body == body, "\(got.status), \(got.body.count) bytes; \(serve.log.suffix(3))")
        // The job's failure comes once it meets the fault (its commit may follow the response's end).
        let deadline = Date().addingTimeInterval(120)
        var lines: [String] = []
        while Date() < deadline {
            lines = serve.log.filter { $0.hasPrefix("vcache serve: cannot store ") }
            if !lines.isEmpty { break }
            usleep(50_000)
        }
        let cause = file == "data" ? "cannot write '\(path)': Input/output error" : "disk I/O error"
        #expect(lines.count == 1 && lines[0].hasPrefix("vcache serve: cannot store \(url): ") && lines[0].contains(cause)
                && lines[0].hasSuffix("; players are served from the origin meanwhile"), "\(serve.log)")
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil && claims.claimed >= 256 << 10)
    }

    /// A cached video sent by sendfile, and the disk failing under it (EIO from sendfile, then
    /// from libmicrohttpd's pread fallback): the player's response is cut, what it got is the
    /// video's own bytes, and the log line says the file could not be read (before: "the client
    /// left before the end", the client having left nothing).
    @Test(.timeLimit(.minutes(5)))
    func aCachedFileTheDiskCannotReadIsCutAndTheLogSaysWhy() throws {
        guard FaultInjectionTests.has(FaultInjectionTests.strace, "strace") else { return }
        let origin = try TestOrigin()
        let body = TestBytes.make(6 << 20, seed: 2552)
        origin.setResource("/r.mp4", .init(body: body, etag: "\"r\""))
        let url = origin.url("/r.mp4")
        let cache = dir.file("cache-read")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        let data = inspector.store.dataPath(try #require(try inspector.entry(url)).key)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, launcher: [
            FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=sendfile,pread64",
            "-e", "inject=sendfile:error=EIO:when=2+", "-e", "inject=pread64:error=EIO:when=2+", "-P", data])
        let pid = Self.tracee(of: serve.process.pid)
        defer {
            if let pid { kill(pid, SIGTERM) }
            serve.stop()
        }
        #expect(pid != nil)
        let out = dir.file("r.bin")
        let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, serve.url(url)])
        let got = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
        #expect(r.status == 18 && got.count < body.count && got == body.prefix(got.count), "curl \(r.status), \(got.count) bytes")
        let deadline = Date().addingTimeInterval(60)
        var lines: [String] = []
        while Date() < deadline {
            lines = serve.log.filter { $0.contains(" GET \(url) ") }
            if !lines.isEmpty { break }
            usleep(50_000)
        }
        #expect(lines.count == 1 && lines[0].hasSuffix("(cannot read the cached bytes: cannot read '\(data)': Input/output error)"), "\(serve.log)")
    }
}
