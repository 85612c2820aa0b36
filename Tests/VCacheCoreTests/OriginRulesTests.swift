import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// Origins that send no length, weak or no validators, and the If-Range a resume sends.
@Suite struct OriginRulesTests {
    let origin: TestOrigin
    let body = TestBytes.make(3 << 20, seed: 41)

    init() throws { origin = try TestOrigin() }

    func chunked(_ path: String, etag: String? = nil) {
        origin.setResource(path, .init(body: body, etag: etag))
        var f = TestOrigin.Faults()
        f.chunkedWithoutLength = true
        origin.setFaults(path, f)
    }

    @Test
    func aChunked200WithoutALengthIsFetchedOnceAndItsLengthIsWhatArrived() throws {
        chunked("/live.mp4")
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/live.mp4"))
        #expect(r.error == nil)
        #expect(r.complete)
        #expect(r.length == Int64(body.count))
        #expect(origin.requests("/live.mp4").count == 1)
        #expect(origin.servedBytes("/live.mp4") == body.count)
        let entry = try #require(try cache.inspector.entry(origin.url("/live.mp4")))
        #expect(entry.length == Int64(body.count))
        #expect(entry.sha256 == TestBytes.sha256(body))

        let again = cache.prefetch(origin.url("/live.mp4"))
        #expect(again.error == nil)
        #expect(again.fetchedBytes == 0)
        #expect(origin.requests("/live.mp4").count == 1)
    }

    @Test
    func aHeadOfAChunkedBodyWithoutALengthWritesOnlyTheHeadAndAsksOnce() throws {
        chunked("/live.mp4", etag: "\"l\"")
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/live.mp4"), [.head(1 << 20)])
        #expect(r.error == nil)
        #expect(r.fetchedBytes == 1 << 20)
        #expect(origin.requests("/live.mp4") == ["bytes=0-1048575"])
        let entry = try #require(try cache.inspector.entry(origin.url("/live.mp4")))
        #expect(entry.length == nil)
        #expect(entry.ranges == RangeSet([ByteRange(0, 1 << 20)]))
        #expect(try cache.inspector.verifyClaims(origin.url("/live.mp4"), origin: body).mismatch == nil)
        #expect(FileSystem.status(cache.store.dataPath(entry.key)).map { Int64($0.st_size) } == 1 << 20)

        // The rest: one more whole response (the origin ignores ranges), the same strong ETag keeps the head.
        let rest = cache.prefetch(origin.url("/live.mp4"))
        #expect(rest.error == nil)
        #expect(rest.complete)
        #expect(origin.requests("/live.mp4").count == 2)
        #expect(try cache.inspector.entry(origin.url("/live.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func aResumeSendsTheStrongETagAsIfRangeNeverTheDate() throws {
        origin.setResource("/s.mp4", .init(body: body, etag: "\"s1\"", lastModified: "Mon, 02 Nov 2026 10:00:00 GMT"))
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/s.mp4"), [.head(1 << 20)]).error == nil)
        #expect(cache.prefetch(origin.url("/s.mp4")).error == nil)
        let second = try #require(origin.headers("/s.mp4").last)
        #expect(second["range"] == "bytes=1048576-3145727")
        #expect(second["if-range"] == "\"s1\"")
        #expect(origin.bytesServedTwice("/s.mp4") == 0)
    }

    @Test func anOriginWithLastModifiedOnlyResumesWithTheDate() throws {
        origin.setResource("/d.mp4", .init(body: body, etag: nil, lastModified: "Mon, 02 Nov 2026 10:00:00 GMT"))
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/d.mp4"), [.head(1 << 20)]).error == nil)
        let r = cache.prefetch(origin.url("/d.mp4"))
        #expect(r.error == nil && r.complete)
        #expect(origin.headers("/d.mp4").last?["if-range"] == "Mon, 02 Nov 2026 10:00:00 GMT")
        #expect(origin.bytesServedTwice("/d.mp4") == 0)
        #expect(try cache.inspector.entry(origin.url("/d.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func aWeakETagIsNeverSentAndAnotherRunStartsTheEntryOver() throws {
        origin.setResource("/w.mp4", .init(body: body, etag: "W/\"w1\"", lastModified: "Mon, 02 Nov 2026 10:00:00 GMT"))
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/w.mp4"), [.head(1 << 20)]).error == nil)
        let r = cache.prefetch(origin.url("/w.mp4"))
        #expect(r.error == nil && r.complete)
        #expect(cache.changes == 1)
        let last = try #require(origin.headers("/w.mp4").last)
        #expect(last["if-range"] == nil)
        // The head of the first run was not combined with the second run's bytes: fetched again.
        #expect(origin.requests("/w.mp4") == ["bytes=0-1048575", "bytes=0-3145727"])
        #expect(try cache.inspector.entry(origin.url("/w.mp4"))?.sha256 == TestBytes.sha256(body))

        // A complete entry needs nothing: no request, nothing dropped.
        let again = cache.prefetch(origin.url("/w.mp4"))
        #expect(again.error == nil && again.fetchedBytes == 0)
        #expect(origin.requests("/w.mp4").count == 2)
    }

    @Test func withinOneRunAWeakOriginsDroppedConnectionIsResumed() throws {
        origin.setResource("/wr.mp4", .init(body: body, etag: "W/\"w\""))
        var f = TestOrigin.Faults()
        f.dropAfterBytes = 1_000_000
        origin.setFaults("/wr.mp4", f)
        let cache = try TestCache()
        let r = cache.prefetch(origin.url("/wr.mp4"))
        #expect(r.error == nil && r.complete)
        #expect(origin.requests("/wr.mp4") == ["bytes=0-", "bytes=1000000-3145727"])
        #expect(origin.bytesServedTwice("/wr.mp4") == 0)
        #expect(try cache.inspector.entry(origin.url("/wr.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test func claimsBeyondAShortDataFileAreDroppedAndFetchedAgain() throws {
        origin.setResource("/p.mp4", .init(body: body, etag: "\"p\""))
        let cache = try TestCache()
        #expect(cache.prefetch(origin.url("/p.mp4")).complete)
        let entry = try #require(try cache.inspector.entry(origin.url("/p.mp4")))
        // As after a power cut that lost the file's tail while the catalog kept its claim.
        #expect(truncate(cache.store.dataPath(entry.key), 1 << 20) == 0)
        let r = cache.prefetch(origin.url("/p.mp4"))
        #expect(r.error == nil && r.complete)
        #expect(r.fetchedBytes == Int64(body.count) - (1 << 20))
        #expect(origin.requests("/p.mp4").last == "bytes=1048576-3145727")
        #expect(try cache.inspector.dataSHA256(origin.url("/p.mp4")) == TestBytes.sha256(body))

        // And a missing file claims nothing at all.
        #expect(unlink(cache.store.dataPath(entry.key)) == 0)
        let whole = cache.prefetch(origin.url("/p.mp4"))
        #expect(whole.error == nil && whole.complete)
        #expect(whole.fetchedBytes == Int64(body.count))
        #expect(try cache.inspector.dataSHA256(origin.url("/p.mp4")) == TestBytes.sha256(body))
    }
}
