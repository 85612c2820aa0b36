import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Faults nginx cannot produce, against the in-process origin.
@Suite struct FaultOriginTests {
    let origin: TestOrigin
    let body = TestBytes.make(2 << 20, seed: 11)

    init() throws {
        origin = try TestOrigin()
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\"", lastModified: "Mon, 02 Nov 2026 10:00:00 GMT"))
    }

    @Test func aDroppedConnectionIsResumedByTheNextRunFetchingExactlyTheRest() throws {
        var faults = TestOrigin.Faults()
        faults.dropAfterBytes = 300_000
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        var noRetry = TestCache.fastOptions()
        noRetry.retries = 0

        let first = cache.prefetch(origin.url("/v.mp4"), options: noRetry)
        guard case .transport(let t) = first.error else { Issue.record("expected a transport error, got \(String(describing: first.error))"); return }
        #expect(t.kind == .partialBody)
        let claims = try cache.inspector.verifyClaims(origin.url("/v.mp4"), origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == 300_000)

        let second = cache.prefetch(origin.url("/v.mp4"), options: noRetry)
        #expect(second.error == nil)
        #expect(second.fetchedBytes == Int64(body.count) - 300_000)
        #expect(origin.requests("/v.mp4").last == "bytes=300000-2097151")
        #expect(origin.bytesServedTwice("/v.mp4") == 0)
        #expect(try cache.inspector.dataSHA256(origin.url("/v.mp4")) == TestBytes.sha256(body))
    }

    @Test func aDroppedConnectionIsRetriedWithinTheRunFromWhereItStopped() throws {
        var faults = TestOrigin.Faults()
        faults.dropAfterBytes = 500_000
        faults.dropCount = 2
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/v.mp4"))
        #expect(r.error == nil)
        #expect(r.complete)
        #expect(cache.retries.count == 2)
        #expect(origin.requests("/v.mp4") == ["bytes=0-", "bytes=500000-2097151", "bytes=1000000-2097151"])
        #expect(origin.bytesServedTwice("/v.mp4") == 0)
        #expect(try cache.inspector.entry(origin.url("/v.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func aChangedETagDropsOldRangesAndTheResultIsTheNewVideo() throws {
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/v.mp4"), [.head(1 << 20)]).error == nil)
        let newBody = TestBytes.make(2 << 20, seed: 12)
        origin.setResource("/v.mp4", .init(body: newBody, etag: "\"v2\"", lastModified: "Tue, 03 Nov 2026 10:00:00 GMT"))
        let r = cache.prefetch(origin.url("/v.mp4"))
        #expect(r.error == nil)
        #expect(cache.changes == 1)
        #expect(origin.requests("/v.mp4").last == "bytes=1048576-2097151")  // sent with If-Range: answered 200
        let entry = try #require(try cache.inspector.entry(origin.url("/v.mp4")))
        #expect(entry.etag == "\"v2\"")
        #expect(entry.sha256 == TestBytes.sha256(newBody))
        #expect(try cache.inspector.dataSHA256(origin.url("/v.mp4")) == TestBytes.sha256(newBody))
    }

    @Test func anOriginThatIgnoresIfRangeAndSendsA206OfTheNewVersionStillNeverMixes() throws {
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/v.mp4"), [.head(1 << 20)]).error == nil)
        let newBody = TestBytes.make(2 << 20, seed: 13)
        origin.setResource("/v.mp4", .init(body: newBody, etag: "\"v3\""))
        // The origin ignores If-Range when the etag differs in this variant: emulate by stripping it.
        var faults = TestOrigin.Faults()
        faults.ignoreIfRange = true
        origin.setFaults("/v.mp4", faults)
        let r = cache.prefetch(origin.url("/v.mp4"))
        #expect(r.error == nil)
        #expect(cache.changes == 1)
        #expect(try cache.inspector.dataSHA256(origin.url("/v.mp4")) == TestBytes.sha256(newBody))
    }

    @Test func a200InsteadOf206ReplacesTheCachedBytesWithTheWholeBody() throws {
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/v.mp4"), [.head(1 << 20)]).error == nil)
        var faults = TestOrigin.Faults()
        faults.ignoreRanges = true
        origin.setFaults("/v.mp4", faults)
        let r = cache.prefetch(origin.url("/v.mp4"))
        #expect(r.error == nil)
        #expect(r.complete)
        #expect(cache.changes == 0)  // the same strong ETag: the origin just ignores ranges
        #expect(try cache.inspector.entry(origin.url("/v.mp4"))?.sha256 == TestBytes.sha256(body))
        #expect(try cache.inspector.dataSHA256(origin.url("/v.mp4")) == TestBytes.sha256(body))
    }

    @Test func a200WithoutAStrongETagDropsTheOldBytesFirst() throws {
        origin.setResource("/w.mp4", .init(body: body, etag: "W/\"weak\""))
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/w.mp4"), [.head(1 << 20)]).error == nil)
        var faults = TestOrigin.Faults()
        faults.ignoreRanges = true
        origin.setFaults("/w.mp4", faults)
        let r = cache.prefetch(origin.url("/w.mp4"))
        #expect(r.error == nil)
        #expect(cache.changes == 1)  // a weak ETag proves nothing: the cached head was dropped
        #expect(try cache.inspector.entry(origin.url("/w.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func anEmptyVideoCompletesWithTheEmptyDigest() throws {
        origin.setResource("/empty.mp4", .init(body: Data(), etag: "\"e\""))
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/empty.mp4"))
        #expect(r.error == nil)
        #expect(r.complete)
        #expect(try cache.inspector.entry(origin.url("/empty.mp4"))?.sha256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func a200ToAHeadRequestStoresOnlyWhatWasAskedFor() throws {
        var faults = TestOrigin.Faults()
        faults.ignoreRanges = true
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/v.mp4"), [.head(100_000)])
        #expect(r.error == nil)
        let claims = try cache.inspector.verifyClaims(origin.url("/v.mp4"), origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == 100_000)
    }

    @Test func aWrongContentRangeIsRefusedAndNothingIsClaimed() throws {
        var faults = TestOrigin.Faults()
        faults.contentRangeShift = 1
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/v.mp4"), [.head(1000)])
        #expect(r.error == .badContentRange(asked: "0-999", got: "bytes 1-1000/2097152"))
        #expect(r.error?.description == "origin answered Content-Range 'bytes 1-1000/2097152' to a request for bytes=0-999; nothing from that response was kept")
        #expect(try cache.inspector.entry(origin.url("/v.mp4")) == nil)  // nothing claimed, no entry made
    }

    @Test func a404IsReportedWithoutRetriesAndClaimsNothing() throws {
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/missing.mp4"))
        #expect(r.error == .http(status: 404, reason: "Not Found"))
        #expect(r.error?.description == "origin answered 404 Not Found")
        #expect(cache.retries.isEmpty)
        #expect(origin.requests("/missing.mp4").count == 1)
        #expect(try cache.inspector.entry(origin.url("/missing.mp4")) == nil)  // no empty entry left behind
        #expect(!FileSystem.exists(cache.store.entryDirectory(r.key)))        // nor an empty folder
    }

    @Test func aStalledBodyHitsTheTimeoutAndKeepsWhatArrived() throws {
        var faults = TestOrigin.Faults()
        faults.stallAfterBytes = 100_000
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        var options = TestCache.fastOptions()
        options.retries = 0
        options.request.stallTimeout = 1
        let r = cache.prefetch(origin.url("/v.mp4"), options: options)
        guard case .transport(let t) = r.error else { Issue.record("expected a timeout, got \(String(describing: r.error))"); return }
        #expect(t.kind == .stalled)
        let claims = try cache.inspector.verifyClaims(origin.url("/v.mp4"), origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == 100_000)
    }

    @Test func aRedirectToANonHTTPSchemeIsRefused() throws {
        var faults = TestOrigin.Faults()
        faults.redirectTo = "ftp://127.0.0.1/v.mp4"
        origin.setFaults("/r.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/r.mp4"))
        guard case .transport(let t) = r.error else { Issue.record("expected a refused scheme, got \(String(describing: r.error))"); return }
        #expect(t.kind == .refusedScheme)
        #expect(cache.retries.isEmpty)
    }

    @Test func redirectsAreFollowedAndTheEntryIsKeyedByTheGivenURL() throws {
        var faults = TestOrigin.Faults()
        faults.redirectTo = origin.url("/v.mp4")
        origin.setFaults("/old.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/old.mp4"))
        #expect(r.error == nil)
        #expect(r.key == CacheKeyRules().key(for: URL(string: origin.url("/old.mp4"))!))
        #expect(try cache.inspector.entry(origin.url("/old.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func fiveHundredThreesAreRetriedAndTheDownloadCompletes() throws {
        var faults = TestOrigin.Faults()
        faults.statuses = [(503, [:]), (503, [:])]
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/v.mp4"))
        #expect(r.error == nil)
        #expect(cache.retries.map(\.attempt) == [1, 2])
        #expect(origin.bytesServedTwice("/v.mp4") == 0)
        #expect(try cache.inspector.entry(origin.url("/v.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func tooManyRequestsHonoursRetryAfter() throws {
        var faults = TestOrigin.Faults()
        faults.statuses = [(429, ["Retry-After": "1"])]
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/v.mp4"), [.head(1000)])
        #expect(r.error == nil)
        #expect(cache.retries.map(\.delay) == [1.0])
    }

    @Test func retriesGiveUpAfterTheLimitWithTheLastReason() throws {
        var faults = TestOrigin.Faults()
        faults.statuses = Array(repeating: (500, [:]), count: 5)
        origin.setFaults("/v.mp4", faults)
        let cache = try TestCache()
        var options = TestCache.fastOptions()
        options.retries = 2
        let r = cache.prefetch(origin.url("/v.mp4"), options: options)
        #expect(r.error == .http(status: 500, reason: "Internal Server Error"))
        #expect(origin.requests("/v.mp4").count == 3)
    }
}
