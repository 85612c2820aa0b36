import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24 (a first slice): HLS through `serve`. A playlist is answered rewritten, every URI in
/// it pointing at the proxy, so ffmpeg fetches segments, init sections, byte ranges, keys and
/// renditions through the cache; with the origin stopped, what was played plays again.
@Suite struct HLSServeTests {
    let dir = TempDirectory("vcache-hlsserve")

    @Test(.requires(.streamTools))
    func everyKindOfStreamPlaysThroughTheProxyAndThenOffline() throws {
        let nginx = try Nginx()
        try Fixtures.makeStreams(into: nginx.root + "/hls")
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let streams = ["ts/index.m3u8", "fmp4/index.m3u8", "br/index.m3u8", "br/implicit.m3u8", "aes/index.m3u8", "abr/master.m3u8"]
        let origin = "http://127.0.0.1:\(nginx.port)"
        for s in streams {
            let url = serve.url(origin + "/hls/" + s)
            let head = try Tool.run("/usr/bin/curl", ["-s", "-D", "-", "-o", dir.file("p.m3u8"), url])
            let (status, headers) = ResponseHeadText.parse(String(decoding: head.out, as: UTF8.self))
            #expect(status == 200 && headers["content-type"] == "application/vnd.apple.mpegurl", "\(s): \(headers)")
            let text = try String(contentsOfFile: dir.file("p.m3u8"), encoding: .utf8)
            // Every URI points at the proxy: none at the origin, and none left relative.
            #expect(!text.contains(origin), "\(s) still names the origin:\n\(text)")
            for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.isEmpty {
                #expect(line.hasPrefix(serve.base + "/v/"), "\(s): \(line)")
            }
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", url, "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) online: \(play.err)")
        }
        // What it stored, confirmed by an answer of its playlists (until then not answered offline).
        #expect(serve.confirmed())
        nginx.stop()
        let refused = RefusingPort(nginx.port)  // offline: nothing else may answer on that port
        defer { withExtendedLifetime(refused) {} }
        for s in streams {
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(origin + "/hls/" + s), "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) offline: \(play.err)")
        }
        serve.stop()
    }
}

/// A live stream written by ffmpeg while the test runs (1 s segments, a window of 4, old
/// segments deleted): played through serve, the playlist is fetched again as it moves (never
/// frozen), and the segments played are kept, byte-exact.
@Suite struct HLSLiveServeTests {
    let dir = TempDirectory("vcache-hlslive")

    @Test(.requires(.ffmpeg, .nginx))
    func aLiveStreamPlaysThroughServeAndItsSegmentsAreKept() throws {
        let nginx = try Nginx()
        let live = nginx.root + "/live"
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        let writer = try Child("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-re", "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25", "-t", "40",
                                                   "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0",
                                                   "-f", "hls", "-hls_time", "1", "-hls_list_size", "4", "-hls_flags", "delete_segments",
                                                   "-hls_segment_filename", live + "/s%03d.ts", live + "/index.m3u8"], stdout: .null, stderr: .null)
        defer { writer.kill(SIGKILL); writer.wait() }
        // The stream exists once ffmpeg has written a playlist with two segments.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: live + "/index.m3u8", encoding: .utf8)) ?? ""
            if text.components(separatedBy: "#EXTINF").count > 2 { break }
            usleep(100_000)
        }
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let url = serve.url(nginx.url("/live/index.m3u8"))
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", url, "-t", "5", "-c", "copy", "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
        serve.stop()
        // Reloaded as it moved: more than once (a frozen playlist would be asked for once).
        let reloads = nginx.accessLog().filter { $0.path == "/live/index.m3u8" }.count
        #expect(reloads >= 3, "the live playlist was fetched \(reloads) times")
        // What was played is kept, each segment equal to the file ffmpeg wrote (if still there).
        let inspector = try CacheInspector(directory: cache)
        let segments = try inspector.store.catalog.allEntries().filter { $0.url.hasSuffix(".ts") && $0.isComplete }
        #expect(segments.count >= 3, "\(segments.map(\.url))")
        for e in segments {
            let name = String(e.url.split(separator: "/").last!)
            guard let file = FileManager.default.contents(atPath: live + "/" + name) else { continue }
            #expect(e.sha256 == SHA256Digest.hash(file), "\(name)")
        }
    }
}

