import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `serve` storing members of a stream its player holds an old manifest of (hostile probes h9c
/// F1, h9d F2): once serve stored members fetched from the origin, it asks for their manifest
/// again (`Proxy+Confirm`), so a re-encode between a player's manifest and its members never
/// leaves the new encode's members under the old cached copy. Served by TestOrigin.
@Suite struct ServeMemberConfirmTests {
    let dir = TempDirectory("vcache-serveconfirm")
    static let confirmed = "members were stored from the origin: unchanged, the members confirmed"
    static let taken = "members were stored from the origin: re-encoded on the origin"

    func fetch(_ base: String, _ paths: [String]) throws {
        for p in paths {
            let r = try Curl.fetch([base + p], in: dir)
            #expect(r.status == 200, "\(p): \(r.status)")
        }
    }

    /// A player got the MPD and the first segments through serve; the origin re-encodes in place;
    /// the player goes on with the MPD it holds. What serve stored of the new encode never stays
    /// under the old MPD: its confirming request finds the new MPD and takes it, the old members
    /// (and those just stored) dropped: every member cached afterwards is the new encode's.
    @Test
    func membersStoredAfterAReEncodeNeverStayUnderTheOldMPD() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let base = try ServeReEncodeTests.baseURL(mpd.body)
        try fetch(base, ["v/init.mp4", "v/0.m4s", "a/init.mp4", "a/0.m4s"])
        #expect(serve.logLines(within: 10) { $0.contains(Self.confirmed) }.count >= 1, "\(serve.log)")
        let new = DASHRevalidationTests.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 640), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        try fetch(base, ["v/1.m4s", "a/1.m4s"])
        #expect(serve.logLines(within: 10) { $0.contains(Self.taken) }.count == 1, "\(serve.log)")
        _ = serve.stop()
        #expect(try ServeReEncodeTests.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 640))
        for (path, sha) in try ServeReEncodeTests.cachedDASH(cache, origin) {
            #expect(sha == TestBytes.sha256(new[path]!), "\(path): the old encode's bytes cached")
        }
        // Nothing mixed to export: the cached MPD is the new one and names what is cached.
        let r = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(r.stdout.contains("0 of 1 ready"), "\(r.stdout)")
    }

    /// The cost stays bounded: a player filling its buffer (every member at once, none cached)
    /// costs one conditional MPD request, not one per member; a stream served from the cache asks
    /// nothing more than the player's own MPD request.
    @Test
    func aBurstOfMembersAsksForTheMPDOnceAndACachedStreamAsksNothing() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        let base = try ServeReEncodeTests.baseURL(mpd.body)
        try fetch(base, ServeReEncodeTests.dashPaths)
        #expect(serve.logLines(within: 10) { $0.contains(Self.confirmed) }.count >= 1, "\(serve.log)")
        let asked = origin.requests("/s/manifest.mpd").count
        #expect(asked <= 3, "\(asked) MPD requests for one player's MPD and 6 members")
        // Played again, from the cache: the player's MPD request only.
        let again = try Curl.fetch([serve.url(url)], in: dir)
        try fetch(try ServeReEncodeTests.baseURL(again.body), ServeReEncodeTests.dashPaths)
        let second = try Curl.fetch([serve.url(url)], in: dir)
        #expect(second.status == 200)
        _ = serve.stop()
        #expect(origin.requests("/s/manifest.mpd").count == asked + 2, "\(serve.log)")
        #expect(serve.log.filter { $0.contains(" serve GET ") }.count == asked - 1, "\(serve.log)")
    }
}
