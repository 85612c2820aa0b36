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

    /// A complete stream whose root a prefetch left marked `manifest-unconfirmed` (its end check
    /// got no answer: its members may be of two encodes). Returns the origin, cache and MPD URL.
    func markedStream() throws -> (origin: TestOrigin, cache: String, url: String, root: CacheKey) {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let warmed = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        let root = CacheKeyRules().key(for: url)
        try CacheStore(directory: cache).catalog.markRootUnconfirmed(root, true)
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifestUnconfirmed)
        return (origin, cache, url, root)
    }

    /// Offline, a marked stream's MPD is not answered from the cache (export refuses it alike):
    /// 502 with the reason in the log, not the cached copy over members of maybe two encodes.
    @Test
    func offlineAnUnconfirmedStreamIsNotAnsweredFromTheCache() throws {
        let (origin, cache, url, _) = try markedStream()
        origin.stop()
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        _ = serve.stop()
        #expect(mpd.status == 502)
        #expect(serve.log.contains { $0.contains(" 502 ") && $0.contains("the origin could not be reached, and the cached MPD's stream is not confirmed unchanged on the origin since members were fetched for it (manifest-unconfirmed: they may be of two encodes): not answered from the cache") },
                "\(serve.log)")
    }

    /// Online, an answer of the MPD finding the same encode clears the mark: the stream is ready
    /// again (and plays offline) without a prefetch.
    @Test
    func anAnswerConfirmingTheSameEncodeClearsTheMark() throws {
        let (_, cache, url, root) = try markedStream()
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(url)], in: dir).status == 200)
        _ = serve.stop()
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifest)
        let r = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(r.stdout.contains("1 of 1 ready"), "\(r.stdout)")
    }

    /// Serve taking the new version (h9d F6) clears the mark: every old member went with it.
    @Test
    func takingTheNewVersionClearsTheMark() throws {
        let (origin, cache, url, root) = try markedStream()
        let new = DASHRevalidationTests.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 640), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        #expect(serve.log.contains { $0.contains("re-encoded on the origin: the 6 entries cached from the old copy were dropped") }, "\(serve.log)")
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifest)
        try fetch(try ServeReEncodeTests.baseURL(mpd.body), ServeReEncodeTests.dashPaths)
        #expect(serve.logLines(within: 10) { $0.contains(Self.confirmed) }.count >= 1, "\(serve.log)")
        _ = serve.stop()
        #expect(try ServeReEncodeTests.cachedDASH(cache, origin) == new.mapValues { TestBytes.sha256($0) })
        let r = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(r.stdout.contains("1 of 1 ready"), "\(r.stdout)")
    }
}
