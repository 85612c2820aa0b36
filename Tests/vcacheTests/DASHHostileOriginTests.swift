import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// DASH prefetch against origins a hostile probe used: one that sends no validator at all, one
/// whose MPD names or redirects segments to another host, one whose MPD carries control
/// characters, one whose MPD has no end. Served by the in-process TestOrigin.
@Suite struct DASHHostileOriginTests {
    let dir = TempDirectory("vcache-dashhostile")
    static let dashXML = "application/dash+xml"

    /// An ISO BMFF box of `type` and `size` bytes (zeros after its header).
    static func box(_ type: String, _ size: Int, fill: UInt8 = 0) -> Data {
        var d = Data([UInt8(size >> 24 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)])
        d.append(Data(type.utf8))
        d.append(Data(repeating: fill, count: size - 8))
        return d
    }

    /// A static MPD: a video AdaptationSet whose segments are `video` + `$Number$.m4s`, its
    /// init `videoInit`, and an English audio one under `a/`; two 2 s segments each.
    static func mpd(video: String, videoInit: String = "v/init.mp4", baseURL: String? = nil) -> Data {
        let base = baseURL.map { "<BaseURL>\($0)</BaseURL>" } ?? ""
        return Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          \(base)<Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="\(videoInit)" media="\(video)$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.42c00d"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
              <SegmentTemplate initialization="a/init.mp4" media="a/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="a" bandwidth="64000" codecs="mp4a.40.2"/>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    /// Init and segments of `prefix` on `origin` (fMP4 boxes, each its own bytes).
    static func serveSegments(_ origin: TestOrigin, _ prefix: String, seed: UInt8) {
        origin.setResource("\(prefix)init.mp4", .init(body: box("ftyp", 24, fill: seed), contentType: "video/mp4"))
        for n in 0..<2 { origin.setResource("\(prefix)\(n).m4s", .init(body: box("moof", 300, fill: seed &+ UInt8(n + 1)), contentType: "video/iso.segment")) }
    }

    /// `ls --json`'s state of the stream rooted at `url`.
    static func lsState(_ cache: String) throws -> String? {
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        for line in ls.stdout.split(separator: "\n").map(String.init) {
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], o["format"] as? String == "dash" else { continue }
            return o["state"] as? String
        }
        return nil
    }

