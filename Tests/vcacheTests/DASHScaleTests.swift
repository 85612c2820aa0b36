import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// MPDs that name close to a million segments (final-probe 4 and 6) and a stream evicted while a
/// prefetch expands it (probe D5).
@Suite struct DASHScaleTests {
    let dir = TempDirectory("vcache-dashscale")
    static let dashXML = DASHHostileOriginTests.dashXML

    /// A static MPD of `representations` video AdaptationSets, each a `$Number$` template of
    /// `segments` 1 s segments (99,999 each: under the per-Representation limit), all under `v/`
    /// (the same files: the stream's members are one Representation's, so a prefetch of it
    /// records 100,000 members, not a million, and the test takes seconds, not minutes).
    static func manyMPD(representations: Int, segments: Int = 99_999) -> Data {
        let sets = (0..<representations).map { i in
            """
            <AdaptationSet contentType="video" mimeType="video/mp4"><Representation id="r\(i)" bandwidth="\(100_000 + i)" width="320" height="180" codecs="avc1.42c00d">\
            <SegmentTemplate initialization="v/init.mp4" media="v/$Number%05d$.m4s" duration="1" timescale="1" startNumber="1"/>\
            </Representation></AdaptationSet>
            """
        }.joined()
        return Data("""
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT\(segments)S" minBufferTime="PT2S" \
            profiles="urn:mpeg:dash:profile:isoff-live:2011"><Period>\(sets)</Period></MPD>
            """.utf8)
    }

    /// `mpd` at /s/manifest.mpd of `origin`, asked twice through serve: 502 both times (the verdict
    /// remembered for that version), the log `saying` why, and nothing of it kept in `cache`.
    func refusedTwiceByServe(_ mpd: Data, origin: TestOrigin, cache: String, saying why: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        origin.setResource("/s/manifest.mpd", .init(body: mpd, contentType: Self.dashXML))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let first = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        let again = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        let log = serve.log.joined(separator: "\n")
        _ = serve.stop()
        #expect(first.status == 502 && again.status == 502, "\(first.status) \(again.status)", sourceLocation: sourceLocation)
        #expect(log.contains(why), "\(log)", sourceLocation: sourceLocation)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/manifest.mpd")) == nil, "the refused MPD was kept", sourceLocation: sourceLocation)
    }

    /// final-probe 4: 11 x 99,999 segments through serve is refused as prefetch refuses it (502,
    /// nothing kept), the first time and again (the verdict remembered for that version).
    @Test
    func serveRefusesAnMPDPastTheSegmentTotalAndKeepsNothing() throws {
        let origin = try TestOrigin()
        let cache = dir.file("cache")
        try refusedTwiceByServe(Self.manyMPD(representations: 11), origin: origin, cache: cache,
                                saying: "its Representations name more than the limit of 1000000 segments in all")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(!ls.stdout.contains("manifest.mpd"), "\(ls.stdout)")
    }

    /// One Representation past the per-Representation limit (100,000): serve refuses it as
    /// prefetch does (502, nothing kept); it answered 200 and kept the stream as `complete, 0/0
    /// segments` (hostile probe h2, F10).
    @Test
    func serveRefusesAnMPDWithARepresentationPastItsLimitAndKeepsNothing() throws {
        let origin = try TestOrigin()
        try refusedTwiceByServe(Self.manyMPD(representations: 1, segments: 1_000_001), origin: origin, cache: dir.file("cache-rep"),
                                saying: "the MPD cannot be read: Representation 'r0' has more than the limit of 100000 segments")
        let prefetch = try VCacheBinary.run(["prefetch", "--seconds", "1", origin.url("/s/manifest.mpd")], cacheDir: dir.file("cache-rep-prefetch"))
        #expect(prefetch.status == 4 && prefetch.stderr.contains("Representation 'r0' has more than the limit of 100000 segments"), "\(prefetch.stderr)")
    }

