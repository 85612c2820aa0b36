import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A playlist through `serve` from an origin that later answers something else at its URL (a
/// maintenance page, a video, an error page under the playlist's Content-Type): the player never
/// gets the cached playlist unrewritten (its URIs would lead off the proxy) nor the other thing
/// rewritten as a playlist, and the good copy stays cached for offline. (DASH's F6, for HLS.)
@Suite struct HLSServeFaultTests {
    let dir = TempDirectory("vcache-hlsservefault")
    static let playlist = Data("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:2.0,\ns1.ts\n#EXT-X-ENDLIST\n".utf8)
    static let mpegURL = "application/vnd.apple.mpegurl"

    @Test(arguments: ["/s/list", "/s/index.m3u8"])
    func aPlaylistURLLaterAnsweredWithAnotherKindIsNeverTheCachedPlaylistUnrewritten(path: String) throws {
        let origin = try TestOrigin()
        origin.setResource(path, .init(body: Self.playlist, contentType: Self.mpegURL))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let url = serve.url(origin.url(path))
        let good = try Curl.fetch([url], in: dir)
        #expect(good.status == 200 && String(decoding: good.body, as: UTF8.self).contains("\(serve.base)/v/"))
        let html = Data("<html>maintenance</html>".utf8)
        var mp4 = Data([0, 0, 0, 24]) + Data("ftyp".utf8)
        mp4.append(Data(repeating: 0x20, count: 16))
        for (body, type) in [(html, "text/html"), (mp4, "video/mp4"), (html, Self.mpegURL)] {
            origin.setResource(path, .init(body: body, contentType: type))
            let got = try Curl.fetch([url], in: dir)
            #expect(got.body != Self.playlist, "\(path) \(type): the cached playlist went out unrewritten")
            #expect(!String(decoding: got.body, as: UTF8.self).contains("/v/"), "\(path) \(type): another kind was rewritten as a playlist")
            #expect(got.status == 502, "\(path) \(type): \(got.status)")
        }
        _ = serve.stop()
        let store = try CacheStore(directory: cache, readOnly: true)
        let e = try #require(try store.catalog.entry(key: CacheKeyRules().key(for: origin.url(path))))
        #expect(store.cachedBytes(of: e).map { Data($0) } == Self.playlist, "the good copy was not kept")
    }
}
