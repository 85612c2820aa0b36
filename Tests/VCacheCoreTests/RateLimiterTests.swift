import Testing
@testable import VCacheCore

/// The limiter reads a clock the test moves by hand: no refill happens between two calls however
/// long the scheduler keeps the test's thread off a core.
@Suite struct RateLimiterTests {
    final class Clock: @unchecked Sendable {
        // @unchecked: one test's thread only.
        var instant = ContinuousClock.now
        func advance(_ d: Duration) { instant += d }
    }

    @Test func anEmptyBucketPausesUntilItRefills() {
        let clock = Clock()
        let limiter = RateLimiter(bytesPerSecond: 100_000, now: { clock.instant })  // bucket of 16 KiB (its minimum)
        #expect(limiter.take(20_000))         // the full bucket, and some debt (3_616 bytes)
        #expect(!limiter.take(1))             // now empty: pause
        #expect(limiter.millisecondsUntilTokens == 37)  // 3_616 bytes at 100 kB/s, plus one
        clock.advance(.milliseconds(36))
        #expect(!limiter.take(1))             // 3_600 repaid: still 16 bytes in debt
        clock.advance(.milliseconds(1))
        #expect(limiter.take(1))              // refilled
    }

    @Test func oneChunkLargerThanTheBucketPassesIntoDebt() {
        let clock = Clock()
        let limiter = RateLimiter(bytesPerSecond: 10_000, now: { clock.instant })
        #expect(limiter.take(64 * 1024))
        #expect(!limiter.take(1))
        #expect(limiter.millisecondsUntilTokens == 1000)  // 49_152 bytes of debt is 4.9 s: capped at 1 s per wait
        clock.advance(.seconds(4))
        #expect(!limiter.take(1))
        clock.advance(.seconds(1))
        #expect(limiter.take(1))
    }
}
