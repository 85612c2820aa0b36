import Foundation
import Testing
import VCacheTestSupport

/// Issue 25: power cuts on a real file system (Tests/Scripts/powercut.sh; `make powercut` runs
/// 50). After a cut at a random moment of a prefetch: every claimed byte is the origin's, every
/// video reported complete is still complete, verify passes, a resume is byte-exact. The control
/// under eatmydata (no fsync) must fail, or the harness would prove nothing.
@Suite(.serialized) struct PowerCutTests {
    static let script = Fixtures.directory + "/../Scripts/powercut.sh"

    @Test(.requires(.loopDevice, .nginx, .python3, .onPath("curl", "curl")))
    func claimsSurvivePowerCuts() throws {
        let r = try Tool.run("/bin/bash", [Self.script, VCacheBinary.path, "8"])
        let out = String(decoding: r.out, as: UTF8.self)
        #expect(r.status == 0 && out.contains("power cuts: 8 cycles, 0 failed"), "\(out)\(r.err)")
    }

    @Test(.requires(.loopDevice, .nginx, .python3, .onPath("curl", "curl"), .onPath("eatmydata", "eatmydata")))
    func theHarnessSeesAMissingFsync() throws {
        let r = try Tool.run("/bin/bash", [Self.script, VCacheBinary.path, "6", "--control"])
        let out = String(decoding: r.out, as: UTF8.self)
        // Exit 0 only where some cycle failed under eatmydata (2 is a skip, 1 a harness that saw nothing).
        #expect(r.status == 0 && out.contains("control (eatmydata: fsync does nothing):"), "\(out)\(r.err)")
    }
}
