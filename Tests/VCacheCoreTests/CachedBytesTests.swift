import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// `CacheStore.cachedBytes(of:at:count:)`, the one read of claimed bytes that export's member
/// naming, serve's playlist sniffing and prefetch's stream discovery share: it gives bytes only
/// when every one of them is claimed, and never reads past the entry's end.
@Suite struct CachedBytesTests {
    @Test func givesOnlyClaimedBytesAndStopsAtTheEnd() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 31)
        origin.setResource("/c.mp4", .init(body: body))
        let cache = try TestCache()
        let url = origin.url("/c.mp4")
        // 0..<100000 and 200000..<300000 claimed; the middle not.
        let r = cache.prefetch(url, [RangeRequest(httpSpec: "0-99999")!, RangeRequest(httpSpec: "200000-")!])
        #expect(r.error == nil)
        let e = try #require(try cache.store.catalog.entry(key: CacheKeyRules().key(for: URL(string: url)!)))
        #expect(e.ranges == RangeSet([ByteRange(0, 100_000), ByteRange(200_000, 300_000)]))

        #expect(cache.store.cachedBytes(of: e, count: 16) == Array(body[0..<16]))
        #expect(cache.store.cachedBytes(of: e, at: 250_000, count: 512) == Array(body[250_000..<250_512]))
        #expect(cache.store.cachedBytes(of: e, at: 299_900, count: 512) == Array(body[299_900...]))  // clipped at the end
        #expect(cache.store.cachedBytes(of: e, at: 99_990, count: 20) == nil)  // half unclaimed
        #expect(cache.store.cachedBytes(of: e, at: 150_000, count: 1) == nil)
        #expect(cache.store.cachedBytes(of: e, at: 300_000, count: 1) == nil)  // past the end
        #expect(cache.store.cachedBytes(of: e, at: -1, count: 1) == nil)
        #expect(cache.store.cachedBytes(of: e) == nil)  // the whole entry is not claimed
    }
}
