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

    /// Members whose fetch began while serve's question was at the origin are not covered by its
    /// answer (hostile probe h10b, F3): the origin re-encodes while the question is in flight, its
    /// answer (begun before) finds the old encode, the player's next members are the new one's;
    /// another question follows and takes the new version, so nothing of two encodes stays.
    @Test
    func membersBegunWhileTheQuestionIsInFlightAreAskedForAgain() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        let old = DASHRevalidationTests.mpd(width: 320)
        origin.setResource("/s/manifest.mpd", .init(body: old, etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        let base = try ServeReEncodeTests.baseURL(mpd.body)
        try fetch(base, ["v/init.mp4", "v/0.m4s"])
        #expect(serve.logLines(within: 10) { $0.contains(Self.confirmed) }.count >= 1, "\(serve.log)")
        // The next question gets the same bytes under another ETag (a 200), held at the origin.
        origin.setResource("/s/manifest.mpd", .init(body: old, etag: "\"m1b\"", contentType: DASHRevalidationTests.dashXML))
        origin.hold("/s/manifest.mpd", at: 1)
        try fetch(base, ["a/init.mp4"])
        #expect(origin.waitUntilHeld("/s/manifest.mpd"), "\(serve.log)")
        // Re-encoded while it is in flight; the player goes on.
        let new = DASHRevalidationTests.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 640), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        try fetch(base, ["v/1.m4s", "a/0.m4s", "a/1.m4s"])
        origin.release("/s/manifest.mpd")
        #expect(serve.logLines(within: 20) { $0.contains(Self.taken) }.count == 1, "\(serve.log)")
        _ = serve.stop()
        #expect(try ServeReEncodeTests.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 640))
        for (path, sha) in try ServeReEncodeTests.cachedDASH(cache, origin) {
            #expect(sha == TestBytes.sha256(new[path]!), "\(path): the old encode's bytes cached")
        }
    }

    /// A player fetching one segment at a time, at its playback pace, is not a question per
    /// segment (h10b F2): each answer finding the same encode doubles the wait before the next.
    @Test
    func aPlayerAtPlaybackPaceCostsFewQuestions() throws {
        let origin = try TestOrigin()
        let count = 14
        var members: [String] = []
        for n in 0..<count {
            let path = "/p/\(n).m4s"
            origin.setResource(path, .init(body: DASHHostileOriginTests.box("moof", 300, fill: UInt8(n + 1)), etag: "\"p\(n)\"", contentType: "video/iso.segment"))
            members.append("\(n).m4s")
        }
        origin.setResource("/p/init.mp4", .init(body: DASHHostileOriginTests.box("ftyp", 24, fill: 99), etag: "\"pi\"", contentType: "video/mp4"))
        let mpd = Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT\(count)S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="init.mp4" media="$Number$.m4s" duration="1" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.42c00d"/>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
        origin.setResource("/p/manifest.mpd", .init(body: mpd, etag: "\"pm\"", contentType: DASHRevalidationTests.dashXML))
        let serve = try ServeProcess(cacheDir: dir.file("c"), logDir: dir)
        let answer = try Curl.fetch([serve.url(origin.url("/p/manifest.mpd"))], in: dir)
        let base = try ServeReEncodeTests.baseURL(answer.body)
        try fetch(base, ["init.mp4"])
        // One segment each 0.6 s: a player's pace (what is measured is the questions, not time).
        for m in members {
            try fetch(base, [m])
            usleep(600_000)
        }
        // Every member confirmed in the end (the last question waits up to 30 s).
        #expect(serve.confirmed(within: 60), "\(serve.log)")
        _ = serve.stop()
        let questions = origin.requests("/p/manifest.mpd").count - 1
        #expect(questions <= 7, "\(questions) MPD questions for \(count + 1) members at 0.6 s each: \(serve.log)")
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

    /// Offline, a marked stream's members are not answered from the cache either, to a player
    /// that holds its MPD from before (hostile probes h10b, h10c F7): 502, as its MPD; online,
    /// its manifest answered the same encode, they are.
    @Test
    func offlineTheMembersOfAnUnconfirmedStreamAreNotAnsweredFromTheCache() throws {
        let (origin, cache, url, _) = try markedStream()
        let member = origin.url("/s/v/0.m4s")
        origin.stop()
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let offline = try Curl.fetch([serve.url(member)], in: dir)
        _ = serve.stop()
        #expect(offline.status == 502)
        #expect(serve.log.contains { $0.contains(" 502 ") && $0.contains("its stream is not confirmed unchanged on the origin since members were fetched for it (manifest-unconfirmed: they may be of two encodes), and its manifest could not be asked: not answered from the cache") }, "\(serve.log)")
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(CacheKeyRules().key(for: url)) == .manifestUnconfirmed)
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

    /// A VOD media playlist with four segments; returns their bodies. `seed` makes an encode.
    static func mediaPlaylist(_ origin: TestOrigin, seed: UInt64, duration: String) -> [Data] {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:3\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        var out: [Data] = []
        for n in 0..<4 {
            text += "#EXTINF:\(duration),\n\(n).ts\n"
            out.append(HLSHostileOriginTests.ts(20, seed: seed &+ UInt64(n)))
            origin.setResource("/p/\(n).ts", .init(body: out[n], etag: "\"\(seed)-\(n)\"", contentType: "video/mp2t"))
        }
        origin.setResource("/p/index.m3u8", .init(body: Data((text + "#EXT-X-ENDLIST\n").utf8), etag: "\"p\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
        return out
    }

    /// HLS alike: a player holds the media playlist it read, the origin re-encodes, the player
    /// asks for the last segments: serve's question of the playlist takes the new version, and
    /// what stays cached is the new encode's only; offline, the playlist answered is the new one.
    @Test
    func hlsSegmentsStoredAfterAReEncodeNeverStayUnderTheOldPlaylist() throws {
        let origin = try TestOrigin()
        _ = Self.mediaPlaylist(origin, seed: 1, duration: "2.0")
        let cache = dir.file("c"), url = origin.url("/p/index.m3u8")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let media = try Curl.fetch([serve.url(url)], in: dir)
        #expect(media.status == 200)
        let uris = String(decoding: media.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init)
        #expect(uris.count == 4)
        try fetch("", Array(uris.prefix(2)))
        #expect(serve.logLines(within: 10) { $0.contains(Self.confirmed) }.count >= 1, "\(serve.log)")
        #expect(serve.confirmed())
        let new = Self.mediaPlaylist(origin, seed: 50, duration: "2.5")
        try fetch("", Array(uris.suffix(2)))
        #expect(serve.logLines(within: 10) { $0.contains(Self.taken) }.count == 1, "\(serve.log)")
        #expect(serve.confirmed())
        let store = try CacheStore(directory: cache, readOnly: true), inspector = try CacheInspector(directory: cache)
        let playlist = try #require(try inspector.entry(url))
        #expect(store.cachedBytes(of: playlist).map { String(decoding: $0, as: UTF8.self).contains("#EXTINF:2.5,") } == true, "the old playlist stayed")
        for n in 0..<4 {
            guard let e = try inspector.entry(origin.url("/p/\(n).ts")), e.isComplete, let len = e.length else { continue }
            #expect(store.cachedBytes(of: e, at: 0, count: len).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(new[n]), "\(n).ts: the old encode's")
        }
        _ = serve.stop()
    }

    /// Offline, a media playlist whose stream is marked unconfirmed is not answered from the cache.
    @Test
    func offlineAnUnconfirmedPlaylistIsNotAnsweredFromTheCache() throws {
        let origin = try TestOrigin()
        _ = Self.mediaPlaylist(origin, seed: 1, duration: "2.0")
        let cache = dir.file("c"), url = origin.url("/p/index.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        try CacheStore(directory: cache).catalog.markRootUnconfirmed(CacheKeyRules().key(for: url), true)
        origin.stop()
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let answer = try Curl.fetch([serve.url(url)], in: dir)
        _ = serve.stop()
        #expect(answer.status == 502)
        #expect(serve.log.contains { $0.contains("the cached playlist's stream is not confirmed unchanged on the origin since members were fetched for it") }, "\(serve.log)")
    }

    /// The question unanswered (503): the stream stays marked unconfirmed (not ready, not
    /// answered offline, `/status` counts it) until an answer of the MPD confirms it: a player's
    /// next MPD request clears it.
    @Test
    func anUnansweredQuestionLeavesTheMarkUntilAnAnswerConfirms() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd"), root = CacheKeyRules().key(for: url)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        var unavailable = TestOrigin.Faults()
        unavailable.statuses = [(503, [:])]
        origin.setFaults("/s/manifest.mpd", unavailable)
        try fetch(try ServeReEncodeTests.baseURL(mpd.body), ServeReEncodeTests.dashPaths)
        let failed = serve.logLines(within: 10) { $0.contains("members were stored from the origin: no answer to judge by (origin answered 503): its stream stays marked unconfirmed (not answered from the cache offline, not exported) until an answer confirms it") }
        #expect(failed.count == 1, "\(serve.log)")
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifestUnconfirmed)
        #expect(!serve.confirmed(within: 0.2))
        #expect(try Curl.fetch([serve.url(url)], in: dir).status == 200)
        #expect(serve.confirmed())
        _ = serve.stop()
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifest)
        let r = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(r.stdout.contains("1 of 1 ready"), "\(r.stdout)")
    }

    /// The origin unreachable as the player stopped (h10b F6): serve asks the unanswered question
    /// again by itself (after 10 s, backing off), so a stream played online is playable offline
    /// once the origin answered, without a player asking its manifest online again.
    @Test
    func serveAsksAnUnansweredQuestionAgainByItself() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd"), root = CacheKeyRules().key(for: url)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        var unavailable = TestOrigin.Faults()
        unavailable.statuses = [(503, [:])]
        origin.setFaults("/s/manifest.mpd", unavailable)
        try fetch(try ServeReEncodeTests.baseURL(mpd.body), ServeReEncodeTests.dashPaths)
        #expect(serve.logLines(within: 10) { $0.contains("no answer to judge by (origin answered 503)") }.count == 1, "\(serve.log)")
        // No player asks anything more: serve asks again by itself.
        #expect(serve.confirmed(within: 40), "\(serve.log)")
        #expect(serve.log.contains { $0.contains(Self.confirmed) }, "\(serve.log)")
        _ = serve.stop()
        #expect(origin.requests("/s/manifest.mpd").count == 3)
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(root) == .manifest)
    }

    /// A manifest evicted while its question waits to be asked again: the question ends (one
    /// line), it is not asked every few minutes for as long as serve runs.
    @Test
    func aQuestionWhoseManifestIsEvictedEnds() throws {
        let origin = try TestOrigin()
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        var unavailable = TestOrigin.Faults()
        unavailable.statuses = [(503, [:])]
        origin.setFaults("/s/manifest.mpd", unavailable)
        try fetch(try ServeReEncodeTests.baseURL(mpd.body), ServeReEncodeTests.dashPaths)
        #expect(serve.logLines(within: 10) { $0.contains("no answer to judge by (origin answered 503)") }.count == 1, "\(serve.log)")
        let evicted = try VCacheBinary.run(["evict", url], cacheDir: cache)
        #expect(evicted.status == 0, "\(evicted.stderr)")
        #expect(serve.confirmed(within: 40), "\(serve.log)")
        _ = serve.stop()
        #expect(serve.log.filter { $0.contains("its copy is no longer cached whole") }.count == 1, "\(serve.log)")
        #expect(origin.requests("/s/manifest.mpd").count == 2)
    }
}