    /// Probe bug 3: audio whole beside a video whose segments were all refused is not a complete stream.
    @Test
    func aStreamWhoseVideoSegmentsWereRefusedIsPartial() throws {
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        Self.serveSegments(origin, "/s/v/", seed: 10)
        Self.serveSegments(origin, "/s/a/", seed: 20)
        Self.serveSegments(other, "/x/v/", seed: 30)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(video: other.url("/x/v/")), contentType: Self.dashXML))
        let cache = dir.file("c")
        let r = try VCacheBinary.run(["prefetch", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(other.requests("/x/v/0.m4s").isEmpty)
        #expect(try Self.lsState(cache) == "partial")
        let info = try VCacheBinary.run(["info", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(info.stdout.contains("partial") && !info.stdout.contains("state: complete"), "\(info.stdout)")
        // Allowed, the same stream is whole: complete.
        let allowed = try VCacheBinary.run(["prefetch", "-q", origin.url("/s/manifest.mpd"), "--allow-host", "127.0.0.2"], cacheDir: cache)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(try Self.lsState(cache) == "complete")
    }

    /// Probe bug 4: a segment the MPD names on the stream's own host, redirected by it to another
    /// host, is refused as one named there would be (HLS: the same rule).
    @Test
    func aSegmentRedirectedToAnotherHostIsRefused() throws {
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        Self.serveSegments(origin, "/s/v/", seed: 10)
        Self.serveSegments(origin, "/s/a/", seed: 20)
        Self.serveSegments(other, "/x/v/", seed: 30)
        var redirect = TestOrigin.Faults()
        redirect.redirectTo = other.url("/x/v/1.m4s")
        origin.setFaults("/s/v/1.m4s", redirect)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(video: "v/"), contentType: Self.dashXML))
        let cache = dir.file("c")
        let r = try VCacheBinary.run(["prefetch", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(other.requests("/x/v/1.m4s").isEmpty, "the other host was asked")
        #expect(r.stderr.contains("refused: the origin redirected it to 127.0.0.2, not on the stream's own host (127.0.0.1); --allow-host 127.0.0.2 allows it"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/v/1.m4s"))?.ranges.isEmpty ?? true)
        #expect(try Self.lsState(cache) == "partial")
        // Allowed: followed and cached.
        let allowed = try VCacheBinary.run(["prefetch", "-q", origin.url("/s/manifest.mpd"), "--allow-host", "127.0.0.2"], cacheDir: cache)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/s/v/1.m4s"))?.sha256 == TestBytes.sha256(Self.box("moof", 300, fill: 32)))

        // HLS: a segment redirected off the playlist's host, refused the same way.
        origin.setResource("/h/seg0.ts", .init(body: HLSHostileOriginTests.ts(20, seed: 51), contentType: "video/mp2t"))
        other.setResource("/y/seg1.ts", .init(body: HLSHostileOriginTests.ts(20, seed: 52), contentType: "video/mp2t"))
        var hop = TestOrigin.Faults()
        hop.redirectTo = other.url("/y/seg1.ts")
        origin.setFaults("/h/seg1.ts", hop)
        origin.setResource("/h/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts", "seg1.ts"]), contentType: "application/vnd.apple.mpegurl"))
        let hls = try VCacheBinary.run(["prefetch", origin.url("/h/index.m3u8")], cacheDir: dir.file("h"))
        #expect(hls.status == 4, "\(hls.stderr)")
        #expect(other.requests("/y/seg1.ts").isEmpty, "the other host was asked")
        #expect(hls.stderr.contains("the origin redirected it to 127.0.0.2"), "\(hls.stderr)")
    }
}

extension DASHHostileOriginTests {
    /// Probe bug 1: a SegmentBase file from an origin that sends no ETag and no Last-Modified,
    /// with `--seconds`: its init, sidx and subsegments fetched in one run are one version; the
    /// stream ends cached. A later run asking for more drops what an earlier one held (no
    /// validator joins runs) and fetches all it needs again: still cached, byte for byte.
    @Test(.requires(.dashTools))
    func aSegmentBaseFileWithoutValidatorsIsOneVersionWithinARun() throws {
        let streams = dir.file("streams")
        try Fixtures.makeDASHStreams(into: streams)
        let origin = try TestOrigin()
        let mpdBytes = try Data(contentsOf: URL(fileURLWithPath: streams + "/sb/manifest.mpd"))
        origin.setResource("/sb/manifest.mpd", .init(body: mpdBytes, contentType: Self.dashXML))
        var files: [String: Data] = [:]
        for name in ["manifest-stream0.mp4", "manifest-stream1.mp4"] {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: streams + "/sb/" + name))
            origin.setResource("/sb/" + name, .init(body: files[name]!, contentType: "application/octet-stream"))
        }
        let url = origin.url("/sb/manifest.mpd")
        let mpd = try MPD.parse(Array(mpdBytes), url: url)
        guard case .base(let b) = mpd.periods[0].adaptationSets[0].representations[0].segments, let index = b.indexRange else {
            Issue.record("sb's video is not SegmentBase"); return
        }
        let video = Array(files["manifest-stream0.mp4"]!)
        let subs = try DASHSidx.subsegments(Array(video[Int(index.first)...Int(index.last)]), indexRange: index, url: "")
        let cache = dir.file("c")
        for (seconds, needed) in [("2", 1), ("4", 2)] {
            let r = try VCacheBinary.run(["prefetch", "--seconds", seconds, url], cacheDir: cache)
            #expect(r.status == 0, "--seconds \(seconds): \(r.stderr)")
            if seconds == "2" { #expect(!r.stderr.contains("changed on the origin"), "\(r.stderr)") }
            let last = try #require(subs[needed - 1].range).last
            let e = try #require(try CacheInspector(directory: cache).entry(origin.url("/sb/manifest-stream0.mp4")))
            #expect(e.ranges.contains(ByteRange(0, last + 1)), "--seconds \(seconds): \(e.ranges)")
            let store = try CacheStore(directory: cache, readOnly: true)
            let got = try #require(store.cachedBytes(of: e, at: 0, count: last + 1))
            #expect(TestBytes.sha256(Data(got)) == TestBytes.sha256(files["manifest-stream0.mp4"]!.prefix(Int(last + 1))))
        }
    }
}

