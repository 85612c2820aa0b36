import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// `CacheStore.cachedPlaylist`, the one reader of a cached playlist (prefetch, serve, check,
/// ls/info, export): the bytes only when the catalog claims them all, parsed against the URL
/// that answered.
@Suite struct CachedPlaylistTests {
    static let text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\ns0.ts\n#EXT-X-ENDLIST\n"

    @Test func readsAPlaylistCachedWholeAgainstItsURLAndNothingElse() throws {
        let origin = try TestOrigin()
        let body = Data(Self.text.utf8)
        origin.setResource("/p/index.m3u8", .init(body: body, contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/p/s0.ts", .init(body: Data(HLSMemberCheckTests.ts), contentType: "video/mp2t"))
        origin.setResource("/v.bin", .init(body: TestBytes.make(1000, seed: 3)))
        let cache = try TestCache()
        let rules = CacheKeyRules()
        let url = origin.url("/p/index.m3u8")
        #expect(cache.prefetch(url).error == nil)
        let copy = try #require(cache.store.cachedPlaylist(key: rules.key(for: url), keyRules: rules))
        #expect(copy.bytes == Array(body))
        #expect(copy.base == url)
        guard case .media(let media)? = copy.playlist else {
            Issue.record("not a media playlist")
            return
        }
        #expect(media.segments.map(\.uri) == [origin.url("/p/s0.ts")])
        // A base the caller knows (this run's final URL) stands in for the recorded one.
        let elsewhere = try #require(cache.store.cachedPlaylist(copy.entry, keyRules: rules, base: "http://elsewhere/q/index.m3u8"))
        guard case .media(let moved)? = elsewhere.playlist else {
            Issue.record("not a media playlist")
            return
        }
        #expect(moved.segments.map(\.uri) == ["http://elsewhere/q/s0.ts"])
        // An entry listed without its ranges is read again with them.
        var listed = copy.entry
        listed.ranges = RangeSet()
        #expect(cache.store.cachedPlaylist(listed, keyRules: rules)?.bytes == Array(body))
        // Not all claimed: nothing, complete or not.
        let bin = origin.url("/v.bin")
        #expect(cache.prefetch(bin, [RangeRequest(httpSpec: "0-99")!]).error == nil)
        let part = try #require(try cache.store.catalog.entry(key: rules.key(for: bin)))
        #expect(cache.store.cachedPlaylist(part, keyRules: rules, complete: false) == nil)
        // Not complete: nothing unless the caller takes an incomplete one.
        var incomplete = copy.entry
        incomplete.completed = nil
        #expect(cache.store.cachedPlaylist(incomplete, keyRules: rules) == nil)
        #expect(cache.store.cachedPlaylist(incomplete, keyRules: rules, complete: false)?.bytes == Array(body))
        // Past the 8 MiB vcache reads as one playlist: nothing.
        var huge = copy.entry
        huge.length = Int64(HLSPlaylist.maxBytes) + 1
        #expect(cache.store.cachedPlaylist(huge, keyRules: rules, complete: false) == nil)
    }
}