    /// final-probe 6: `ls` and `info` of a cached stream of 10 x 99,999 segments, 2 of each
    /// cached, count them all (read from the few cached entries' names, not by keying every URL).
    @Test
    func lsCountsAStreamOfAMillionSegmentsFromTheFewCached() throws {
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.manyMPD(representations: 10), contentType: Self.dashXML))
        origin.setResource("/s/v/init.mp4", .init(body: DASHHostileOriginTests.box("ftyp", 24, fill: 1), contentType: "video/mp4"))
        for n in 1...2 {
            origin.setResource(String(format: "/s/v/%05d.m4s", n), .init(body: DASHHostileOriginTests.box("moof", 300, fill: UInt8(n + 1)), contentType: "video/mp4"))
        }
        let cache = dir.file("cache")
        let run = try VCacheBinary.run(["prefetch", "--seconds", "2", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(run.status == 0, "\(run.stderr)")
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let row = try #require(ls.stdout.split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.first { $0["format"] as? String == "dash" }, "\(ls.stdout)")
        #expect(row["segments"] as? Int == 999_990)
        #expect(row["segments_cached"] as? Int == 20)
        #expect(row["entries"] as? Int == 4, "the MPD, the init, 2 segments")
        let reps = try #require(row["playlists"] as? [[String: Any]])
        #expect(reps.count == 10)
        for r in reps {
            #expect(r["segments"] as? Int == 99_999 && r["segments_cached"] as? Int == 2, "\(r)")
            #expect(r["seconds"] as? Double == 99_999 && r["seconds_cached"] as? Double == 2, "\(r)")
        }
        let info = try VCacheBinary.run(["info", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(info.status == 0)
        #expect(info.stdout.contains("id r9; 2/99999 segments, 2.0 of 99999.0 s"), "\(info.stdout)")
    }

    /// An MPD of more segments than serve lists eagerly (`Proxy.eagerMembers`, 10,000): serve's
    /// first answer records the MPD and each Representation's init, and each template segment
    /// when a player asks for it (so it is checked as a member before it is stored: an error page
    /// in a segment's place is 502 and not kept); `ls` counts every segment, offline the MPD
    /// lists what is cached, and `evict` of the stream takes what serve stored.
    /// Serve recorded 20,002 member rows for this MPD (999,990 for 10 x 99,999: a 312 MB catalog).
    @Test
    func serveRecordsTheTemplateSegmentsOfALargeMPDOnlyWhenItStoresThem() throws {
        let origin = try TestOrigin()
        let url = origin.url("/s/manifest.mpd")
        origin.setResource("/s/manifest.mpd", .init(body: Self.manyMPD(representations: 1, segments: 20_000), contentType: Self.dashXML))
        origin.setResource("/s/v/init.mp4", .init(body: DASHHostileOriginTests.box("ftyp", 24, fill: 1), lastModified: "Sat, 01 Jan 2022 00:00:00 GMT", contentType: "video/mp4"))
        var bodies: [String: Data] = ["v/init.mp4": DASHHostileOriginTests.box("ftyp", 24, fill: 1)]
        for n in 1...2 {
            bodies[String(format: "v/%05d.m4s", n)] = DASHHostileOriginTests.box("moof", 300, fill: UInt8(n + 1))
            origin.setResource(String(format: "/s/v/%05d.m4s", n), .init(body: bodies[String(format: "v/%05d.m4s", n)]!, lastModified: "Sat, 01 Jan 2022 00:00:00 GMT", contentType: "video/mp4"))
        }
        origin.setResource("/s/v/00003.m4s", .init(body: Data("<html>error</html>".utf8), contentType: "video/mp4"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let base = try ServeReEncodeTests.baseURL(mpd.body)
        for (name, body) in bodies {
            let r = try Curl.fetch([base + name], in: dir)
            #expect(r.status == 200 && r.body == body, "\(name): \(r.status)")
        }
        #expect(try Curl.fetch([base + "v/00003.m4s"], in: dir).status == 502, "an error page answered as a segment")
        // What it stored, confirmed by an answer of the MPD (until then not answered offline).
        #expect(serve.confirmed())
        _ = serve.stop()
        let store = try CacheStore(directory: cache, readOnly: true)
        let rules = CacheKeyRules()
        let stream = try #require(try store.catalog.stream(root: rules.key(for: url)))
        let want = Set([url, origin.url("/s/v/init.mp4"), origin.url("/s/v/00001.m4s"), origin.url("/s/v/00002.m4s"),
                        origin.url("/s/v/00003.m4s")].map { rules.key(for: $0) })
        #expect(Set(stream.keys) == want, "\(stream.keys.count) member rows")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/v/00003.m4s")).map { $0.ranges.isEmpty } ?? true, "the error page was kept")
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let row = try #require(ls.stdout.split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.first { $0["format"] as? String == "dash" }, "\(ls.stdout)")
        #expect(row["segments"] as? Int == 20_000, "\(row)")
        #expect(row["segments_cached"] as? Int == 2, "\(row)")
        #expect(row["entries"] as? Int == 4, "\(row)")
        // Offline, the MPD lists what plays from the cache: the init and the two segments (2 s).
        origin.stop()
        let offline = try ServeProcess(cacheDir: cache, logDir: dir)
        let answer = try Curl.fetch([offline.url(url)], in: dir)
        _ = offline.stop()
        #expect(answer.status == 200 && String(decoding: answer.body, as: UTF8.self).contains("mediaPresentationDuration=\"PT2.000S\""),
                "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
        let evict = try VCacheBinary.run(["evict", url], cacheDir: cache)
        #expect(evict.status == 0, "\(evict.stderr)")
        for path in ["/s/manifest.mpd", "/s/v/init.mp4", "/s/v/00001.m4s", "/s/v/00002.m4s"] {
            #expect(try CacheInspector(directory: cache).entry(origin.url(path)) == nil, "\(path) left after evicting the stream")
        }
    }

    /// A large MPD (template segments recorded one at a time) re-encoded in place (hostile probe
    /// h9d, F8): a segment cached as an entry of its own before serve recorded it (`prefetch` of
    /// its URL) is dropped with the old encode's members, so a player reading the new MPD gets
    /// the new encode's bytes, never the old ones kept under it.
    @Test
    func aSegmentCachedOnItsOwnIsDroppedByAReEncodeOfALargeMPD() throws {
        let origin = try TestOrigin()
        let url = origin.url("/s/manifest.mpd")
        func publish(_ seed: UInt8, width: Int) -> [String: Data] {
            let text = String(decoding: Self.manyMPD(representations: 1, segments: 20_000), as: UTF8.self).replacingOccurrences(of: "width=\"320\"", with: "width=\"\(width)\"")
            origin.setResource("/s/manifest.mpd", .init(body: Data(text.utf8), etag: "\"m\(seed)\"", contentType: Self.dashXML))
            var bodies: [String: Data] = ["v/init.mp4": DASHHostileOriginTests.box("ftyp", 24, fill: seed)]
            for n in 1...4 { bodies[String(format: "v/%05d.m4s", n)] = DASHHostileOriginTests.box("moof", 300, fill: seed &+ UInt8(n)) }
            for (name, body) in bodies { origin.setResource("/s/" + name, .init(body: body, etag: "\"\(seed)-\(name)\"", contentType: "video/mp4")) }
            return bodies
        }
        _ = publish(1, width: 320)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let base = try ServeReEncodeTests.baseURL(mpd.body)
        for name in ["v/init.mp4", "v/00001.m4s"] { #expect(try Curl.fetch([base + name], in: dir).status == 200, "\(name)") }
        #expect(serve.confirmed())
        let own = try VCacheBinary.run(["prefetch", "-q", origin.url("/s/v/00004.m4s")], cacheDir: cache)
        #expect(own.status == 0, "\(own.stderr)")
        let new = publish(7, width: 640)
        #expect(try Curl.fetch([serve.url(url)], in: dir).status == 200)
        #expect(serve.logLines(within: 5) { $0.contains("re-encoded on the origin: the 3 entries cached from the old copy were dropped") }.count == 1, "\(serve.log)")
        for name in ["v/00004.m4s", "v/00001.m4s", "v/init.mp4"] {
            let r = try Curl.fetch([base + name], in: dir)
            #expect(r.status == 200 && r.body == new[name], "\(name): the old encode's bytes under the new MPD")
        }
    }

    /// Probe D5: `evict --all` while a prefetch is fetching a stream's segments skips the whole
    /// stream (its MPD is held in use to the run's end); the run completes it, and nothing is loose.
    @Test
    func evictDuringAStreamPrefetchSkipsTheWholeStream() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: DASHHostileOriginTests.mpd(video: "v/"), contentType: Self.dashXML))
        origin.hold("/s/a/1.m4s", at: 100)
        let cache = dir.file("cache")
        let prefetch = try VCacheBinary.start(["prefetch", "-j", "1", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/a/1.m4s"))
        let evict = try VCacheBinary.run(["evict", "--all"], cacheDir: cache)
        origin.release("/s/a/1.m4s")
        let done = prefetch.finish()
        #expect(evict.status == 0, "\(evict.stderr)")
        #expect(!evict.stdout.contains("manifest.mpd") || evict.stdout.contains("skipped"), "\(evict.stdout)")
        #expect(done.status == 0, "\(done.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        #expect(ls.stdout.split(separator: "\n").filter { $0.contains("\"url\"") }.count == 1, "loose entries beside the stream: \(ls.stdout)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }

    /// Probe D5 and D6: a media segment cached on its own (moof, no moov) is a fragment, not a
    /// broken MP4: `verify` passes it.
    @Test
    func verifyPassesAMediaSegmentCachedOnItsOwn() throws {
        let origin = try TestOrigin()
        var segment = DASHHostileOriginTests.box("styp", 24)
        segment.append(DASHHostileOriginTests.box("moof", 100))
        segment.append(DASHHostileOriginTests.box("mdat", 200))
        origin.setResource("/s/seg-1.m4s", .init(body: segment, contentType: "video/mp4"))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", origin.url("/s/seg-1.m4s")], cacheDir: cache).status == 0)
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(!verify.stdout.contains("moov"), "\(verify.stdout)")
    }

    /// A fragment whose boxes do not tile it is still a problem.
    @Test
    func verifyStillFlagsACutFragment() throws {
        let origin = try TestOrigin()
        var segment = DASHHostileOriginTests.box("moof", 100)
        segment.append(Data([0, 0, 0x10, 0, 0x6d, 0x64, 0x61, 0x74]))  // an mdat of 4096 bytes, 8 of them here
        origin.setResource("/s/seg-1.m4s", .init(body: segment, contentType: "video/mp4"))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", origin.url("/s/seg-1.m4s")], cacheDir: cache).status == 0)
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 1, "\(verify.stdout)\(verify.stderr)")
        #expect(verify.stdout.contains("MP4 structure"), "\(verify.stdout)")
    }

    /// `evict` of a stream of one entry says "1 entry".
    @Test
    func evictSaysOneEntryInTheSingular() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: DASHHostileOriginTests.mpd(video: "v/"), contentType: Self.dashXML))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "--seconds", "1", "--variant", "worst", origin.url("/s/manifest.mpd")], cacheDir: cache).status == 0)
        // Its members gone one by one (each its own entry to evict by key), the MPD alone is left.
        let inspector = try CacheInspector(directory: cache)
        let members = try inspector.store.catalog.allEntries().filter { $0.latestURL != origin.url("/s/manifest.mpd") }
        #expect(!members.isEmpty)
        for m in members { #expect(try VCacheBinary.run(["evict", m.key.hex], cacheDir: cache).status == 0) }
        let evict = try VCacheBinary.run(["evict", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(evict.status == 0, "\(evict.stderr)")
        #expect(evict.stdout.contains("(DASH stream, 1 entry)"), "\(evict.stdout)")
    }
}
