/// One token bucket shared by every transfer of a run (`--limit-rate`): the total download rate
/// stays under the cap however many downloads run at once. A transfer that finds the bucket empty
/// is paused (libcurl keeps the bytes and hands them again on resume) until the loop refills it.
/// Loop thread only.
final class RateLimiter {
    let bytesPerSecond: Double
    private var tokens: Double
    private let capacity: Double
    private let now: () -> ContinuousClock.Instant
    private var last: ContinuousClock.Instant

    /// `now`: the clock (tests pass one they move by hand, so no refill happens between two calls).
    init(bytesPerSecond: Int64, now: @escaping () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.bytesPerSecond = Double(bytesPerSecond)
        capacity = max(Double(bytesPerSecond) / 10, 16 * 1024)
        tokens = capacity
        self.now = now
        last = now()
    }

    /// Takes `n` bytes' worth; may leave the bucket in debt so one chunk larger than the bucket
    /// still passes. False when the bucket is empty: pause.
    func take(_ n: Int) -> Bool {
        refill()
        guard tokens > 0 else { return false }
        tokens -= Double(n)
        return true
    }

    func refill() {
        let instant = now()
        let elapsed = (instant - last).inSeconds
        last = instant
        tokens = min(capacity, tokens + bytesPerSecond * elapsed)
    }

    var hasTokens: Bool {
        refill()
        return tokens > 0
    }

    /// Milliseconds until the bucket has tokens again.
    var millisecondsUntilTokens: Int32 {
        tokens > 0 ? 0 : Int32(min(1000, max(1, (-tokens / bytesPerSecond) * 1000 + 1)))
    }
}
