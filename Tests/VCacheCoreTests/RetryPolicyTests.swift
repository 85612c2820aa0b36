import Testing
@testable import VCacheCore

/// What follows a transfer that ended, one line per situation: no origin, no process.
@Suite struct RetryPolicyTests {
    static let policy = RetryPolicy(retries: 3, baseDelay: 0.5)
    static let unavailable = PrefetchError.http(status: 503, reason: "Service Unavailable")
    static let stall = PrefetchError.transport(TransportError(kind: .stalled, message: "no data received for 2s", code: 28))
    static let cut = PrefetchError.transport(TransportError(kind: .partialBody, message: "transfer closed", code: 18))

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var policy = RetryPolicyTests.policy
        var failure: PrefetchError?
        var bytes: Int64 = 0
        var retryAfter: Double?
        var moreWanted = true
        var stopping = false
        var before = RetryPolicy.Count()
        var jitter = 1.0
        var expected: RetryPolicy.Decision
        var after: RetryPolicy.Count
        var testDescription: String { name }
    }

    static func count(attempt: Int = 0, fruitless: Int = 0) -> RetryPolicy.Count {
        RetryPolicy.Count(attempt: attempt, fruitless: fruitless)
    }

    static let cases: [Case] = [
        Case(name: "503 on the first try: retried after the base delay",
             failure: unavailable, expected: .retry(unavailable, attempt: 1, delay: 0.5), after: count(attempt: 1)),
        Case(name: "the second retry waits twice as long",
             failure: unavailable, before: count(attempt: 1), expected: .retry(unavailable, attempt: 2, delay: 1), after: count(attempt: 2)),
        Case(name: "the jitter scales the backoff",
             failure: unavailable, before: count(attempt: 2), jitter: 0.8, expected: .retry(unavailable, attempt: 3, delay: 1.6), after: count(attempt: 3)),
        Case(name: "Retry-After replaces the backoff, with no jitter",
             failure: .http(status: 429, reason: "Too Many Requests"), retryAfter: 7, jitter: 1.2,
             expected: .retry(.http(status: 429, reason: "Too Many Requests"), attempt: 1, delay: 7), after: count(attempt: 1)),
        Case(name: "Retry-After is capped at two minutes",
             failure: unavailable, retryAfter: 3600, expected: .retry(unavailable, attempt: 1, delay: 120), after: count(attempt: 1)),
        Case(name: "the backoff is capped at two minutes",
             policy: RetryPolicy(retries: 20, baseDelay: 0.5), failure: unavailable, before: count(attempt: 10),
             expected: .retry(unavailable, attempt: 11, delay: 120), after: count(attempt: 11)),
        Case(name: "retries used up: the last failure ends the item",
             failure: unavailable, before: count(attempt: 3), expected: .fail(unavailable), after: count(attempt: 3)),
        Case(name: "no retries allowed: the first failure ends the item",
             policy: RetryPolicy(retries: 0, baseDelay: 0.5), failure: unavailable, expected: .fail(unavailable), after: count()),
        Case(name: "a cut body that delivered bytes starts the count again",
             failure: cut, bytes: 4096, before: count(attempt: 3), expected: .retry(cut, attempt: 1, delay: 0.5), after: count(attempt: 1)),
        Case(name: "a stall is retried",
             failure: stall, expected: .retry(stall, attempt: 1, delay: 0.5), after: count(attempt: 1)),
        Case(name: "408 is retried",
             failure: .http(status: 408, reason: "Request Timeout"),
             expected: .retry(.http(status: 408, reason: "Request Timeout"), attempt: 1, delay: 0.5), after: count(attempt: 1)),
        Case(name: "404 is not retried",
             failure: .http(status: 404, reason: "Not Found"), expected: .fail(.http(status: 404, reason: "Not Found")), after: count()),
        Case(name: "a wrong Content-Range is not retried",
             failure: .badContentRange(asked: "0-99", got: "bytes 1-100/1000"),
             expected: .fail(.badContentRange(asked: "0-99", got: "bytes 1-100/1000")), after: count()),
        Case(name: "a refused redirect scheme is not retried",
             failure: .transport(TransportError(kind: .refusedScheme, message: "ftp", code: 1)),
             expected: .fail(.transport(TransportError(kind: .refusedScheme, message: "ftp", code: 1))), after: count()),
        Case(name: "a full disk is not retried",
             failure: .disk(SystemError("write", path: "/c/data", errno: 28)),
             expected: .fail(.disk(SystemError("write", path: "/c/data", errno: 28))), after: count()),
        Case(name: "the run is stopping: no retry",
             failure: unavailable, stopping: true, expected: .fail(unavailable), after: count()),
        Case(name: "a clean end with bytes: on to the next request, the counts start again",
             bytes: 100, before: count(attempt: 2, fruitless: 2), expected: .next, after: count()),
        Case(name: "a clean end with no byte while more is wanted: fruitless",
             expected: .next, after: count(fruitless: 1)),
        Case(name: "the third fruitless transfer in a row ends the item",
             before: count(fruitless: 2), expected: .fail(.noProgress), after: count(fruitless: 3)),
        Case(name: "a clean end with no byte and nothing more wanted: on, not fruitless",
             moreWanted: false, before: count(fruitless: 2), expected: .next, after: count(fruitless: 2)),
    ]

    @Test(arguments: cases)
    func decision(_ c: Case) {
        let ended = RetryPolicy.Ended(failure: c.failure, bytes: c.bytes, retryAfter: c.retryAfter, moreWanted: c.moreWanted, stopping: c.stopping)
        let (decision, after) = c.policy.decide(ended, after: c.before, jitter: c.jitter)
        #expect(decision == c.expected)
        #expect(after == c.after)
    }

    @Test(arguments: [(0, false), (1, false), (2, true), (5, true)])
    func theThirdVersionChangeInARunGivesUp(before: Int, givesUp: Bool) {
        var count = RetryPolicy.Count(versionChanges: before)
        let e = Self.policy.versionChanged("its length changed", count: &count)
        #expect(count.versionChanges == before + 1)
        #expect(e == (givesUp ? .unstableVersion(changes: before + 1, reason: "its length changed") : nil))
    }
}