/// Issue 24 (a second slice): `vcache prefetch` of a playlist warms the stream it names: the
/// chosen variant's media playlists, renditions, init sections, keys and segments (the first
/// `--seconds` of each, or all), so it plays offline through `serve` without ever having played.
@Suite struct HLSPrefetchTests {
    let dir = TempDirectory("vcache-hlsprefetch")

    @Test(.requires(.streamTools, .nginx, .tool("/usr/bin/mpv", "mpv"), .gstreamer))
    func aWarmedStreamPlaysOfflineThroughServe() throws {
        let nginx = try Nginx()
        try Fixtures.makeStreams(into: nginx.root + "/hls")
        let cache = dir.file("cache")
        let origin = "http://127.0.0.1:\(nginx.port)"
        let streams = ["ts/index.m3u8", "fmp4/index.m3u8", "br/index.m3u8", "aes/index.m3u8", "abr/master.m3u8"]
        for s in streams {
            let r = try VCacheBinary.run(["prefetch", "-q", origin + "/hls/" + s], cacheDir: cache)
            #expect(r.status == 0, "\(s): \(r.stderr)")
        }
        // --seconds takes less than the whole; --bytes does not apply to a stream.
        let short = try VCacheBinary.run(["prefetch", "--json", origin + "/hls/abr/master.m3u8", "--seconds", "1"], cacheDir: dir.file("short"))
        #expect(short.status == 0, "\(short.stderr)")
        let whole = try CacheInspector(directory: cache).store.catalog.allEntries().filter { $0.latestURL.contains("/abr/") }.count
        let some = try CacheInspector(directory: dir.file("short")).store.catalog.allEntries().count
        #expect(some > 3 && some < whole, "\(some) of \(whole)")
        // Only the lowest variant of the master, in a cache of its own.
        let worst = try VCacheBinary.run(["prefetch", "-q", origin + "/hls/abr/master.m3u8", "--variant", "worst"], cacheDir: dir.file("worst"))
        #expect(worst.status == 0, "\(worst.stderr)")
        let bytes = try VCacheBinary.run(["prefetch", origin + "/hls/ts/index.m3u8", "--bytes", "1M"], cacheDir: dir.file("bytes"))
        #expect(bytes.status == 4 && bytes.stderr.contains("--bytes does not apply to a stream"), "\(bytes.stderr)")

        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        for s in streams {
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(origin + "/hls/" + s), "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) offline after prefetch: \(play.err)")
        }
        // mpv, a player with its own HLS reader, plays them too (exit 2 when it cannot).
        for s in streams {
            let mpv = try Tool.run("/usr/bin/mpv", ["--no-config", "--vo=null", "--ao=null", "--ao-null-untimed", "--untimed", "--really-quiet",
                                                    serve.url(origin + "/hls/" + s)])
            #expect(mpv.status == 0, "mpv, \(s) offline after prefetch: \(mpv.err)")
        }
        // GStreamer's playbin, a third reader: every frame of the 4 s (100 at 25 fps).
        for s in streams {
            let gst = try GStreamer.play(serve.url(origin + "/hls/" + s))
            #expect(gst.status == 0 && gst.frames == 100, "GStreamer, \(s) offline after prefetch: \(gst.frames) frames, exit \(gst.status): \(gst.err)")
        }
        serve.stop()
        // Offline, a master lists only the variants that play from the cache: the player's ABR
        // cannot pick the one that was never warmed.
        let lowOnly = try ServeProcess(cacheDir: dir.file("worst"), logDir: dir)
        let master = try Curl.fetch([lowOnly.url(origin + "/hls/abr/master.m3u8")], in: dir)
        let text = String(decoding: master.body, as: UTF8.self)
        #expect(master.headers["x-cache"] == "HIT")
        #expect(text.components(separatedBy: "#EXT-X-STREAM-INF").count == 2, "\(text)")
        #expect(text.contains("RESOLUTION=160x90") && !text.contains("RESOLUTION=320x180"), "\(text)")
        let low = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", lowOnly.url(origin + "/hls/abr/master.m3u8"), "-f", "null", "-"])
        #expect(low.status == 0 && low.err.isEmpty, "\(low.err)")
        lowOnly.stop()
    }
}

