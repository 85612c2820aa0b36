import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, injected faults: a disk that fails to sync (EIO from `fsync` on `data`, or from
/// SQLite's `fdatasync` on the catalog, injected with strace) gives one clear line and exit 5,
/// claims nothing it did not make durable, and the next run completes byte-exact.
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
}
