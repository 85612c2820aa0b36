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
    static let strace = "/usr/bin/strace"
    static let fiuRun = "/usr/bin/fiu-run"

    /// What each test starts from: an origin serving 3 MiB of `seed` at `/name.mp4`, and a cache
    /// of its own with no size cap.
    struct Setup {
        let origin: TestOrigin
        let body: Data
        let url: String
        let cache: String
    }

    func setUp(_ name: String, seed: UInt64) throws -> Setup {
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: seed)
        origin.setResource("/\(name).mp4", .init(body: body, etag: "\"\(name)\""))
        let cache = dir.file("cache-\(name)")
        #expect(try VCacheBinary.run(["config", "unset", "max-size"], cacheDir: cache).status == 0)
        return Setup(origin: origin, body: body, url: origin.url("/\(name).mp4"), cache: cache)
    }

    /// vcache `args` under strace injecting `inject` (`call:error=E...`) into `calls`, on `path` only when given.
    func underStrace(_ s: Setup, calls: String, inject: String, path: String? = nil, _ args: [String]) throws -> (status: Int32, err: String) {
        let only = path.map { ["-P", $0] } ?? []
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(s.cache)", Self.strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=\(calls)",
                                              "-e", "inject=\(inject)"] + only + [VCacheBinary.path] + args)
        return (r.status, r.err)
    }

    /// The run exited `status` and said exactly one line of its own (`vcache: ...`), which `says` accepts.
    func expectOneLine(_ r: (status: Int32, err: String), status: Int32, _ says: (Substring) -> Bool,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == status, "\(r.err)", sourceLocation: sourceLocation)
        let lines = r.err.split(separator: "\n").filter { $0.contains("vcache: ") }
        #expect(lines.count == 1 && says(lines[0]), "\(r.err)", sourceLocation: sourceLocation)
    }

    @Test(.requires(.strace), arguments: ["fsync", "fdatasync"])
    func aSyncThatFailsClaimsNothingAndTheNextRunCompletes(call: String) throws {
        let s = try setUp("eio-\(call)", seed: 300)
        let r = try underStrace(s, calls: call, inject: "\(call):error=EIO", ["prefetch", s.url])
        // `data`'s sync names errno; SQLite's says "disk I/O error" (its extended code is the sync).
        expectOneLine(r, status: 5) { $0.contains("Input/output error") || $0.contains("disk I/O error") }
        #expect(try CacheInspector(directory: s.cache).entry(s.url)?.isComplete != true)
        try expectTrueClaimsThenResume(s)
    }

    /// Runs vcache prefetch under fiu-run with one libfiu control command (no control pipe).
    func prefetchUnderFiu(_ control: String, _ s: Setup) throws -> (status: Int32, err: String) {
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(s.cache)", Self.fiuRun, "-x", "-f", "", "-c", control, VCacheBinary.path, "prefetch", s.url])
        return (r.status, r.err)
    }

    /// The checks after a fault: every claim equals the origin's bytes; then a clean run
    /// completes with the origin's SHA-256 and verify passes.
    func expectTrueClaimsThenResume(_ s: Setup) throws {
        let (cache, url, body) = (s.cache, s.url, s.body)
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
    @Test(.requires(.fiuRun, .python3))
    func shortWritesLoseNothing() throws {
        let reduce = "enable name=posix/io/rw/pwrite/reduce"
        let control = try Tool.run(Self.fiuRun, ["-x", "-f", "", "-c", reduce, "/usr/bin/python3", "-c",
                                                 "import os; fd = os.open('\(dir.file("control"))', os.O_WRONLY | os.O_CREAT, 0o600); print(os.pwrite(fd, bytes(65536), 0))"])
        let written = Int(String(decoding: control.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(written.map { $0 < 65536 } == true, "libfiu made no short write: \(control.err)")
        let s = try setUp("short", seed: 2502)
        let r = try prefetchUnderFiu(reduce, s)
        #expect(r.status == 0, "\(r.err)")
        #expect(try CacheInspector(directory: s.cache).entry(s.url)?.isComplete == true)
        try expectTrueClaimsThenResume(s)
    }

    /// pwrite fails with EIO at random (on `data` or the catalog), at three rates: a run either
    /// completes, or says one line naming the I/O error and exits 5; the claims stay true and the
    /// next run completes. At least one of the three runs must have met a failure.
    @Test(.requires(.fiuRun))
    func randomWriteFailuresSayOneLineAndClaimNothingFalse() throws {
        var failed = 0
        for (i, probability) in ["0.05", "0.2", "0.5"].enumerated() {
            let s = try setUp("random-\(i)", seed: 2503)
            // failinfo=5: the errno libfiu sets is EIO (without it, any errno pwrite may give).
            let r = try prefetchUnderFiu("enable_random name=posix/io/rw/pwrite,probability=\(probability),failinfo=5", s)
            if r.status == 0 {
                #expect(try CacheInspector(directory: s.cache).entry(s.url)?.sha256 == TestBytes.sha256(s.body))
            } else {
                failed += 1
                // `data`'s write names errno; SQLite's says "disk I/O error", with the system's
                // reason when it kept one ("catalog error during COMMIT: disk I/O error (SQLite code 778)").
                expectOneLine(r, status: 5) { $0.contains("Input/output error") || $0.contains("disk I/O error") }
                #expect(try CacheInspector(directory: s.cache).entry(s.url)?.isComplete != true)
            }
            try expectTrueClaimsThenResume(s)
        }
        #expect(failed > 0, "no injected write failure was met")
    }

    /// Every pwrite64 to `data` from the fifth fails with ENOSPC (a disk full for this file):
    /// one line saying so, exit 5, claims true, the next run completes.
    @Test(.requires(.strace))
    func aFullDiskOnDataWritesSaysSoAndTheNextRunCompletes() throws {
        let s = try setUp("full", seed: 2504)
        let data = try CacheInspector(directory: s.cache).store.dataPath(CacheKeyRules().key(for: s.url))
        let r = try underStrace(s, calls: "pwrite64", inject: "pwrite64:error=ENOSPC:when=5+", path: data, ["prefetch", s.url])
        expectOneLine(r, status: 5) { $0.hasSuffix("vcache: cannot prefetch \(s.url): cannot write '\(data)': No space left on device; free space or lower the cache size with 'vcache evict'") }
        #expect(s.origin.requests("/full.mp4").count == 1)  // a full disk is not retried
        #expect(try CacheInspector(directory: s.cache).entry(s.url)?.isComplete != true)
        try expectTrueClaimsThenResume(s)
    }

    /// One pwrite64 to `data` fails with ENOSPC after part of the video was claimed: an older
    /// video goes to make room and the item runs again, finding its first attempt's bytes held.
    /// Those are this run's: the lines say the whole video fetched and nothing cached before
    /// (before: "fetched 1.2 MiB, 1.8 MiB already cached" for a video no run had cached).
    @Test(.requires(.strace))
    func aVideoRunAgainAfterAFullDiskIsSaidAsFetchedNotAsCachedBefore() throws {
        let s = try setUp("again", seed: 2505)
        s.origin.setResource("/old.mp4", .init(body: TestBytes.make(300_000, seed: 2506), etag: "\"old\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", s.origin.url("/old.mp4")], cacheDir: s.cache).status == 0)
        let data = try CacheInspector(directory: s.cache).store.dataPath(CacheKeyRules().key(for: s.url))
        let r = try underStrace(s, calls: "pwrite64", inject: "pwrite64:error=ENOSPC:when=30", path: data,
                                ["prefetch", s.url, "--progress", "lines"])
        #expect(r.status == 0, "\(r.err)")
        let lines = r.err.split(separator: "\n")
        #expect(lines.contains { $0.contains("evicted 1 entry (") && $0.hasSuffix(") to make room: \(s.origin.url("/old.mp4"))") }, "\(r.err)")
        #expect(lines.contains { $0.contains("ok \(s.url): fetched 3.0 MiB, 0 B already cached, complete") }, "\(r.err)")
        #expect(lines.last?.hasPrefix("fetched 3.0 MiB, 0 B already cached, in ") == true, "\(r.err)")
        #expect(try CacheInspector(directory: s.cache).dataSHA256(s.url) == TestBytes.sha256(s.body))
    }

    /// recvfrom fails with ECONNRESET from its 5th call on (libcurl reads up to 256 KiB a call) (retries meet it too): one line, exit
    /// 3 (try again later), claims true, the next run resumes and completes.
    @Test(.requires(.strace))
    func aConnectionResetWhileReceivingExits3AndTheNextRunResumes() throws {
        let s = try setUp("reset", seed: 2505)
        let r = try underStrace(s, calls: "recvfrom", inject: "recvfrom:error=ECONNRESET:when=5+", ["prefetch", "--retries", "1", s.url])
        expectOneLine(r, status: 3) { $0.hasSuffix("vcache: cannot prefetch \(s.url): connection failed while receiving (Recv failure: Connection reset by peer)") }
        #expect(try CacheInspector(directory: s.cache).entry(s.url)?.isComplete != true)
        try expectTrueClaimsThenResume(s)
    }

    /// socket(2) fails with EMFILE (no descriptor left for the connection to the origin): the
    /// line names that cause, not an origin that refused ("Couldn't connect to server", all
    /// libcurl says of it); exit 3, nothing claimed, the next run completes.
    @Test(.requires(.strace))
    func noDescriptorForASocketSaysSoAndTheNextRunCompletes() throws {
        let s = try setUp("nosocket", seed: 2508)
        let r = try underStrace(s, calls: "socket", inject: "socket:error=EMFILE", ["prefetch", "--retries", "0", s.url])
        expectOneLine(r, status: 3) { $0.hasSuffix("vcache: cannot prefetch \(s.url): cannot connect (cannot open a socket: Too many open files)") }
        #expect(try CacheInspector(directory: s.cache).verifyClaims(s.url, origin: s.body).claimed == 0)
        try expectTrueClaimsThenResume(s)
    }

    /// verify --fix drops a video changed at the origin: rows first, then a new `data`. When the
    /// old `data` cannot be removed (EIO from unlink), the fix says so in one line and exits 5
    /// (it was reported fixed, exit 1, with the file left in place); the claims stay true and the
    /// next prefetch stores the new version byte-exact.
    @Test(.requires(.strace))
    func aFixThatCannotReplaceDataSaysOneLineAndExits5() throws {
        let s = try setUp("fix", seed: 2506)
        #expect(try VCacheBinary.run(["prefetch", "-q", s.url], cacheDir: s.cache).status == 0)
        let changed = TestBytes.make(3 << 20, seed: 2507)
        s.origin.setResource("/fix.mp4", .init(body: changed, etag: "\"fix-2\""))
        let data = try CacheInspector(directory: s.cache).store.dataPath(CacheKeyRules().key(for: s.url))
        let r = try underStrace(s, calls: "unlink,unlinkat", inject: "unlink,unlinkat:error=EIO", path: data, ["verify", "--origin", "--fix"])
        expectOneLine(r, status: 5) { $0.hasSuffix("vcache: cannot fix \(s.url): cannot remove '\(data)': Input/output error") }
        try expectTrueClaimsThenResume(Setup(origin: s.origin, body: changed, url: s.url, cache: s.cache))
    }
}
