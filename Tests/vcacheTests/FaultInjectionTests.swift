import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, injected faults: a disk that fails to sync (EIO from `fsync` on `data`, or from
/// SQLite's `fdatasync` on the catalog, injected with strace) gives one clear line and exit 5,
/// claims nothing it did not make durable, and the next run completes byte-exact. So do random
/// write failures (libfiu's `posix/io/rw/pwrite`, on `data` and the catalog alike) and a full
/// disk on `data`'s writes (ENOSPC from pwrite64); short writes (libfiu's
/// `posix/io/rw/pwrite/reduce`) lose nothing; a connection reset while receiving (ECONNRESET from
/// recvfrom) exits 3 and the next run resumes. Network faults in a namespace: NetworkFaultTests.
@Suite struct FaultInjectionTests {
    let dir = TempDirectory("vcache-faults")

    @Test(.timeLimit(.minutes(5)), arguments: ["fsync", "fdatasync"])
    func aSyncThatFailsClaimsNothingAndTheNextRunCompletes(call: String) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            print("skipped: strace is not installed")
            return
        }
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 300)
        origin.setResource("/eio.mp4", .init(body: body, etag: "\"eio\""))
        let cache = dir.file("cache-\(call)")
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        let url = origin.url("/eio.mp4")
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null",
                                              "-e", "trace=\(call)", "-e", "inject=\(call):error=EIO", VCacheBinary.path, "prefetch", url])
        #expect(r.status == 5, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.contains("vcache: ") }
        // `data`'s sync names errno; SQLite's says "disk I/O error" (its extended code is the sync).
        #expect(lines.count == 1 && (lines[0].contains("Input/output error") || lines[0].contains("disk I/O error")), "\(r.err)")
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil)
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete != true)
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    static let fiuRun = "/usr/bin/fiu-run"

    /// Runs vcache prefetch under fiu-run with one libfiu control command (no control pipe).
    func prefetchUnderFiu(_ control: String, cache: String, _ url: String) throws -> (status: Int32, err: String) {
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", Self.fiuRun, "-x", "-f", "", "-c", control, VCacheBinary.path, "prefetch", url])
        return (r.status, r.err)
    }

    /// The checks after a fault: every claim equals the origin's bytes; then a clean run
    /// completes with the origin's SHA-256 and verify passes.
    func expectTrueClaimsThenResume(cache: String, url: String, body: Data) throws {
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil, "a claimed range differs from the origin: \(String(describing: claims.mismatch))")
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// Every pwrite cut short (libfiu reduces its count; SQLite's writes too): vcache writes the
    /// rest, so the run completes byte-exact. A control first shows the injection is live here:
    /// python's pwrite of 64 KiB under the same command writes less.
    @Test(.timeLimit(.minutes(5)))
    func shortWritesLoseNothing() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.fiuRun), FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            print("skipped: fiu-run (fiu-utils) or python3 is not installed")
            return
        }
        let reduce = "enable name=posix/io/rw/pwrite/reduce"
        let control = try Tool.run(Self.fiuRun, ["-x", "-f", "", "-c", reduce, "/usr/bin/python3", "-c",
                                                 "import os; fd = os.open('\(dir.file("control"))', os.O_WRONLY | os.O_CREAT, 0o600); print(os.pwrite(fd, bytes(65536), 0))"])
        let written = Int(String(decoding: control.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(written.map { $0 < 65536 } == true, "libfiu made no short write: \(control.err)")
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 2502)
        origin.setResource("/short.mp4", .init(body: body, etag: "\"short\""))
        let cache = dir.file("cache-short")
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        let url = origin.url("/short.mp4")
        let r = try prefetchUnderFiu(reduce, cache: cache, url)
        #expect(r.status == 0, "\(r.err)")
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete == true)
        try expectTrueClaimsThenResume(cache: cache, url: url, body: body)
    }

    /// pwrite fails with EIO at random (on `data` or the catalog), at three rates: a run either
    /// completes, or says one line naming the I/O error and exits 5; the claims stay true and the
    /// next run completes. At least one of the three runs must have met a failure.
    @Test(.timeLimit(.minutes(6)))
    func randomWriteFailuresSayOneLineAndClaimNothingFalse() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.fiuRun) else {
            print("skipped: fiu-run (fiu-utils) is not installed")
            return
        }
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 2503)
        origin.setResource("/random.mp4", .init(body: body, etag: "\"random\""))
        let url = origin.url("/random.mp4")
        var failed = 0
        for (i, probability) in ["0.05", "0.2", "0.5"].enumerated() {
            let cache = dir.file("cache-random-\(i)")
            #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
            // failinfo=5: the errno libfiu sets is EIO (without it, any errno pwrite may give).
            let r = try prefetchUnderFiu("enable_random name=posix/io/rw/pwrite,probability=\(probability),failinfo=5", cache: cache, url)
            if r.status == 0 {
                #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
            } else {
                failed += 1
                #expect(r.status == 5, "\(r.err)")
                let lines = r.err.split(separator: "\n").filter { $0.contains("vcache: ") }
                // `data`'s write names errno; SQLite's says "disk I/O error", with the system's
                // reason when it kept one ("catalog error during COMMIT: disk I/O error (SQLite code 778)").
                #expect(lines.count == 1 && (lines[0].contains("Input/output error") || lines[0].contains("disk I/O error")), "\(r.err)")
                #expect(try CacheInspector(directory: cache).entry(url)?.isComplete != true)
            }
            try expectTrueClaimsThenResume(cache: cache, url: url, body: body)
        }
        #expect(failed > 0, "no injected write failure was met")
    }

    /// Every pwrite64 to `data` from the fifth fails with ENOSPC (a disk full for this file):
    /// one line saying so, exit 5, claims true, the next run completes.
    @Test(.timeLimit(.minutes(5)))
    func aFullDiskOnDataWritesSaysSoAndTheNextRunCompletes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            print("skipped: strace is not installed")
            return
        }
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 2504)
        origin.setResource("/full.mp4", .init(body: body, etag: "\"full\""))
        let cache = dir.file("cache-enospc")
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        let url = origin.url("/full.mp4")
        let data = try CacheInspector(directory: cache).store.dataPath(CacheKeyRules().key(for: url))
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=pwrite64",
                                              "-e", "inject=pwrite64:error=ENOSPC:when=5+", "-P", data, VCacheBinary.path, "prefetch", url])
        #expect(r.status == 5, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.contains("vcache: ") }
        #expect(lines.count == 1 && lines[0].hasSuffix("vcache: cannot prefetch \(url): cannot write '\(data)': No space left on device; free space or lower the cache size with 'vcache evict'"), "\(r.err)")
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete != true)
        try expectTrueClaimsThenResume(cache: cache, url: url, body: body)
    }

    /// recvfrom fails with ECONNRESET from its 5th call on (libcurl reads up to 256 KiB a call) (retries meet it too): one line, exit
    /// 3 (try again later), claims true, the next run resumes and completes.
    @Test(.timeLimit(.minutes(5)))
    func aConnectionResetWhileReceivingExits3AndTheNextRunResumes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            print("skipped: strace is not installed")
            return
        }
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 2505)
        origin.setResource("/reset.mp4", .init(body: body, etag: "\"reset\""))
        let cache = dir.file("cache-reset")
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        let url = origin.url("/reset.mp4")
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=recvfrom",
                                              "-e", "inject=recvfrom:error=ECONNRESET:when=5+", VCacheBinary.path, "prefetch", "--retries", "1", url])
        #expect(r.status == 3, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.contains("vcache: ") }
        #expect(lines.count == 1 && lines[0].hasSuffix("vcache: cannot prefetch \(url): connection failed while receiving (Recv failure: Connection reset by peer)"), "\(r.err)")
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete != true)
        try expectTrueClaimsThenResume(cache: cache, url: url, body: body)
    }
}
