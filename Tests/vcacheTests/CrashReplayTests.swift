import Foundation
import Testing
import VCacheTestSupport

/// Issue 25: every crash point of a recorded run, replayed (Tests/CrashReplay; `make crash-replay`
/// runs 200 states per workload). An LD_PRELOAD recorder logs vcache's writes, syncs and namespace
/// changes in four workloads (a prefetch and its resume; evict, verify --fix and a prefetch; a
/// prefetch that drops two videos changed at the origin; serve, read through); each fsync
/// boundary's state (unsynced writes dropped, or kept in random subsets, or torn at 512-byte
/// sectors) is rebuilt and must hold: every claimed byte the origin's, every video reported
/// complete still complete, verify clean, a resume byte-exact. The recorder is first checked against `strace -f`, and the controls
/// (fsyncs ignored) must find failures.
@Suite(.serialized) struct CrashReplayTests {
    static let script = Fixtures.directory + "/../CrashReplay/crash-replay.sh"

    @Test(.requires(.cc, .python3, .nginx, .strace, .onPath("curl", "curl")))
    func everyCrashPointOfARecordedRunHolds() throws {
        let r = try Tool.run("/bin/bash", [Self.script, VCacheBinary.path, "16", "--strace"])
        let out = String(decoding: r.out, as: UTF8.self)
        let lines = out.split(separator: "\n").map(String.init)
        // The recorder saw every call strace saw on the cache.
        #expect(lines.contains { $0.hasPrefix("strace check:") && $0.contains(" recorded, 0 kinds differ") }, "\(out)\(r.err)")
        for workload in ["workload 1", "workload 2", "workload 3", "workload 4"] {
            #expect(lines.contains { $0.hasPrefix(workload) && $0.contains(" states (") && $0.contains("), 0 failed") }, "\(out)\(r.err)")
        }
        // A prefetch and its resume, and verify --fix: every fsync boundary replayed, not a sample.
        for workload in ["workload 1", "workload 2"] {
            #expect(lines.contains { $0.hasPrefix(workload) && $0.contains(" crash points: every one replayed;") }, "\(out)\(r.err)")
        }
        for line in lines where line.hasPrefix("workload ") { print(line) }
        // The controls found what a missing fsync does: without vcache's fsync of `data` the catalog
        // claims bytes that are not there; without any fsync, videos reported complete are lost.
        for control in ["control (vcache's fsync of data ignored):", "control (every fsync ignored):"] {
            #expect(lines.contains { $0.hasPrefix(control) && !$0.contains("), 0 failed") }, "\(out)\(r.err)")
        }
        #expect(r.status == 0 && lines.last == "crash replay: passed", "\(out)\(r.err)")
    }
}
