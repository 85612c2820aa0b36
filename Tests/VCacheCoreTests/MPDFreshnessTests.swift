import Foundation
import Testing
@testable import VCacheCore

/// How long serve keeps a dynamic MPD it fetched (`LivePlaylists.freshness(minimumUpdatePeriod:)`):
/// its minimumUpdatePeriod, never longer, at most an hour; hostile numbers clamp, as a live HLS
/// playlist's target duration does.
@Suite struct MPDFreshnessTests {
    @Test(arguments: [
        (2.0, Duration?.some(.seconds(2))),
        (0.5, .some(.milliseconds(500))),
        (0.0, nil),
        (-5.0, nil),
        (Double.nan, nil),
        (-Double.infinity, nil),
        (1e20, .some(.milliseconds(LivePlaylists.maxFreshnessMilliseconds))),
        (Double.infinity, .some(.milliseconds(LivePlaylists.maxFreshnessMilliseconds))),
        (9.3e15, .some(.milliseconds(LivePlaylists.maxFreshnessMilliseconds))),
        (1e-300, nil),  // under a millisecond: not kept (the fuzzer found it kept for zero)
        (0.001, .some(.milliseconds(1))),
    ])
    func aDynamicMPDStaysFreshForItsMinimumUpdatePeriodClamped(_ period: Double, _ expected: Duration?) {
        #expect(LivePlaylists.freshness(minimumUpdatePeriod: period) == expected)
    }

    @Test func noPeriodIsNeverKept() {
        #expect(LivePlaylists.freshness(minimumUpdatePeriod: nil) == nil)
    }
}
