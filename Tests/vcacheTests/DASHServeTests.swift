import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 35, serve: a DASH presentation read through `serve`, on ffmpeg's own streams served by nginx.
@Suite struct DASHServeTests {
    let dir = TempDirectory("vcache-dashserve")

    func origin() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        return nginx
    }

    /// A URL resolved against a proxy URL (`/v/<MPD>/init-stream0.m4s`) names another resource
    /// than the token: refused with 404 and a line saying why, never answered with the MPD's bytes.
    @Test(.requires(.nginx, .dashTools))
    func aNameThatIsNotTheOriginsIsRefusedNeverAnsweredWithAnotherResource() throws {
        let nginx = try origin()
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let mpd = nginx.url("/num/manifest.mpd")
        let own = try Curl.fetch([serve.url(mpd)], in: dir)
        #expect(own.status == 200 && String(decoding: own.body, as: UTF8.self).contains("<MPD"))
        let token = ProxyURLCoding.encode(mpd)
        let wrong = try Curl.fetch([serve.base + "/v/" + token + "/init-stream0.m4s"], in: dir)
        #expect(wrong.status == 404)
        let body = String(decoding: wrong.body, as: UTF8.self)
        #expect(body == "'init-stream0.m4s' is not the name of \(mpd) (a URL resolved against a proxy URL names another resource: not served)\n")
        // ffprobe through serve: never handed the MPD in the init segment's place; it reads the
        // rewritten MPD and finds both streams.
        let probe = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", serve.url(mpd)])
        #expect(probe.status == 0 && probe.err.isEmpty, "\(probe.err)")
        #expect(Set(String(decoding: probe.out, as: UTF8.self).split(separator: "\n")) == ["video", "audio"])
        _ = serve.stop()
        #expect(serve.log.contains { $0.contains(" 404 ") && $0.contains("'init-stream0.m4s' is not the name of") }, "\(serve.log)")
    }

    /// A `%00` in a request path is refused in both URL forms: libmicrohttpd hands the handler
    /// the decoded path as a C string, which ended at the NUL, so `/v/<init>/init-stream0.m4s%00.mpd`
    /// and `/d/<folder>/init-stream0.m4s%00.mpd` were answered 200 with the init segment's bytes,
    /// a resource the request does not name.
    @Test(.requires(.nginx, .dashTools))
    func anEncodedNulInAPathIsRefusedNeverReadAsTheNameBeforeIt() throws {
        let nginx = try origin()
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let initURL = nginx.url("/num/init-stream0.m4s"), folder = nginx.url("/num/")
        let own = try Curl.fetch([serve.base + "/d/" + ProxyURLCoding.encode(folder) + "/init-stream0.m4s"], in: dir)
        let initBytes = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/num/init-stream0.m4s"))
        #expect(own.status == 200 && own.body == initBytes)
        let viaFolder = try Curl.fetch([serve.base + "/d/" + ProxyURLCoding.encode(folder) + "/init-stream0.m4s%00.mpd"], in: dir)
        #expect(viaFolder.status == 400 && viaFolder.body.isEmpty)
        let viaName = try Curl.fetch([serve.base + "/v/" + ProxyURLCoding.encode(initURL) + "/init-stream0.m4s%00.mpd"], in: dir)
        #expect(viaName.status == 404)
        #expect(String(decoding: viaName.body, as: UTF8.self).hasPrefix("'init-stream0.m4s\u{01}.mpd' is not the name of \(initURL)"))
        _ = serve.stop()
    }

    /// Frames ffmpeg decodes of `map` through `url` (DASH-NOTES: count framecrc lines), and its stderr.
    static func frames(_ url: String, _ map: String) throws -> (count: Int, err: String) {
        let r = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", url, "-map", map, "-f", "framecrc", "-"])
        // ffmpeg's dashdec says this of a $Number$ template read straight from nginx too (it
        // probes the first fragment before it knows the timescale) and then decodes every frame.
        let noise = ["Error when loading first fragment of playlist", "Last message repeated", "Invalid data found when processing input"]
        let err = r.err.split(separator: "\n").filter { line in !noise.contains { line.contains($0) } }.joined(separator: "\n")
        return (String(decoding: r.out, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("0,") }.count, err)
    }

    /// Every kind of stream plays through serve (the MPD rewritten: no URL of it names the
    /// origin), and again with the origin stopped, from what the first play cached.
    @Test(.requires(.nginx, .dashTools))
    func everyKindPlaysThroughServeAndThenOffline() throws {
        let nginx = try origin()
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let origin = "http://127.0.0.1:\(nginx.port)"
        let streams = ["num", "tl", "list", "sb", "multi"]
        for s in streams {
            let url = serve.url(origin + "/\(s)/manifest.mpd")
            let got = try Curl.fetch([url], in: dir)
            let text = String(decoding: got.body, as: UTF8.self)
            #expect(got.status == 200 && got.headers["content-type"] == "application/dash+xml", "\(s): \(got.headers)")
            #expect(!text.contains(origin) && text.contains("<BaseURL>\(serve.base)/d/"), "\(s): \(text)")
            let video = try Self.frames(url, "0:v:0"), audio = try Self.frames(url, "0:a:0")
            #expect(video.count == 150 && video.err.isEmpty, "\(s) online: \(video.err)")
            #expect(audio.count > 270 && audio.err.isEmpty, "\(s) online: \(audio.err)")
        }
        // What it stored, confirmed by an answer of its MPDs (until then not answered offline).
        #expect(serve.confirmed())
        nginx.stop()
        let refused = RefusingPort(nginx.port)  // offline: nothing else may answer on that port
        defer { withExtendedLifetime(refused) {} }
        for s in streams {
            let url = serve.url(origin + "/\(s)/manifest.mpd")
            let video = try Self.frames(url, "0:v:0"), audio = try Self.frames(url, "0:a:0")
            #expect(video.count == 150 && video.err.isEmpty, "\(s) offline: \(video.count) frames; \(video.err)")
            #expect(audio.count > 270 && audio.err.isEmpty, "\(s) offline: \(audio.err)")
        }
        _ = serve.stop()
    }

    /// An AdaptationSet's SegmentTemplate that the rewrite makes absolute (its `..`) is resolved,
    /// for a Representation with a BaseURL of its own, against that Representation's base, as the
    /// player resolves it: ffmpeg plays it through serve as it does from the origin.
    @Test(.requires(.nginx, .dashTools))
    func anInheritedTemplateUnderARepresentationsBaseURLPlaysThroughServe() throws {
        let nginx = try origin()
        func set(_ id: Int, _ kind: String, _ rep: String) -> String {
            """
            <AdaptationSet id="\(id)" contentType="\(kind)" segmentAlignment="true">
            <SegmentTemplate timescale="1000000" duration="2000000" startNumber="1" initialization="../init-stream$RepresentationID$.m4s" media="../chunk-stream$RepresentationID$-$Number%05d$.m4s"/>
            <Representation id="\(id)" \(rep)><BaseURL>../num/sub/</BaseURL></Representation>
            </AdaptationSet>
            """
        }
        let mpd = """
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT6.0S" minBufferTime="PT4.0S">
            <Period id="0" start="PT0.0S">
            \(set(0, "video", "mimeType=\"video/mp4\" codecs=\"avc1.42c00d\" bandwidth=\"300000\" width=\"320\" height=\"180\""))
            \(set(1, "audio", "mimeType=\"audio/mp4\" codecs=\"mp4a.40.2\" bandwidth=\"64000\" audioSamplingRate=\"48000\""))
            </Period></MPD>
            """
        try FileManager.default.createDirectory(atPath: nginx.root + "/x", withIntermediateDirectories: true)
        try mpd.write(toFile: nginx.root + "/x/manifest.mpd", atomically: true, encoding: .utf8)
        let direct = try Self.frames(nginx.url("/x/manifest.mpd"), "0:v:0")
        #expect(direct.count == 150 && direct.err.isEmpty, "direct: \(direct.err)")
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let url = serve.url(nginx.url("/x/manifest.mpd"))
        let video = try Self.frames(url, "0:v:0"), audio = try Self.frames(url, "0:a:0")
        #expect(video.count == 150 && video.err.isEmpty, "through serve: \(video.count) frames; \(video.err)")
        #expect(audio.count > 270 && audio.err.isEmpty, "through serve: \(audio.err)")
        _ = serve.stop()
        // Every segment asked of the origin is in num's folder (ffmpeg probes one past the end: a 404 there).
        let asked = serve.log.filter { $0.contains(".m4s") }
        #expect(!asked.isEmpty && asked.allSatisfy { $0.contains(" GET \(nginx.url("/num/"))") }, "\(serve.log.joined(separator: "\n"))")
    }

    /// Warmed by prefetch (`--seconds 3`: two 2 s video segments; a SegmentBase file whole), then
    /// read through serve with the origin stopped: the MPD lists only what plays from the cache
    /// (the warmed video Representation and its audio; the time cached), so ABR cannot pick the
    /// other, and ffmpeg, mpv and GStreamer play the cached seconds cleanly.
    @Test(.requires(.nginx, .dashTools, .tool("/usr/bin/mpv", "mpv"), .gstreamer))
    func aWarmedStreamPlaysOfflineAndItsMPDListsOnlyWhatIsCached() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let origin = "http://127.0.0.1:\(nginx.port)"
        let partly = ["num", "tl", "list", "multi"]
        for s in partly {
            let r = try VCacheBinary.run(["prefetch", "-q", "--seconds", "3", origin + "/\(s)/manifest.mpd"], cacheDir: cache)
            #expect(r.status == 0, "\(s): \(r.stderr)")
        }
        #expect(try VCacheBinary.run(["prefetch", "-q", origin + "/sb/manifest.mpd"], cacheDir: cache).status == 0)
        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch([serve.url(origin + "/multi/manifest.mpd")], in: dir)
        #expect(got.status == 200 && got.headers["x-cache"] == "HIT" && got.headers["content-type"] == "application/dash+xml")
        let mpd = try MPD.parse(Array(got.body), url: serve.url(origin + "/multi/manifest.mpd"))
        let kept = mpd.representations.map { ($0.representation.id, mpd.periods[$0.period].adaptationSets[$0.set].language ?? "") }
        // Representation 0 (180p, the best: prefetch's default) and the eng audio; not the 90p nor the fra audio.
        #expect(kept.map(\.0) == ["0", "2"], "\(kept)")
        #expect(mpd.duration.map { $0 > 3.9 && $0 <= 4.0 } == true, "\(String(describing: mpd.duration))")
        for s in partly {
            let url = serve.url(origin + "/\(s)/manifest.mpd")
            let video = try Self.frames(url, "0:v:0"), audio = try Self.frames(url, "0:a:0")
            // Two 2 s segments at 25 fps.
            #expect(video.count == 100 && video.err.isEmpty, "\(s) offline: \(video.count) frames; \(video.err)")
            #expect(audio.count > 180 && audio.err.isEmpty, "\(s) offline: \(audio.count) frames; \(audio.err)")
        }
        let sb = try Self.frames(serve.url(origin + "/sb/manifest.mpd"), "0:v:0")
        #expect(sb.count == 150 && sb.err.isEmpty, "sb offline: \(sb.count) frames; \(sb.err)")
        // mpv, another player, plays them too (exit 2 when it cannot).
        for s in partly + ["sb"] {
            let mpv = try Tool.run("/usr/bin/mpv", ["--no-config", "--vo=null", "--ao=null", "--ao-null-untimed", "--untimed", "--really-quiet",
                                                    serve.url(origin + "/\(s)/manifest.mpd")])
            #expect(mpv.status == 0, "mpv, \(s) offline: \(mpv.err)")
        }
        // GStreamer's playbin, a third reader (its own DASH demuxer): every frame of the cached
        // seconds (two 2 s segments at 25 fps; the SegmentBase file whole), none past them.
        for (s, frames) in partly.map({ ($0, 100) }) + [("sb", 150)] {
            let got = try GStreamer.play(serve.url(origin + "/\(s)/manifest.mpd"))
            #expect(got.status == 0 && got.frames == frames, "GStreamer, \(s) offline: \(got.frames) frames, exit \(got.status): \(got.err)")
            #expect(got.last.map { abs($0 - Double(frames - 1) / 25) < 0.001 } == true, "GStreamer, \(s) offline: last frame at \(String(describing: got.last))")
        }
        _ = serve.stop()
    }

    /// A SegmentBase file warmed for its first seconds (`--seconds 3`: its init, sidx and the
    /// subsegments starting before 3 s, byte ranges of the one file) plays offline: serve's MPD
    /// lists it as a SegmentList of those byte ranges (read from the cached sidx) and lasts as long
    /// as they play, so ffmpeg and mpv never ask for bytes past them, and decode the cached
    /// seconds cleanly. (Before, the file counted only whole: nothing played, the MPD was answered
    /// as it is, and a player reading the file asked for what the cache does not hold.)
    @Test(.requires(.nginx, .dashTools, .tool("/usr/bin/mpv", "mpv")))
    func aSegmentBaseFileWarmedForItsFirstSecondsPlaysThemOffline() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/sb/manifest.mpd")
        let r = try VCacheBinary.run(["prefetch", "-q", "--seconds", "3", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch([serve.url(url)], in: dir)
        let text = String(decoding: got.body, as: UTF8.self)
        #expect(got.status == 200 && text.contains("<SegmentList") && text.contains("mediaRange=") && !text.contains("<SegmentBase"), "\(text)")
        let mpd = try MPD.parse(Array(got.body), url: serve.url(url))
        #expect(mpd.duration.map { $0 > 3.9 && $0 <= 4.0 } == true, "\(String(describing: mpd.duration))")
        let video = try Self.frames(serve.url(url), "0:v:0"), audio = try Self.frames(serve.url(url), "0:a:0")
        // Two 2 s subsegments at 25 fps; the audio's that start before 3 s.
        #expect(video.count == 100 && video.err.isEmpty, "offline: \(video.count) frames; \(video.err)")
        #expect(audio.count > 180 && audio.err.isEmpty, "offline: \(audio.count) frames; \(audio.err)")
        let mpv = try Tool.run("/usr/bin/mpv", ["--no-config", "--vo=null", "--ao=null", "--ao-null-untimed", "--untimed", "--really-quiet", serve.url(url)])
        #expect(mpv.status == 0, "mpv offline: \(mpv.err)")
        _ = serve.stop()
        // Every request the players made was answered from the cache: none cut short, none 502.
        #expect(!serve.log.contains { $0.contains(" 502 ") || $0.contains(" 416 ") }, "\(serve.log.joined(separator: "\n"))")
    }

    /// An MPD through serve is one origin request each time it is fetched fresh (two the first
    /// time: the head that finds it is an MPD, then the MPD), and the copy kept for offline is the
    /// very bytes answered, not a second fetch of them.
    @Test
    func aFreshMPDIsOneOriginRequestAndTheBytesAnsweredAreKept() throws {
        let origin = try TestOrigin()
        let path = "/s/manifest.mpd"
        func version(_ n: Int) -> Data { DASHHostileOriginTests.mpd(video: "v/") + Data("<!-- version \(n) -->\n".utf8) }
        origin.setResource(path, .init(body: version(1), contentType: "application/dash+xml"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let url = serve.url(origin.url(path))
        #expect(try Curl.fetch([url], in: dir).status == 200)
        let first = origin.requests(path).count
        #expect(first <= 2, "\(first) origin requests for the first answer")
        for n in 2...3 {
            origin.setResource(path, .init(body: version(n), contentType: "application/dash+xml"))
            let before = origin.requests(path).count
            let got = try Curl.fetch([url], in: dir)
            #expect(got.status == 200 && String(decoding: got.body, as: UTF8.self).contains("<!-- version \(n) -->"))
            #expect(origin.requests(path).count == before + 1, "version \(n): \(origin.requests(path).count - before) origin requests")
        }
        _ = serve.stop()
        let store = try CacheStore(directory: cache, readOnly: true)
        let e = try #require(try store.catalog.entry(key: CacheKeyRules().key(for: origin.url(path))))
        #expect(e.isComplete && store.cachedBytes(of: e).map { Data($0) } == version(3))
    }

    /// A raw query a player puts on a folder-form URL (`/d/<folder>/<path>?tok=...`: UrlQueryInfo,
    /// CMCD) reaches the origin as sent, after the reference's own query when it has one.
    @Test
    func aRawQueryOnAFolderURLReachesTheOrigin() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 5)
        var faults = TestOrigin.Faults()
        faults.requiredQuery = "tok=a%2Fb%3D"
        origin.setFaults("/s/v/0.m4s", faults)
        var both = TestOrigin.Faults()
        both.requiredQuery = "sig=1&tok=2"
        origin.setFaults("/s/v/1.m4s", both)
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let folder = serve.base + "/d/" + ProxyURLCoding.encode(origin.url("/s/")) + "/"
        let got = try Curl.fetch([folder + "v/0.m4s?tok=a%2Fb%3D"], in: dir)
        #expect(got.status == 200 && got.body == DASHHostileOriginTests.box("moof", 300, fill: 6), "\(got.status)")
        let merged = try Curl.fetch([folder + "v/1.m4s%3Fsig=1?tok=2"], in: dir)
        #expect(merged.status == 200 && merged.body == DASHHostileOriginTests.box("moof", 300, fill: 7), "\(merged.status)")
        _ = serve.stop()
    }

    static func dynamic(_ period: String, segments: Int) -> Data {
        var timeline = ""
        for k in 0..<segments { timeline += "<S t=\"\(k * 2)\" d=\"2\"/>" }
        return Data("""
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="2026-01-01T00:00:00Z" minimumUpdatePeriod="\(period)" profiles="urn:mpeg:dash:profile:isoff-live:2011">
            <Period id="0" start="PT0S"><AdaptationSet contentType="video"><Representation id="v" bandwidth="1">
            <SegmentTemplate timescale="1" initialization="init.mp4" media="$Time$.m4s"><SegmentTimeline>\(timeline)</SegmentTimeline></SegmentTemplate>
            </Representation></AdaptationSet></Period></MPD>
            """.utf8)
    }

    /// A dynamic MPD asked for again within its minimumUpdatePeriod is the copy fetched then (no
    /// origin request), and past it the origin's of the moment (never staler than the period); a
    /// period of 0 or a hostile one (negative) means fetched every time.
    @Test
    func aDynamicMPDIsFetchedAtMostOncePerMinimumUpdatePeriod() throws {
        let origin = try TestOrigin()
        origin.setResource("/live/manifest.mpd", .init(body: Self.dynamic("PT2S", segments: 1), contentType: "application/dash+xml"))
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let url = serve.url(origin.url("/live/manifest.mpd"))
        let first = try Curl.fetch([url], in: dir)
        let fetched = ContinuousClock.now
        #expect(first.status == 200 && first.headers["content-type"] == "application/dash+xml")
        let asked = origin.requests("/live/manifest.mpd").count
        origin.setResource("/live/manifest.mpd", .init(body: Self.dynamic("PT2S", segments: 2), contentType: "application/dash+xml"))
        let again = try Curl.fetch([url], in: dir)
        // Within 2 s of the fetch: the same answer, no origin request.
        #expect(ContinuousClock.now < fetched + .seconds(2), "the second request came too late to tell")
        #expect(again.body == first.body && again.headers["x-cache"] == "HIT")
        #expect(origin.requests("/live/manifest.mpd").count == asked)
        // Past the period: the origin's new MPD (its second segment).
        while ContinuousClock.now < fetched + .milliseconds(2100) { usleep(50_000) }
        let later = try Curl.fetch([url], in: dir)
        #expect(String(decoding: later.body, as: UTF8.self).contains("<S t=\"2\" d=\"2\"/>"))
        #expect(origin.requests("/live/manifest.mpd").count > asked)
        for period in ["PT0S", "PT-5S"] {
            let path = "/p\(period.count)/manifest.mpd"
            origin.setResource(path, .init(body: Self.dynamic(period, segments: 1), contentType: "application/dash+xml"))
            let u = serve.url(origin.url(path))
            _ = try Curl.fetch([u], in: dir)
            let before = origin.requests(path).count
            _ = try Curl.fetch([u], in: dir)
            #expect(origin.requests(path).count > before, "minimumUpdatePeriod \(period)")
        }
        _ = serve.stop()
    }
}
