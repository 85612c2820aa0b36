import Foundation

/// `make bench` measures what durability and the digest cost inside a download by switching
/// each off with an environment variable. They exist for that measurement only: a cache written
/// with them is not crash-safe (no fsync) or not verifiable (a placeholder digest), no command
/// line option sets them, and Docs/cli.md does not offer them (Docs/performance.md names them).
enum BenchSwitches {
    /// `VCACHE_BENCH_NO_FSYNC=1`: `data` is never fsynced, the catalog commits with
    /// `synchronous=OFF`.
    static let noFsync = ProcessInfo.processInfo.environment["VCACHE_BENCH_NO_FSYNC"] == "1"
    /// `VCACHE_BENCH_NO_SHA=1`: no SHA-256 is computed; completed entries get a digest of zeros.
    static let noDigest = ProcessInfo.processInfo.environment["VCACHE_BENCH_NO_SHA"] == "1"
}
