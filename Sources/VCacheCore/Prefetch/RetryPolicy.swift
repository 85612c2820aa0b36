#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What follows a transfer that ended: retry it after a backoff, go on to the next request, or
/// give the item up. Pure: the job carries the decision out (a timer, `nextRequest`, `finish`).
///
/// The rules: a retryable failure (connection errors, timeouts, stalls, 5xx, 408, 429) is retried
/// up to `retries` times, after `baseDelay * 2^(attempt-1)` seconds times a jitter of 0.8 to 1.2,
/// or after the origin's Retry-After when it sent one, never more than `maxDelay`; a transfer
/// that added bytes the entry did not hold starts the count again. Any other failure ends the item. A transfer that
/// ended cleanly with no byte while the same request would go out again is fruitless, and three
/// in a row end the item (`noProgress`). Too many version changes in a run end it as well.
struct RetryPolicy: Equatable, Sendable {
    /// Further attempts after a retryable failure.
    var retries: Int
    /// Seconds before the first retry; doubled for each further one.
    var baseDelay: Double
    /// Seconds no retry waits longer than, whatever Retry-After says.
    var maxDelay: Double = 120
    static let maxFruitlessTransfers = 3
    static let maxVersionChanges = 3

    init(retries: Int, baseDelay: Double, maxDelay: Double = 120) {
        self.retries = retries
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    init(_ options: PrefetchOptions) {
        self.init(retries: options.retries, baseDelay: options.retryDelay)
    }

    /// What one item has been through so far in this run.
    struct Count: Equatable, Sendable {
        /// Retries since bytes last arrived (0: none yet).
        var attempt = 0
        /// Transfers in a row that ended cleanly with no byte while more was wanted.
        var fruitless = 0
        /// Versions dropped in this run.
        var versionChanges = 0
    }

    /// How a transfer ended, as far as the policy cares.
    struct Ended: Equatable, Sendable {
        /// Why it failed (judged, written or below HTTP); nil when it ended cleanly.
        var failure: PrefetchError?
        /// Body bytes it added to what the entry held (bytes it only sent again do not count:
        /// a retry that brings nothing new is a failed attempt).
        var bytes: Int64
        /// Seconds the origin asked to wait (Retry-After), if it did.
        var retryAfter: Double? = nil
        /// The next request would be one this run still has to make (nothing is complete yet).
        var moreWanted: Bool
        /// The run is stopping (a signal or the deadline): no retry.
        var stopping = false
    }

    enum Decision: Equatable, Sendable {
        /// Retry after `delay` seconds: attempt number `attempt` since bytes last arrived.
        case retry(PrefetchError, attempt: Int, delay: Double)
        /// Go on: the next gap, the MP4's next step, or completion.
        case next
        case fail(PrefetchError)
    }

    /// The decision for a transfer that ended, and the count afterwards. `jitter` (0.8 to 1.2 in
    /// use) scales the computed backoff, never Retry-After.
    func decide(_ ended: Ended, after count: Count, jitter: Double) -> (Decision, Count) {
        var count = count
        if ended.bytes > 0 { count.attempt = 0 }
        if let failure = ended.failure {
            guard failure.isRetryable && count.attempt < retries && !ended.stopping else { return (.fail(failure), count) }
            count.attempt += 1
            let asked = ended.retryAfter.flatMap { Checked.clamp($0, to: 0...maxDelay) }
            return (.retry(failure, attempt: count.attempt, delay: asked ?? backoff(attempt: count.attempt, jitter: jitter)), count)
        }
        if ended.bytes > 0 {
            count.fruitless = 0
        } else if ended.moreWanted {
            // Nothing arrived and the same request would go out again.
            count.fruitless += 1
            if count.fruitless >= Self.maxFruitlessTransfers { return (.fail(.noProgress), count) }
        }
        return (.next, count)
    }

    /// Seconds before retry number `attempt` (1 for the first): `baseDelay * 2^(attempt-1)`
    /// times `jitter`, never more than `maxDelay`.
    func backoff(attempt: Int, jitter: Double) -> Double {
        Checked.clamp(baseDelay * pow(2, Double(attempt - 1)) * jitter, to: 0...maxDelay) ?? maxDelay
    }

    /// Counts a version change in this run; the error when it is one too many (an origin whose
    /// version flips per response would otherwise be dropped and fetched for ever).
    func versionChanged(_ reason: String, count: inout Count) -> PrefetchError? {
        count.versionChanges += 1
        return count.versionChanges >= Self.maxVersionChanges ? .unstableVersion(changes: count.versionChanges, reason: reason) : nil
    }
}
