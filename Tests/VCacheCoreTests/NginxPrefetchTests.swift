import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

@Suite struct NginxPrefetchTests {
    @Test func headThenMiddleThenWholeRequestsNoByteTwiceAndEndsByteExact() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(4 << 20, seed: 7)
        let url = try nginx.publish("video.bin", body)
        let cache = try TestCache()

        let head = cache.prefetch(url, [.head(1 << 20)])
        #expect(head.error == nil)
        #expect(head.fetchedBytes == 1 << 20)
        let middle = cache.prefetch(url, [.span(first: 2 << 20, last: (3 << 20) - 1)])
        #expect(middle.error == nil)
        #expect(middle.fetchedBytes == 1 << 20)
        let whole = cache.prefetch(url)
        #expect(whole.error == nil)
        #expect(whole.fetchedBytes == 2 << 20)
        #expect(whole.alreadyCachedBytes == 2 << 20)
        #expect(whole.complete)

        #expect(try cache.inspector.dataSHA256(url) == TestBytes.sha256(body))
        let entry = try #require(try cache.inspector.entry(url))
        #expect(entry.sha256 == TestBytes.sha256(body))
        #expect(entry.ranges.ranges == [ByteRange(0, 4 << 20)])

        nginx.stop()  // flushes the access log
        let log = nginx.accessLog().filter { $0.path == "/video.bin" }
        #expect(log.map(\.range) == ["bytes=0-1048575", "bytes=2097152-3145727", "bytes=1048576-2097151", "bytes=3145728-4194303"])
        var seen = RangeSet()
        var total: Int64 = 0
        for line in log {
            let spec = try #require(line.range.flatMap { RangeRequest(httpSpec: String($0.dropFirst(6))) })
            let r = try #require(spec.resolve(length: 4 << 20))
            seen.insert(r)
            total += line.bytes
        }
        #expect(total == 4 << 20)
        #expect(seen.count == 4 << 20)
    }

    @Test func aSecondIdenticalPrefetchFetchesNothing() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-front.mp4")
        let url = try nginx.publish("v.mp4", body)
        let cache = try TestCache()
        #expect(cache.prefetch(url, [.head(100_000)]).fetchedBytes == 100_000)
        let again = cache.prefetch(url, [.head(100_000)])
        #expect(again.error == nil)
        #expect(again.fetchedBytes == 0)
        #expect(again.alreadyCachedBytes == 100_000)
        nginx.stop()
        #expect(nginx.accessLog().count == 1)
    }

    @Test func headLargerThanTheVideoIsClampedToItsLength() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-end.mp4")
        let url = try nginx.publish("v.mp4", body)
        let cache = try TestCache()
        let r = cache.prefetch(url, [.head(10 << 20)])
        #expect(r.error == nil)
        #expect(r.fetchedBytes == Int64(body.count))
        #expect(r.complete)
        #expect(try cache.inspector.entry(url)?.sha256 == TestBytes.sha256(body))
    }

    @Test func suffixAndOpenRangesWorkBeforeTheLengthIsKnown() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(1_000_000, seed: 3)
        let url = try nginx.publish("s.bin", body)
        let cache = try TestCache()
        let tail = cache.prefetch(url, [.suffix(1000)])
        #expect(tail.error == nil)
        #expect(tail.fetchedBytes == 1000)
        let open = cache.prefetch(url, [.span(first: 500_000, last: nil)])
        #expect(open.fetchedBytes == 499_000)
        let check = try cache.inspector.verifyClaims(url, origin: body)
        #expect(check.mismatch == nil)
        #expect(check.claimed == 500_000)
    }
}
