import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `vcache prefetch MPD` on ffmpeg's real DASH streams (Tests/Fixtures/dash/make-streams.sh)
/// served by nginx (which sends them as application/octet-stream: the MPD is known by its
/// content): the chosen Representations and their audio are cached byte for byte, `--seconds`
/// takes per Representation the segments that start before N, a page in a segment's place is
/// refused, and the stream is one row of `ls` and one unit to `evict`.
@Suite struct DASHPrefetchTests {
    let dir = TempDirectory("vcache-dashprefetch")

    func origin() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        return nginx
    }

    /// Every cached entry under the origin, by path: its ranges' bytes checked against the
    /// origin's file (SHA-256 of each range), complete or not.
    func cached(_ cache: String, _ nginx: Nginx) throws -> [String: (complete: Bool, ranges: [ByteRange])] {
        let store = try CacheStore(directory: cache, readOnly: true)
        var out: [String: (Bool, [ByteRange])] = [:]
        for e in try store.catalog.allEntries() {
            let path = String(e.latestURL.dropFirst(nginx.url("/").count))
            let full = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/" + path))
            let entry = try #require(try store.catalog.entry(key: e.key))
            for r in entry.ranges.ranges {
                let got = try #require(store.cachedBytes(of: entry, at: r.lowerBound, count: r.count))
                #expect(TestBytes.sha256(Data(got)) == TestBytes.sha256(full.subdata(in: Int(r.lowerBound)..<Int(r.upperBound))), "\(path) \(r)")
            }
            if entry.isComplete { #expect(entry.length == Int64(full.count), "\(path)") }
            out[path] = (entry.isComplete, entry.ranges.ranges)
        }
        return out
    }

    static func names(_ stream: String, _ files: [String]) -> Set<String> { Set(files.map { "\(stream)/\($0)" }) }

    @Test(.requires(.nginx, .dashTools))
    func wholePresentationsAreCachedByteForByte() throws {
        let nginx = try origin()
        let chunks = { (s: Int, n: Int) in (1...n).map { String(format: "chunk-stream\(s)-%05d.m4s", $0) } }
        let expected: [(String, [String], Set<String>)] = [
            ("num", [], Self.names("num", ["manifest.mpd", "init-stream0.m4s", "init-stream1.m4s"] + chunks(0, 3) + chunks(1, 3))),
            ("tl", [], Self.names("tl", ["manifest.mpd", "init-stream0.m4s", "init-stream1.m4s"] + chunks(0, 3) + chunks(1, 4))),
            ("list", [], Self.names("list", ["manifest.mpd", "init-stream0.m4s", "init-stream1.m4s"] + chunks(0, 3) + chunks(1, 4))),
            ("sb", [], Self.names("sb", ["manifest.mpd", "manifest-stream0.mp4", "manifest-stream1.mp4"])),
            // The best video (300 kbit/s, 180p) and the first audio (eng); never video without audio.
            ("multi", [], Self.names("multi", ["manifest.mpd", "init-stream0.m4s", "init-stream2.m4s"] + chunks(0, 3) + chunks(2, 4))),
            ("multi", ["--variant", "worst", "--audio", "fr"], Self.names("multi", ["manifest.mpd", "init-stream1.m4s", "init-stream3.m4s"] + chunks(1, 3) + chunks(3, 4))),
        ]
        for (i, (stream, options, files)) in expected.enumerated() {
            let cache = dir.file("cache-\(i)")
            let r = try VCacheBinary.run(["prefetch"] + options + [nginx.url("/\(stream)/manifest.mpd")], cacheDir: cache)
            #expect(r.status == 0, "\(stream) \(options): \(r.stderr)")
            let got = try cached(cache, nginx)
            #expect(Set(got.keys) == files, "\(stream) \(options)")
            let partial = got.filter { !$0.value.complete }.map(\.key)
            #expect(partial.isEmpty, "\(stream) \(options)")
            // One row of ls: the stream.
            let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
            #expect(ls.stdout.contains("DASH"), "\(ls.stdout)")
        }
    }

    @Test(.requires(.nginx, .dashTools))
    func secondsTakesPerRepresentationTheSegmentsStartingBeforeN() throws {
        let nginx = try origin()
        // tl's audio segments start at 0, 1.984 and 3.989 s: 2 s of it needs two; its video one.
        var cache = dir.file("cache-tl")
        var r = try VCacheBinary.run(["prefetch", "--seconds", "2", nginx.url("/tl/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Set(try cached(cache, nginx).keys) == Self.names("tl", ["manifest.mpd", "init-stream0.m4s", "init-stream1.m4s",
                                                                       "chunk-stream0-00001.m4s", "chunk-stream1-00001.m4s", "chunk-stream1-00002.m4s"]))
        // SegmentBase: the init, the sidx and the first subsegment, byte ranges of each one file.
        cache = dir.file("cache-sb")
        r = try VCacheBinary.run(["prefetch", "--seconds", "2", nginx.url("/sb/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let got = try cached(cache, nginx)
        let video = try #require(got["sb/manifest-stream0.mp4"])
        #expect(!video.complete)
        let mpd = try MPD.parse(Array(try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/sb/manifest.mpd"))), url: nginx.url("/sb/manifest.mpd"))
        guard case .base(let b) = mpd.periods[0].adaptationSets[0].representations[0].segments, let index = b.indexRange else {
            Issue.record("sb's video is not SegmentBase"); return
        }
        let file = Array(try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/sb/manifest-stream0.mp4")))
        let subs = try DASHSidx.subsegments(Array(file[Int(index.first)...Int(index.last)]), indexRange: index, url: "")
        let first = try #require(subs.first?.range)
        // One coalesced span: init, sidx and the first subsegment are adjacent.
        #expect(video.ranges.first?.lowerBound == 0 && video.ranges.contains { $0.upperBound >= first.last + 1 }, "\(video.ranges)")
        #expect(!video.ranges.contains { $0.upperBound > first.last + 1 + (64 << 10) }, "fetched far past the first subsegment: \(video.ranges)")
    }

    @Test(.requires(.nginx, .dashTools))
    func anErrorPageInASegmentsPlaceIsRefused() throws {
        let nginx = try origin()
        try Data("<html><body>Service Unavailable</body></html>".utf8).write(to: URL(fileURLWithPath: nginx.root + "/num/chunk-stream0-00002.m4s"))
        let cache = dir.file("cache")
        let url = nginx.url("/num/manifest.mpd")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("origin's answer for a DASH segment is not one: its first bytes '<html><body>Serv' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT"), "\(r.stderr)")
        #expect(try cached(cache, nginx)["num/chunk-stream0-00002.m4s"] == nil)
    }

    /// A text AdaptationSet that is a raw TTML file (mimeType application/ttml+xml, a plain
    /// .ttml) is cached as a member, as a WebVTT one is; an HTML page in its place is still refused.
    @Test(.requires(.nginx, .dashTools))
    func aRawTTMLSidecarIsCachedAndAPageInItsPlaceRefused() throws {
        let nginx = try origin()
        var mpd = try String(contentsOfFile: nginx.root + "/num/manifest.mpd", encoding: .utf8)
        mpd = mpd.replacingOccurrences(of: "\t</Period>", with: """
            <AdaptationSet contentType="text" mimeType="application/ttml+xml" lang="en">
            <Representation id="sub" bandwidth="256"><BaseURL>subs.ttml</BaseURL></Representation>
            </AdaptationSet>
            </Period>
            """)
        try mpd.write(toFile: nginx.root + "/num/ttml.mpd", atomically: true, encoding: .utf8)
        let ttml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <tt xmlns="http://www.w3.org/ns/ttml" xml:lang="en"><body><div><p begin="00:00:00.000" end="00:00:02.000">Hi</p></div></body></tt>

            """
        try Data(ttml.utf8).write(to: URL(fileURLWithPath: nginx.root + "/num/subs.ttml"))
        let url = nginx.url("/num/ttml.mpd")
        var cache = dir.file("cache")
        var r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try cached(cache, nginx)["num/subs.ttml"]?.complete == true)
        try Data("<html><body>Service Unavailable</body></html>".utf8).write(to: URL(fileURLWithPath: nginx.root + "/num/subs.ttml"))
        cache = dir.file("cache-page")
        r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("its first bytes '<html><body>Serv' are not MPEG-TS, fMP4, packed audio, TTML or WebVTT"), "\(r.stderr)")
        #expect(try cached(cache, nginx)["num/subs.ttml"] == nil)
    }

    @Test(.requires(.nginx, .dashTools))
    func theStreamIsOneUnitToEvict() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/multi/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(try cached(cache, nginx).count == 10)
        let ev = try VCacheBinary.run(["evict", url], cacheDir: cache)
        #expect(ev.status == 0, "\(ev.stderr)")
        #expect(try cached(cache, nginx).isEmpty)
    }

    @Test(.requires(.nginx, .dashTools))
    func aChoiceNoRepresentationMatchesIsOneLine() throws {
        let nginx = try origin()
        let r = try VCacheBinary.run(["prefetch", "--variant", "720p", nginx.url("/multi/manifest.mpd")], cacheDir: dir.file("cache"))
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("no video Representation matches --variant 720p; the MPD has 180p 300000, 90p 100000"), "\(r.stderr)")
    }

    /// ffprobe as the oracle for `--seconds`: each chosen Representation's init and segments
    /// concatenated are one fMP4; every packet of it with pts < N lies in a segment that is cached.
    @Test(.requires(.nginx, .dashTools, .ffprobe), arguments: [1.0, 2.5, 4.0])
    func everyPacketBeforeNLiesInCachedSegments(seconds: Double) throws {
        let nginx = try origin()
        let cache = dir.file("cache-\(seconds)")
        let r = try VCacheBinary.run(["prefetch", "-q", "--seconds", String(seconds), nginx.url("/tl/manifest.mpd")], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let got = try cached(cache, nginx)
        for stream in [0, 1] {
            let files = try FileManager.default.contentsOfDirectory(atPath: nginx.root + "/tl").filter { $0.hasPrefix("chunk-stream\(stream)-") }.sorted()
            var joined = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/tl/init-stream\(stream).m4s"))
            var ends: [(Int, String)] = []
            for f in files {
                joined.append(try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/tl/" + f)))
                ends.append((joined.count, f))
            }
            let whole = dir.file("joined-\(seconds)-\(stream).mp4")
            try joined.write(to: URL(fileURLWithPath: whole))
            let probe = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=pts_time,pos", "-of", "csv=p=0", whole])
            var needed = Set<String>()
            for line in String(decoding: probe.out, as: UTF8.self).split(separator: "\n") {
                let f = line.split(separator: ",")
                guard f.count == 2, let pts = Double(f[0]), let pos = Int(f[1]), pts < seconds else { continue }
                if let seg = ends.first(where: { pos < $0.0 }) { needed.insert(seg.1) }
            }
            #expect(!needed.isEmpty)
            for seg in needed { #expect(got["tl/" + seg]?.complete == true, "stream \(stream) at \(seconds) s needs \(seg)") }
            #expect(got["tl/init-stream\(stream).m4s"]?.complete == true)
            // And no segment wholly after N: what was fetched is what is needed.
            let fetched = Set(got.keys.filter { $0.hasPrefix("tl/chunk-stream\(stream)-") }.map { String($0.dropFirst(3)) })
            #expect(fetched == needed, "stream \(stream) at \(seconds) s")
        }
    }

    /// The `tl` stream's MPD made dynamic, published as /tl/live.mpd; its URL.
    static func liveMPD(_ nginx: Nginx) throws -> String {
        var mpd = try String(contentsOfFile: nginx.root + "/tl/manifest.mpd", encoding: .utf8)
        mpd = mpd.replacingOccurrences(of: "type=\"static\"", with: "type=\"dynamic\" availabilityStartTime=\"1970-01-01T00:00:00Z\" minimumUpdatePeriod=\"PT2S\"")
        try mpd.write(toFile: nginx.root + "/tl/live.mpd", atomically: true, encoding: .utf8)
        return nginx.url("/tl/live.mpd")
    }

    /// A dynamic MPD: one line says what prefetch does, it fetches what the timeline lists now,
    /// and the next run fetches the MPD again (not answered from the cache).
    @Test(.requires(.nginx, .dashTools))
    func aDynamicMPDIsSaidAndFetchedAgainByTheNextRun() throws {
        let nginx = try origin()
        let url = try Self.liveMPD(nginx)
        let cache = dir.file("cache")
        let first = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("a dynamic (live) MPD: the segments available now are fetched"), "\(first.stderr)")
        #expect(try cached(cache, nginx).count == 10)
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let asked = nginx.accessLog().filter { $0.path == "/tl/live.mpd" }
        #expect(asked.count == 2 && asked.allSatisfy { $0.status == 200 || $0.status == 206 }, "\(asked)")
    }

    /// A dynamic MPD whose window moved between two runs: the segments that left it stay members
    /// of the stream (one row of `ls`, one unit to evict), not loose entries `verify` calls
    /// broken MP4 files (probe D6).
    @Test(.requires(.nginx, .dashTools))
    func segmentsThatLeaveADynamicMPDsWindowStayInItsStream() throws {
        let nginx = try origin()
        func write(start: Int, t: Int) throws {
            let mpd = """
                <?xml version="1.0" encoding="utf-8"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="dynamic" \
                availabilityStartTime="1970-01-01T00:00:00Z" minimumUpdatePeriod="PT2S" minBufferTime="PT2S">
                <Period id="0" start="PT0S"><AdaptationSet contentType="video" mimeType="video/mp4">
                <Representation id="0" codecs="avc1.42c00c" bandwidth="100000" width="160" height="90">
                <SegmentTemplate timescale="12800" initialization="init-stream$RepresentationID$.m4s" \
                media="chunk-stream$RepresentationID$-$Number%05d$.m4s" startNumber="\(start)">
                <SegmentTimeline><S t="\(t)" d="25600" r="1"/></SegmentTimeline></SegmentTemplate>
                </Representation></AdaptationSet></Period></MPD>
                """
            try mpd.write(toFile: nginx.root + "/tl/window.mpd", atomically: true, encoding: .utf8)
        }
        let url = nginx.url("/tl/window.mpd")
        let cache = dir.file("cache")
        try write(start: 1, t: 0)
        let first = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(first.status == 0, "\(first.stderr)")
        try write(start: 2, t: 25600)
        let second = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(second.status == 0, "\(second.stderr)")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(!ls.stdout.contains("chunk-stream0-"), "\(ls.stdout)")
        #expect(ls.stdout.contains("5 entries)"), "\(ls.stdout)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let evict = try VCacheBinary.run(["evict", url], cacheDir: cache)
        #expect(evict.status == 0, "\(evict.stderr)")
        #expect(try VCacheBinary.run(["ls"], cacheDir: cache).stdout.contains("empty"))
    }

    /// A dynamic MPD the origin no longer answers (a 404 after the event, a 5xx): the run fails
    /// with the origin's answer, and the cached copy and its stream stay as they were, playable
    /// offline; they used to be gone, the stream fallen apart into loose entries (probe D15).
    @Test(.requires(.nginx, .dashTools))
    func aFailedRefreshOfADynamicMPDKeepsTheCachedCopy() throws {
        let nginx = try origin()
        let url = try Self.liveMPD(nginx)
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let before = try VCacheBinary.run(["ls"], cacheDir: cache).stdout
        try FileManager.default.removeItem(atPath: nginx.root + "/tl/live.mpd")
        let failed = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(failed.status == 4, "\(failed.stderr)")
        #expect(failed.stderr.contains("\(url): it could not be fetched again: its cached copy is kept, and its stream as it was"), "\(failed.stderr)")
        #expect(failed.stderr.contains("origin answered 404 Not Found"), "\(failed.stderr)")
        let after = try VCacheBinary.run(["ls"], cacheDir: cache).stdout
        #expect(after.contains("(DASH, ") && after.contains("10 entries)"), "\(after)")
        #expect(after.split(separator: "\n").count == before.split(separator: "\n").count, "\(before)\n\(after)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        // The copy kept still plays from the cache.
        #expect(try VCacheBinary.run(["export", url, dir.file("out")], cacheDir: cache).status == 0)
    }

    /// Several sibling BaseURLs are alternatives (ISO/IEC 23009-1 §5.6.5: the first that
    /// answers): the first refusing connections (a stopped origin's port) or answering 404, the
    /// second nginx. Each member is fetched from the second, one line says so once, the base is
    /// remembered for the rest of the stream (one failed attempt in all, not one per segment), and
    /// the members keep the first BaseURL's keys, so the stream is complete and plays through serve
    /// offline, where the player asks for them under the first BaseURL.
    @Test(.requires(.nginx, .dashTools))
    func theFirstBaseURLThatAnswersIsUsedForTheRestOfTheStream() throws {
        let nginx = try origin()
        let stopped = try Nginx()
        stopped.stop()
        let refusing = RefusingPort(stopped.port)
        defer { withExtendedLifetime(refusing) {} }
        let files = ["init-stream0.m4s", "init-stream1.m4s"] + (1...3).map { String(format: "chunk-stream0-%05d.m4s", $0) }
            + (1...3).map { String(format: "chunk-stream1-%05d.m4s", $0) }
        for (name, dead) in [("refused", "http://127.0.0.1:\(stopped.port)/num/"), ("gone", nginx.url("/gone/"))] {
            var mpd = try String(contentsOfFile: nginx.root + "/num/manifest.mpd", encoding: .utf8)
            mpd = mpd.replacingOccurrences(of: "<Period", with: "<BaseURL>\(dead)</BaseURL><BaseURL>\(nginx.url("/num/"))</BaseURL>\n<Period")
            try mpd.write(toFile: nginx.root + "/num/\(name).mpd", atomically: true, encoding: .utf8)
            let cache = dir.file("cache-\(name)")
            let r = try VCacheBinary.run(["prefetch", "-j", "1", nginx.url("/num/\(name).mpd")], cacheDir: cache)
            #expect(r.status == 0, "\(name): \(r.stderr)")
            let said = r.stderr.split(separator: "\n").filter { $0.contains("its BaseURL \(dead) did not answer (") }
            #expect(said.count == 1 && said[0].hasSuffix("the next, \(nginx.url("/num/")), is used for the rest of the stream"), "\(name): \(r.stderr)")
            let store = try CacheStore(directory: cache, readOnly: true)
            var got: Set<String> = []
            for e in try store.catalog.allEntries() where e.latestURL.hasPrefix(dead) {
                let path = String(e.latestURL.dropFirst(dead.count))
                let entry = try #require(try store.catalog.entry(key: e.key))
                let full = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/num/" + path))
                #expect(entry.isComplete && entry.length == Int64(full.count), "\(name) \(path)")
                let bytes = try #require(store.cachedBytes(of: entry, at: 0, count: Int64(full.count)))
                #expect(TestBytes.sha256(Data(bytes)) == TestBytes.sha256(full), "\(name) \(path)")
                got.insert(path)
            }
            #expect(got == Set(files), "\(name)")
            let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
            #expect(ls.stdout.contains("6/6 segments"), "\(name): \(ls.stdout)")
            if name == "refused" {
                // One attempt at the dead base (its retries), then none: the members after it go
                // straight to the next.
                let asked = nginx.accessLog().filter { $0.path.hasPrefix("/num/") && $0.path.hasSuffix(".m4s") }
                #expect(asked.count == files.count, "\(asked)")
            } else {
                let gone = nginx.accessLog().filter { $0.path.hasPrefix("/gone/") }
                #expect(gone.count == 1, "\(gone)")
            }
        }
        // Offline through serve: the player asks under the first BaseURL (proxied, as every one is).
        let cache = dir.file("cache-refused")
        let origin = nginx.url("/num/refused.mpd")
        nginx.stop()
        let offline = RefusingPort(nginx.port)
        defer { withExtendedLifetime(offline) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let text = String(decoding: try Curl.fetch([serve.url(origin)], in: dir).body, as: UTF8.self)
        #expect(text.components(separatedBy: "<BaseURL>\(serve.base)/d/").count == 3, "\(text)")
        let video = try DASHServeTests.frames(serve.url(origin), "0:v:0"), audio = try DASHServeTests.frames(serve.url(origin), "0:a:0")
        #expect(video.count == 150 && video.err.isEmpty, "offline: \(video.count) frames; \(video.err)")
        #expect(audio.count > 270 && audio.err.isEmpty, "offline: \(audio.err)")
        _ = serve.stop()
    }

    /// A Representation whose `$RepresentationID$` makes its URLs another scheme (`javascript:`,
    /// or `init-streamhttp:` from an id `http://evil.example/x`) is left out with one line each,
    /// as serve's rewrite leaves it out, and the rest is fetched (before: the whole MPD refused,
    /// exit 4). The best video is then the plain one; serve keeps the MPD it answers and records
    /// its stream.
    @Test(.requires(.nginx, .dashTools))
    func aRepresentationWithAHostileIDIsLeftOutAndTheRestFetched() throws {
        let nginx = try origin()
        var mpd = try String(contentsOfFile: nginx.root + "/num/manifest.mpd", encoding: .utf8)
        let hostile = { (id: String) in
            """
            <Representation id="\(id)" mimeType="video/mp4" codecs="avc1.42c00d" bandwidth="900000" width="640" height="360">
            <SegmentTemplate timescale="1000000" duration="2000000" initialization="init-stream$RepresentationID$.m4s" media="chunk-stream$RepresentationID$-$Number%05d$.m4s" startNumber="1"/>
            </Representation>
            """
        }
        mpd = mpd.replacingOccurrences(of: "\t\t</AdaptationSet>\n\t\t<AdaptationSet id=\"1\"",
                                       with: hostile("http://evil.example/x") + hostile("javascript:alert(1)//") + "</AdaptationSet>\n\t\t<AdaptationSet id=\"1\"")
        try mpd.write(toFile: nginx.root + "/num/hostile.mpd", atomically: true, encoding: .utf8)
        let url = nginx.url("/num/hostile.mpd")
        let cache = dir.file("cache")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { $0.contains(" left out: ") }
        #expect(lines.count == 2, "\(r.stderr)")
        #expect(lines.first?.contains("Representation 'http://evil.example/x' in Period 1 left out: 'chunk-streamhttp://evil.example/x-00001.m4s' resolves to") == true
                && lines.first?.hasSuffix("not an http or https URL; the rest of the MPD is fetched") == true, "\(r.stderr)")
        #expect(lines.last?.contains("Representation 'javascript:alert(1)//' in Period 1 left out:") == true, "\(r.stderr)")
        let chunks = { (s: Int, n: Int) in (1...n).map { String(format: "chunk-stream\(s)-%05d.m4s", $0) } }
        #expect(Set(try cached(cache, nginx).keys) == Self.names("num", ["hostile.mpd", "init-stream0.m4s", "init-stream1.m4s"] + chunks(0, 3) + chunks(1, 3)))
        #expect(!nginx.accessLog().contains { $0.path.contains("evil") || $0.path.contains("javascript") })
        // serve answers it without them, and keeps the very bytes the origin answered.
        let served = dir.file("cache-serve")
        let serve = try ServeProcess(cacheDir: served, logDir: dir)
        let got = try Curl.fetch([serve.url(url)], in: dir)
        let text = String(decoding: got.body, as: UTF8.self)
        #expect(got.status == 200 && !text.contains("evil") && !text.contains("javascript"), "\(text)")
        _ = serve.stop()
        let kept = try cached(served, nginx)["num/hostile.mpd"]
        #expect(kept?.complete == true, "\(String(describing: kept))")
        // ...and records it as a stream (before: its parse failed, so no stream, and offline the
        // MPD was answered whole instead of what plays from the cache).
        let store = try CacheStore(directory: served, readOnly: true)
        #expect(try store.catalog.streamFormat(root: CacheKeyRules().key(for: url)) == "dash")
    }

    /// A Representation past the segment limit is refused with `--seconds` as without it: the
    /// run fetched its first seconds and said ok, and `ls` then called the stream complete with
    /// 0/0 segments (probe D3).
    @Test(.requires(.nginx, .dashTools))
    func aRepresentationPastTheSegmentLimitIsRefusedWithSecondsToo() throws {
        let nginx = try origin()
        let mpd = """
            <?xml version="1.0" encoding="utf-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" \
            mediaPresentationDuration="PT400000S" minBufferTime="PT2S">
            <Period id="0" start="PT0S"><AdaptationSet contentType="video" mimeType="video/mp4">
            <Representation id="0" codecs="avc1.42c00c" bandwidth="100000" width="320" height="180">
            <SegmentTemplate timescale="1" duration="2" initialization="init-stream$RepresentationID$.m4s" \
            media="chunk-stream$RepresentationID$-$Number%05d$.m4s" startNumber="1"/>
            </Representation></AdaptationSet></Period></MPD>
            """
        try mpd.write(toFile: nginx.root + "/num/long.mpd", atomically: true, encoding: .utf8)
        let url = nginx.url("/num/long.mpd")
        for args in [["--seconds", "2"], []] {
            let r = try VCacheBinary.run(["prefetch", url] + args, cacheDir: dir.file("cache"))
            #expect(r.status == 4, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("\(url): Representation '0' has more than the limit of 100000 segments"), "\(r.stderr)")
        }
    }
}
