#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `make bench` measures what durability and the digest cost inside a download by switching
/// each off with an environment variable. They exist for that measurement only: a cache written
/// with them is not crash-safe (no fsync) or not verifiable (a placeholder digest). They are read
/// only by a bench build (`-DVCACHE_BENCH_SWITCHES`, which make bench makes under .build/bench);
/// the binary users install ignores the variables, so no environment can turn off crash safety.
enum BenchSwitches {
    #if VCACHE_BENCH_SWITCHES
    /// `VCACHE_BENCH_NO_FSYNC=1`: `data` is never fsynced, the catalog commits with
    /// `synchronous=OFF`.
    static let noFsync = ProcessInfo.processInfo.environment["VCACHE_BENCH_NO_FSYNC"] == "1"
    /// `VCACHE_BENCH_NO_SHA=1`: no SHA-256 is computed; completed entries get a digest of zeros.
    static let noDigest = ProcessInfo.processInfo.environment["VCACHE_BENCH_NO_SHA"] == "1"
    #else
    static let noFsync = false
    static let noDigest = false
    #endif
}
