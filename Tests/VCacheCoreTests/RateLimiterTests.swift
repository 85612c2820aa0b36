import Testing
@testable import VCacheCore

@Suite struct RateLimiterTests {
    @Test func anEmptyBucketPausesUntilItRefills() {
        let limiter = RateLimiter(bytesPerSecond: 100_000)  // bucket of 16 KiB (its minimum)
        #expect(limiter.take(20_000))         // the full bucket, and some debt
        #expect(!limiter.take(1))             // now empty: pause
        #expect(limiter.millisecondsUntilTokens >= 1)
    }

    @Test func oneChunkLargerThanTheBucketPassesIntoDebt() {
        let limiter = RateLimiter(bytesPerSecond: 10_000)
        #expect(limiter.take(64 * 1024))
        #expect(!limiter.take(1))
        #expect(limiter.millisecondsUntilTokens > 1000 / 2)
    }
}