/// Found by a hostile review of HLS: error pages in the place of playlists or segments, an origin
/// that says no, a playlist that lists more each time.
@Suite struct HLSHostileOriginTests {
    let dir = TempDirectory("vcache-hlshostile")

    static func playlist(_ segments: [String], live: Bool = false) -> Data {
        var s = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for seg in segments { s += "#EXTINF:2.0,\n\(seg)\n" }
        if !live { s += "#EXT-X-ENDLIST\n" }
        return Data(s.utf8)
    }

    /// `n` MPEG-TS packets: a sync byte, a header with no error and no scrambling, random payload.
    static func ts(_ n: Int, seed: UInt64) -> Data {
        var d = Data(count: 188 * n)
        var x = seed
        for i in 0..<d.count {
            x = x &* 6364136223846793005 &+ 1442695040888963407
            switch i % 188 {
            case 0: d[i] = 0x47
            case 1: d[i] = 0x01
            case 3: d[i] = 0x10
            default: d[i] = UInt8(truncatingIfNeeded: x >> 33)
            }
        }
        return d
    }

    @Test
    func errorPagesAreNeitherPlaylistsNorSegments() throws {
        let origin = try TestOrigin()
        let html = Data("<html><body>Access denied</body></html>".utf8)
        // A .m3u8 answering a web page with a non-HTML Content-Type; a segment answering one as video/mp2t.
        origin.setResource("/a/index.m3u8", .init(body: html, contentType: "application/octet-stream"))
        origin.setResource("/b/index.m3u8", .init(body: Self.playlist(["s0.ts"]), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/b/s0.ts", .init(body: html, contentType: "video/mp2t"))
        let cache = dir.file("cache")
        let a = try VCacheBinary.run(["prefetch", origin.url("/a/index.m3u8")], cacheDir: cache)
        #expect(a.status == 4 && a.stderr.contains("is not a playlist"), "\(a.stderr)")
        let b = try VCacheBinary.run(["prefetch", origin.url("/b/index.m3u8")], cacheDir: cache)
        #expect(b.status == 4 && b.stderr.contains("is not one"), "\(b.stderr)")
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/a/index.m3u8"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/b/s0.ts"))?.cachedBytes ?? 0 == 0)
        // Through serve: the page is not stored as the playlist, and once the origin serves the
        // playlist, the proxy answers it rewritten.
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/a/index.m3u8"))], in: dir).status != 200)
        origin.setResource("/a/index.m3u8", .init(body: Self.playlist(["s0.ts"]), contentType: "application/octet-stream"))
        origin.setResource("/a/s0.ts", .init(body: Self.ts(20, seed: 1), contentType: "video/mp2t"))
        let fixed = try Curl.fetch([serve.url(origin.url("/a/index.m3u8"))], in: dir)
        #expect(fixed.status == 200 && String(decoding: fixed.body, as: UTF8.self).contains(serve.base + "/v/"), "\(String(decoding: fixed.body, as: UTF8.self))")
        // An origin that is up and says no is answered as it said, never with a stale copy.
        var faults = TestOrigin.Faults()
        faults.statuses = [(503, [:])]
        origin.setFaults("/a/index.m3u8", faults)
        #expect(try Curl.fetch([serve.url(origin.url("/a/index.m3u8"))], in: dir).status == 503)
        serve.stop()
    }

    /// Through serve, a live playlist asked for again within half its target duration is the
    /// copy fetched then (one origin request, however many players reload it); a VOD playlist is
    /// fetched fresh every time.
    @Test
    func aLivePlaylistIsFetchedAtMostOncePerHalfTargetDuration() throws {
        let origin = try TestOrigin()
        func live(_ segments: [String]) -> Data {
            // A target duration of a minute: the two reloads below fall well inside 30 s.
            var s = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:60\n#EXT-X-MEDIA-SEQUENCE:0\n"
            for seg in segments { s += "#EXTINF:60.0,\n\(seg)\n" }
            return Data(s.utf8)
        }
        origin.setResource("/l/index.m3u8", .init(body: live(["s0.ts"]), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/v/index.m3u8", .init(body: Self.playlist(["s0.ts"]), contentType: "application/vnd.apple.mpegurl"))
        let serve = try ServeProcess(cacheDir: dir.file("live-cache"), logDir: dir)
        let first = try Curl.fetch([serve.url(origin.url("/l/index.m3u8"))], in: dir)
        #expect(first.status == 200 && String(decoding: first.body, as: UTF8.self).contains("s0.ts"))
        let asked = origin.requests("/l/index.m3u8").count
        origin.setResource("/l/index.m3u8", .init(body: live(["s0.ts", "s1.ts"]), contentType: "application/vnd.apple.mpegurl"))
        let again = try Curl.fetch([serve.url(origin.url("/l/index.m3u8"))], in: dir)
        #expect(again.status == 200 && again.body == first.body)
        #expect(origin.requests("/l/index.m3u8").count == asked)
        // VOD: every answer is the origin's of the moment.
        #expect(try Curl.fetch([serve.url(origin.url("/v/index.m3u8"))], in: dir).status == 200)
        origin.setResource("/v/index.m3u8", .init(body: Self.playlist(["s0.ts", "s9.ts"]), contentType: "application/vnd.apple.mpegurl"))
        let vod = try Curl.fetch([serve.url(origin.url("/v/index.m3u8"))], in: dir)
        #expect(String(decoding: vod.body, as: UTF8.self).contains("s9.ts"))
        serve.stop()
    }

    /// Under AES-128 a segment's bytes look like nothing, but an error page in the place of a key
    /// (not 16 bytes) or of an encrypted segment (not whole 16-byte blocks) is refused all the
    /// same, and nothing of it is kept.
    @Test
    func errorPagesInThePlaceOfAnAESKeyOrSegmentAreRefused() throws {
        let origin = try TestOrigin()
        let html = Data("<html><body>Not Found</body></html>\n".utf8)
        func playlist(_ key: String) -> Data {
            Data("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"\(key)\",IV=0x00000000000000000000000000000001\n#EXTINF:2.0,\ns0.ts\n#EXT-X-ENDLIST\n".utf8)
        }
        origin.setResource("/k/index.m3u8", .init(body: playlist("bad.key"), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/k/bad.key", .init(body: html, contentType: "application/octet-stream"))
        origin.setResource("/k/s0.ts", .init(body: Data(repeating: 7, count: 4096), contentType: "video/mp2t"))
        origin.setResource("/s/index.m3u8", .init(body: playlist("good.key"), contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/s/good.key", .init(body: Data(repeating: 1, count: 16), contentType: "application/octet-stream"))
        origin.setResource("/s/s0.ts", .init(body: html, contentType: "video/mp2t"))
        let cache = dir.file("aes-cache")
        let k = try VCacheBinary.run(["prefetch", origin.url("/k/index.m3u8")], cacheDir: cache)
        #expect(k.status == 4 && k.stderr.contains("origin's answer for an AES-128 key is \(html.count) bytes, not 16"), "\(k.stderr)")
        let seg = try VCacheBinary.run(["prefetch", origin.url("/s/index.m3u8")], cacheDir: cache)
        #expect(seg.status == 4 && seg.stderr.contains("not a whole number of 16-byte blocks"), "\(seg.stderr)")
        let inspector = try CacheInspector(directory: cache)
        #expect((try inspector.entry(origin.url("/k/bad.key"))?.cachedBytes ?? 0) == 0)
        #expect((try inspector.entry(origin.url("/s/s0.ts"))?.cachedBytes ?? 0) == 0)
        #expect(try inspector.entry(origin.url("/s/good.key"))?.isComplete == true)
    }

    /// A VOD stream re-made on the origin under the same names (a single file with new byte
    /// ranges): once serve fetches the changed playlist, the members the cached copy named are
    /// dropped, so the new ranges are never read from the old file.
    @Test
    func aChangedStreamIsNeverAnsweredFromTheOldFile() throws {
        let origin = try TestOrigin()
        func playlist(_ ranges: [(Int, Int)]) -> Data {
            var s = "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            for (n, o) in ranges { s += "#EXTINF:2.0,\n#EXT-X-BYTERANGE:\(n)@\(o)\nall.ts\n" }
            return Data((s + "#EXT-X-ENDLIST\n").utf8)
        }
        let v1 = Self.ts(20, seed: 31), v2 = Self.ts(30, seed: 32)
        origin.setResource("/c/index.m3u8", .init(body: playlist([(1880, 0), (1880, 1880)]), etag: "\"p1\"", contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/c/all.ts", .init(body: v1, etag: "\"a1\"", contentType: "video/mp2t"))
        let serve = try ServeProcess(cacheDir: dir.file("changed"), logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/c/index.m3u8"))], in: dir).status == 200)
        for r in ["0-1879", "1880-3759"] { #expect(try Curl.fetch(["-r", r, serve.url(origin.url("/c/all.ts"))], in: dir).status == 206) }
        // Re-made: other bytes, other ranges.
        origin.setResource("/c/index.m3u8", .init(body: playlist([(1880, 0), (3760, 1880)]), etag: "\"p2\"", contentType: "application/vnd.apple.mpegurl"))
        origin.setResource("/c/all.ts", .init(body: v2, etag: "\"a2\"", contentType: "video/mp2t"))
        let fresh = try Curl.fetch([serve.url(origin.url("/c/index.m3u8"))], in: dir)
        #expect(String(decoding: fresh.body, as: UTF8.self).contains("3760@1880"))
        let second = try Curl.fetch(["-r", "1880-5639", serve.url(origin.url("/c/all.ts"))], in: dir)
        #expect(second.status == 206 && second.body == v2[1880..<5640], "\(second.status), \(second.body.count) bytes")
        let first = try Curl.fetch(["-r", "0-1879", serve.url(origin.url("/c/all.ts"))], in: dir)
        #expect(first.body == v2[0..<1880])
        serve.stop()
    }

    /// A live playlist: the next prefetch fetches it again and the segments added since.
    @Test
    func theNextPrefetchOfALivePlaylistFetchesWhatWasAdded() throws {
        let origin = try TestOrigin()
        for i in 0..<4 { origin.setResource("/live/s\(i).ts", .init(body: Self.ts(10, seed: UInt64(i + 10)), contentType: "video/mp2t")) }
        origin.setResource("/live/index.m3u8", .init(body: Self.playlist(["s0.ts", "s1.ts"], live: true), contentType: "application/vnd.apple.mpegurl"))
        let cache = dir.file("live")
        let first = try VCacheBinary.run(["prefetch", origin.url("/live/index.m3u8")], cacheDir: cache)
        #expect(first.status == 0 && first.stderr.contains("a live playlist"), "\(first.stderr)")
        origin.setResource("/live/index.m3u8", .init(body: Self.playlist(["s1.ts", "s2.ts", "s3.ts"], live: true), contentType: "application/vnd.apple.mpegurl"))
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/live/index.m3u8")], cacheDir: cache).status == 0)
        let inspector = try CacheInspector(directory: cache)
        for i in 0..<4 { #expect(try inspector.entry(origin.url("/live/s\(i).ts"))?.isComplete == true, "s\(i)") }
        // Still one stream: the playlist let go before the run kept its stream, the new segments joined it.
        let streams = try inspector.store.catalog.streams()
        let segments = try (0..<4).map { try #require(try inspector.entry(origin.url("/live/s\($0).ts"))).key }
        #expect(streams.count == 1 && Set(streams[0].keys) == Set(segments + [streams[0].root]), "\(streams)")
    }
}

/// Issue 24: `--seconds N` of a stream fetches exactly the segments that hold its first N seconds,
/// with ffprobe as the oracle: every segment holding a packet with pts < N (from the stream's
/// start) is cached whole and byte-exact, of the chosen variant and of its audio rendition, and
/// no segment past them is fetched.
@Suite struct HLSSecondsOracleTests {
    let dir = TempDirectory("vcache-hlsoracle")

    /// The earliest packet time of a segment (an fMP4 one probed behind its init section).
    func firstPTS(_ segment: String, init initSection: String?) throws -> Double {
        var file = segment
        if let initSection {
            file = dir.file("probe-\(UUID().uuidString.prefix(8)).mp4")
            var bytes = try Data(contentsOf: URL(fileURLWithPath: initSection))
            bytes.append(try Data(contentsOf: URL(fileURLWithPath: segment)))
            try bytes.write(to: URL(fileURLWithPath: file))
        }
        let r = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=pts_time", "-of", "csv=p=0", file])
        let times = String(decoding: r.out, as: UTF8.self).split(whereSeparator: \.isNewline).compactMap { Double($0.trimmingCharacters(in: CharacterSet(charactersIn: ","))) }
        return try #require(times.min(), "no packet in \(segment)")
    }

    /// A media playlist's segment names and its init section, read from the origin's folder.
    func media(_ playlist: String) throws -> (segments: [String], initSection: String?) {
        let text = try String(contentsOfFile: playlist, encoding: .utf8)
        let folder = (playlist as NSString).deletingLastPathComponent
        var initSection: String?
        if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("#EXT-X-MAP:") }),
           let start = line.range(of: "URI=\""), let end = line[start.upperBound...].firstIndex(of: "\"") {
            initSection = folder + "/" + line[start.upperBound..<end]
        }
        let segments = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { folder + "/" + $0 }
        return (segments, initSection)
    }

    @Test(.requires(.ffmpeg, .ffprobe, .nginx))
    func secondsFetchesTheSegmentsFFprobeSaysThoseSecondsNeed() throws {
        let nginx = try Nginx()
        let root = nginx.root + "/o"
        try FileManager.default.createDirectory(atPath: root + "/ts", withIntermediateDirectories: true)
        let src = ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25",
                   "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "10"]
        let gop = ["-g", "50", "-keyint_min", "50", "-sc_threshold", "0"]
        #expect(try Tool.run("/usr/bin/ffmpeg", src + ["-c:v", "libx264", "-preset", "ultrafast"] + gop + ["-c:a", "aac", "-b:a", "64k",
            "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_filename", root + "/ts/seg_%03d.ts", root + "/ts/index.m3u8"]).status == 0)
        #expect(try Tool.run("/usr/bin/ffmpeg", src + ["-map", "0:v", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast"] + gop +
            ["-filter:v:0", "scale=-2:90", "-b:v:0", "100k", "-filter:v:1", "scale=-2:180", "-b:v:1", "300k", "-c:a", "aac", "-b:a", "64k",
             "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
             "-var_stream_map", "v:0,agroup:aud,name:low v:1,agroup:aud,name:high a:0,agroup:aud,name:audio,default:yes,language:en",
             "-master_pl_name", "master.m3u8", "-hls_segment_filename", root + "/abr/%v/seg_%03d.m4s", root + "/abr/%v/index.m3u8"]).status == 0)
        // The media playlists --seconds reads: TS alone; the master's best variant and its audio.
        let cases: [(url: String, playlists: [String])] = [
            ("/o/ts/index.m3u8", [root + "/ts/index.m3u8"]),
            ("/o/abr/master.m3u8", [root + "/abr/high/index.m3u8", root + "/abr/audio/index.m3u8"]),
        ]
        for (url, playlists) in cases {
            for seconds in [3.0, 5.0] {
                let cache = dir.file("c-\(seconds)-\(url.split(separator: "/")[1])-\(playlists.count)")
                let r = try VCacheBinary.run(["prefetch", "-q", nginx.url(url), "--seconds", String(seconds)], cacheDir: cache)
                #expect(r.status == 0, "\(url) --seconds \(seconds): \(r.stderr)")
                let inspector = try CacheInspector(directory: cache)
                for playlist in playlists {
                    let (segments, initSection) = try media(playlist)
                    let start = try firstPTS(segments[0], init: initSection)
                    for segment in segments {
                        let needed = try firstPTS(segment, init: initSection) - start < seconds
                        let segmentURL = nginx.url(String(segment.dropFirst(nginx.root.count)))
                        let e = try inspector.entry(segmentURL)
                        if needed {
                            let bytes = try Data(contentsOf: URL(fileURLWithPath: segment))
                            #expect(e?.isComplete == true && e?.sha256 == SHA256Digest.hash(bytes), "\(url) --seconds \(seconds): \(segment) is needed and not cached whole")
                        } else {
                            #expect((e?.cachedBytes ?? 0) == 0, "\(url) --seconds \(seconds): \(segment) is not needed and was fetched")
                        }
                    }
                    if let initSection {
                        #expect(try inspector.entry(nginx.url(String(initSection.dropFirst(nginx.root.count))))?.isComplete == true)
                    }
                }
            }
        }
    }
}