extension DASHHostileOriginTests {
    /// Probe bug 2: a CR/LF in a BaseURL (or any URL an MPD names) never reaches stderr raw: every
    /// line that embeds it escapes it, so no forged line can start.
    @Test
    func controlCharactersFromAnMPDNeverReachStderrRaw() throws {
        let origin = try TestOrigin()
        Self.serveSegments(origin, "/s/v/", seed: 10)
        Self.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(video: "v/", baseURL: origin.url("/s/&#13;&#10;X-Evil: 1/")), contentType: Self.dashXML))
        for mode in [[String](), ["-q"], ["--verbose"]] {
            let r = try VCacheBinary.run(["prefetch"] + mode + [origin.url("/s/manifest.mpd")], cacheDir: dir.file("c\(mode.count)\(mode.first ?? "")"))
            #expect(r.status != 0, "\(mode): \(r.stderr)")
            #expect(!r.stderr.contains("\r") && !r.stderr.split(separator: "\n").contains { $0.hasPrefix("X-Evil") }, "\(mode): \(r.stderr)")
            #expect(r.stderr.contains("\\x0D\\x0AX-Evil:"), "\(mode): \(r.stderr)")
        }
    }

    /// Review of serve: a DASH member of an MPD served through the proxy is checked before it is
    /// stored, as prefetch checks it: an HTML error page answered 200 in a segment's place is
    /// refused and never kept, while raw TTML and WebVTT sidecars are kept.
    @Test
    func serveNeverKeepsAnErrorPageAsADASHSegmentButKeepsTextSidecars() throws {
        let origin = try TestOrigin()
        var mpd = String(decoding: Self.mpd(video: "v/"), as: UTF8.self)
        mpd = mpd.replacingOccurrences(of: "</Period>", with: """
            <AdaptationSet contentType="text" mimeType="application/ttml+xml" lang="en"><Representation id="t" bandwidth="100"><BaseURL>subs.ttml</BaseURL></Representation></AdaptationSet>
            <AdaptationSet contentType="text" mimeType="text/vtt" lang="fr"><Representation id="w" bandwidth="100"><BaseURL>subs.vtt</BaseURL></Representation></AdaptationSet>
            </Period>
            """)
        origin.setResource("/s/manifest.mpd", .init(body: Data(mpd.utf8), contentType: Self.dashXML))
        Self.serveSegments(origin, "/s/v/", seed: 1)
        Self.serveSegments(origin, "/s/a/", seed: 9)
        let page = Data("<html><body>Service Unavailable</body></html>".utf8)
        origin.setResource("/s/v/1.m4s", .init(body: page, contentType: "video/iso.segment"))
        let ttml = Data("<?xml version=\"1.0\"?>\n<tt xmlns=\"http://www.w3.org/ns/ttml\"><body><div><p begin=\"0s\" end=\"2s\">Hi</p></div></body></tt>\n".utf8)
        origin.setResource("/s/subs.ttml", .init(body: ttml, contentType: "application/ttml+xml"))
        origin.setResource("/s/subs.vtt", .init(body: Data("WEBVTT\n\n00:00.000 --> 00:02.000\nSalut\n".utf8), contentType: "text/vtt"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpdURL = serve.url(origin.url("/s/manifest.mpd"))
        let got = try Curl.fetch([mpdURL], in: dir)
        #expect(got.status == 200)
        // Every member URL as a player forms it from the rewritten MPD.
        let rewritten = try MPD.parse(Array(got.body), url: mpdURL)
        var urls: [String: String] = [:]
        for (p, _, rep) in rewritten.representations {
            let plan = try rep.plan(periodDuration: rewritten.periods[p].duration)
            for u in [plan.initialization?.url, plan.index?.url].compactMap({ $0 }) + plan.segments.map(\.url) {
                urls[String(u.split(separator: "/").last ?? "") + "@" + rep.id] = u
            }
        }
        let page1 = try Curl.fetch([try #require(urls["1.m4s@v"])], in: dir)
        #expect(page1.status == 502, "\(page1.status)")
        let sub = try Curl.fetch([try #require(urls["subs.ttml@t"])], in: dir), vtt = try Curl.fetch([try #require(urls["subs.vtt@w"])], in: dir)
        #expect(sub.status == 200 && sub.body == ttml)
        #expect(vtt.status == 200 && vtt.body.starts(with: Data("WEBVTT".utf8)))
        let good = try Curl.fetch([try #require(urls["0.m4s@v"])], in: dir)
        #expect(good.status == 200)
        _ = serve.stop()
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/s/v/1.m4s"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/s/subs.ttml"))?.cachedBytes == Int64(ttml.count))
        #expect(try inspector.entry(origin.url("/s/v/0.m4s"))?.cachedBytes == 300)
        // The MPD serve answered is a stream in the catalog, as prefetch records one: one row of ls.
        #expect(try Self.lsState(cache) == "partial")
    }

    /// Review of serve: a remote Period (`xlink:href`) is fetched through the proxy and answered
    /// rewritten, never with the origin's URLs in it (a player would fetch those directly).
    @Test
    func aRemotePeriodThroughServeIsAnsweredRewritten() throws {
        let origin = try TestOrigin()
        let mpd = """
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:xlink="http://www.w3.org/1999/xlink" type="static" mediaPresentationDuration="PT4S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
            <Period xlink:href="ad.xml" xlink:actuate="onLoad"/></MPD>
            """
        let period = """
            <?xml version="1.0" encoding="utf-8"?>
            <Period xmlns="urn:mpeg:dash:schema:mpd:2011" id="ad" duration="PT4S"><BaseURL>\(origin.url("/ads/"))</BaseURL>
            <AdaptationSet contentType="video" mimeType="video/mp4"><SegmentTemplate initialization="v/init.mp4" media="v/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
            <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.42c00d"/></AdaptationSet></Period>
            """
        origin.setResource("/s/manifest.mpd", .init(body: Data(mpd.utf8), contentType: Self.dashXML))
        origin.setResource("/s/ad.xml", .init(body: Data(period.utf8), contentType: "application/xml"))
        Self.serveSegments(origin, "/ads/v/", seed: 3)
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let got = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        let text = String(decoding: got.body, as: UTF8.self)
        let href = try #require(text.firstMatch(of: /xlink:href="([^"]*)"/)).output.1
        #expect(href.hasPrefix(serve.base + "/v/"), "\(text)")
        let remote = try Curl.fetch([String(href)], in: dir)
        let body = String(decoding: remote.body, as: UTF8.self)
        #expect(remote.status == 200 && body.contains("<Period") && body.contains("<BaseURL>\(serve.base)/d/"), "\(body)")
        #expect(!body.contains(origin.url("/")), "\(body)")
        // Its segments, as a player forms them with the Period in the MPD, come through the cache.
        let inlined = text.replacing(/<Period [^>]*xlink:href[^>]*\/>/, with: body.replacing(/<\?xml[^>]*\?>\s*/, with: ""))
        let parsed = try MPD.parse(Array(inlined.utf8), url: serve.url(origin.url("/s/manifest.mpd")))
        let plan = try parsed.representations[0].representation.plan(periodDuration: 4)
        let first = try #require(plan.segments.first?.url)
        let seg = try Curl.fetch([first], in: dir)
        #expect(seg.status == 200 && seg.body == Self.box("moof", 300, fill: 4), "\(first)")
        _ = serve.stop()
    }

    /// Review of serve: an MPD refused for its limits (nested past 32 elements) is answered 502
    /// and leaves nothing cached under its URL, as a refused playlist does.
    @Test
    func anMPDServeRefusesForItsLimitsIsNotKept() throws {
        let origin = try TestOrigin()
        let deep = String(repeating: "<x:a>", count: 40) + String(repeating: "</x:a>", count: 40)
        let body = "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" xmlns:x=\"urn:x\" type=\"static\" mediaPresentationDuration=\"PT4S\">\(deep)</MPD>\n"
        origin.setResource("/deep.mpd", .init(body: Data(body.utf8), contentType: "application/octet-stream"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/deep.mpd"))], in: dir).status == 502)
        _ = serve.stop()
        #expect(try CacheInspector(directory: cache).entry(origin.url("/deep.mpd")) == nil)
    }

    /// Probe bug 5: an MPD past the 16 MiB vcache reads is stopped as soon as it passes it (not
    /// downloaded whole first), with the limit in the error, and not kept.
    @Test
    func anMPDPastItsSizeLimitIsStoppedMidTransfer() throws {
        let origin = try TestOrigin()
        var body = Data("<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" mediaPresentationDuration=\"PT4S\">\n<!-- ".utf8)
        body.append(Data(repeating: UInt8(ascii: "x"), count: 64 << 20))
        body.append(Data(" -->\n</MPD>\n".utf8))
        for (path, chunked) in [("/big.mpd", false), ("/chunked.mpd", true)] {
            origin.setResource(path, .init(body: body, contentType: "application/octet-stream"))
            if chunked {
                var f = TestOrigin.Faults()
                f.chunkedWithoutLength = true
                origin.setFaults(path, f)
            }
            let cache = dir.file("c\(chunked)")
            let r = try VCacheBinary.run(["prefetch", origin.url(path)], cacheDir: cache)
            #expect(r.status != 0, "\(r.stderr)")
            #expect(r.stderr.contains("cannot prefetch \(origin.url(path)): it is a DASH MPD\(chunked ? "" : " of 64.0 MiB"), larger than the 16.0 MiB vcache reads as one: its transfer was stopped once past that limit"), "\(r.stderr)")
            #expect(origin.servedBytes(path) < 40 << 20, "served \(origin.servedBytes(path)) bytes")
            #expect(try CacheInspector(directory: cache).entry(origin.url(path)) == nil)
        }
    }

    /// Probe bug 6: a sidx whose subsegment runs past the file is said in DASH words.
    @Test
    func aSidxThatOverrunsTheFileIsSaidInDASHWords() throws {
        let origin = try TestOrigin()
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        // sidx v0: timescale 1000, one reference of 0x7FFFFFF0 bytes, 2 s.
        var sidx = be32(44) + Array("sidx".utf8) + be32(0) + be32(1) + be32(1000) + be32(0) + be32(0) + [0, 0, 0, 1]
        sidx += be32(0x7FFF_FFF0) + be32(2000) + be32(0x9000_0000)
        var file = Self.box("ftyp", 24)
        file.append(Data(sidx))
        file.append(Self.box("moof", 300))
        origin.setResource("/sb/v.mp4", .init(body: file, etag: "\"v1\"", contentType: "video/mp4"))
        let mpd = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT2S" minBufferTime="PT2S">
          <Period><AdaptationSet contentType="video" mimeType="video/mp4">
            <Representation id="v" bandwidth="100000" width="320" height="180"><BaseURL>v.mp4</BaseURL>
              <SegmentBase indexRange="24-67"><Initialization range="0-23"/></SegmentBase></Representation>
          </AdaptationSet></Period>
        </MPD>
        """
        origin.setResource("/sb/manifest.mpd", .init(body: Data(mpd.utf8), contentType: Self.dashXML))
        let r = try VCacheBinary.run(["prefetch", "--seconds", "1", origin.url("/sb/manifest.mpd")], cacheDir: dir.file("c"))
        #expect(r.status == 4, "\(r.stderr)")
        #expect(!r.stderr.contains("EXT-X-BYTERANGE") && !r.stderr.contains("playlist"), "\(r.stderr)")
        #expect(r.stderr.contains("its MPD's byte range (SegmentBase indexRange or Initialization range, SegmentURL mediaRange, or a subsegment its sidx gives) asks for bytes 68-"), "\(r.stderr)")
    }

    /// Probe bug 7: members refused for their host are said in one line per stream, with a count
    /// and the first of them; probe bug 8: status counts DASH streams in words that fit them.
    @Test
    func refusedMembersAreOneLinePerStream() throws {
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        Self.serveSegments(origin, "/s/v/", seed: 10)
        Self.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(video: other.url("/x/v/"), videoInit: other.url("/x/v/init.mp4")), contentType: Self.dashXML))
        let cache = dir.file("c")
        let r = try VCacheBinary.run(["prefetch", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        let lines = r.stderrLines.filter { $0.contains("127.0.0.2") }
        #expect(lines.count == 1, "\(r.stderr)")  // the stream's line (the summary counts them)
        #expect(lines.first?.contains("(and 2 more members of this stream refused for their hosts, not said one by one)") == true, "\(r.stderr)")
        #expect(lines.first?.contains("refused: its MPD names it on 127.0.0.2, not on the stream's own host (127.0.0.1)") == true, "\(r.stderr)")
        #expect(r.stderrLines.last?.contains("3 stream members refused") == true, "\(r.stderr)")
        let status = try VCacheBinary.run(["status"], cacheDir: cache)
        #expect(status.stdout.contains("streams  1 (") && status.stdout.contains("of the entries are their manifests (playlists, MPDs), segments, init sections and keys"), "\(status.stdout)")
    }
}

extension DASHHostileOriginTests {
    /// `vcache check` of an MPD asks what prefetch would fetch of its presentation, from the
    /// cached MPD (not merely whether the MPD itself is cached), and names members on a host
    /// prefetch refuses.
    @Test
    func checkOfAnMPDAsksForItsSegments() throws {
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        Self.serveSegments(origin, "/s/v/", seed: 10)
        Self.serveSegments(origin, "/s/a/", seed: 20)
        Self.serveSegments(other, "/x/v/", seed: 30)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(video: "v/"), contentType: Self.dashXML))
        Self.serveSegments(origin, "/t/a/", seed: 40)
        origin.setResource("/t/manifest.mpd", .init(body: Self.mpd(video: other.url("/x/v/"), videoInit: other.url("/x/v/init.mp4")), contentType: Self.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        // Its first 2 s: the MPD, two inits and the first segment of each; the whole is not ready.
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        var check = try VCacheBinary.run(["check", "--seconds", "2", url], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout)")
        check = try VCacheBinary.run(["check", url], cacheDir: cache)
        #expect(check.status == 1, "\(check.stdout)")
        #expect(check.stdout.contains("2 of the 7 entries (the MPD, init segments and segments) of the whole presentation are not cached"), "\(check.stdout)")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status == 0)
        // Segments on another host: said as refused.
        let t = origin.url("/t/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", t], cacheDir: cache).status == 4)
        check = try VCacheBinary.run(["check", t], cacheDir: cache)
        #expect(check.status == 1 && check.stdout.contains("3 of them are on 127.0.0.2, not the stream's own host: prefetch refuses them unless --allow-host 127.0.0.2 allows them"), "\(check.stdout)")
    }
}
