import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Segment descriptions inherited from the AdaptationSet and Period (ISO/IEC 23009-1 §5.3.9.1),
/// on hand-written MPDs over ffmpeg's own segments (Tests/Fixtures/dash/make-streams.sh) served
/// by nginx: prefetch fetches what each Representation inherits, exactly, and it plays.
@Suite struct DASHInheritanceTests {
    let dir = TempDirectory("vcache-dashinherit")

    func origin() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        return nginx
    }

    static func mpd(_ period: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT6.0S" minBufferTime="PT4.0S">
        <Period id="0" start="PT0.0S">
        \(period)
        </Period>
        </MPD>
        """
    }

    static let video = #"mimeType="video/mp4" codecs="avc1.42c00d" bandwidth="300000" width="320" height="180""#
    static let audio = #"mimeType="audio/mp4" codecs="mp4a.40.2" bandwidth="64000" audioSamplingRate="48000""#

    /// The cached entries' paths under `folder`, each complete and byte for byte the origin's.
    static func cachedWhole(_ cache: String, _ nginx: Nginx, folder: String) throws -> Set<String> {
        let store = try CacheStore(directory: cache, readOnly: true)
        var out: Set<String> = []
        for e in try store.catalog.allEntries() where !e.latestURL.hasSuffix(".mpd") {
            let path = String(e.latestURL.dropFirst(nginx.url(folder).count))
            let full = try Data(contentsOf: URL(fileURLWithPath: nginx.root + folder + path))
            let entry = try #require(try store.catalog.entry(key: e.key))
            #expect(entry.isComplete && entry.length == Int64(full.count), "\(path)")
            let bytes = try #require(store.cachedBytes(of: entry, at: 0, count: Int64(full.count)))
            #expect(TestBytes.sha256(Data(bytes)) == TestBytes.sha256(full), "\(path)")
            out.insert(path)
        }
        return out
    }

    /// SegmentList's `Initialization@sourceURL` given at the Period level (the video inherits it)
    /// and at the AdaptationSet level (the audio's, overriding the Period's), the SegmentURLs on
    /// each Representation: prefetch caches each Representation's own init and segments, and
    /// through serve with the origin stopped every URL of them is answered from the cache.
    @Test(.requires(.nginx, .dashTools))
    func anInitializationSourceURLIsInheritedFromThePeriodAndTheAdaptationSet() throws {
        let nginx = try origin()
        let urls = { (s: Int, n: Int) in (1...n).map { String(format: "<SegmentURL media=\"chunk-stream\(s)-%05d.m4s\"/>", $0) }.joined() }
        let text = Self.mpd("""
            <SegmentList timescale="1000000" duration="2000000" startNumber="0"><Initialization sourceURL="init-stream0.m4s"/></SegmentList>
            <AdaptationSet id="0" contentType="video">
            <Representation id="v" \(Self.video)><SegmentList>\(urls(0, 3))</SegmentList></Representation>
            </AdaptationSet>
            <AdaptationSet id="1" contentType="audio">
            <SegmentList><Initialization sourceURL="init-stream1.m4s"/></SegmentList>
            <Representation id="a" \(Self.audio)><SegmentList>\(urls(1, 4))</SegmentList></Representation>
            </AdaptationSet>
            """)
        try text.write(toFile: nginx.root + "/list/inherited.mpd", atomically: true, encoding: .utf8)
        let url = nginx.url("/list/inherited.mpd")
        let cache = dir.file("cache")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let chunks = { (s: Int, n: Int) in (1...n).map { String(format: "chunk-stream\(s)-%05d.m4s", $0) } }
        #expect(try Self.cachedWhole(cache, nginx, folder: "/list/") == Set(["init-stream0.m4s", "init-stream1.m4s"] + chunks(0, 3) + chunks(1, 4)))
        nginx.stop()
        let refused = RefusingPort(nginx.port)
        defer { withExtendedLifetime(refused) {} }
        // Offline, serve's MPD keeps both Representations, and every URL a player forms from it
        // (each init inherited, each segment) is answered from the cache with the origin's bytes.
        // (ffmpeg's dashdec and mpv do not inherit a SegmentList's Initialization: from the origin
        // too they read no init; GStreamer's dashdemux is not installed here.)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch([serve.url(url)], in: dir)
        #expect(got.status == 200 && got.headers["x-cache"] == "HIT", "\(got.status)")
        let offline = try MPD.parse(Array(got.body), url: serve.url(url))
        #expect(offline.representations.map(\.representation.id) == ["v", "a"])
        var answered = 0
        for (_, _, rep) in offline.representations {
            guard case .list(let list) = rep.segments, let initialization = list.initialization else {
                Issue.record("\(rep.id): \(rep.segments)"); continue
            }
            for (u, file) in [(initialization.url, "init-stream\(rep.id == "v" ? 0 : 1).m4s")] + list.segments.map({ ($0.url, String($0.url.split(separator: "/").last!)) }) {
                #expect(u.hasPrefix(serve.base + "/"), "\(u)")
                let r = try Curl.fetch([u], in: dir)
                let origin = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/list/" + file))
                #expect(r.status == 200 && r.body == origin, "\(rep.id) \(file): \(r.status)")
                answered += 1
            }
        }
        // Two inits, three video segments, and the audio's that start before the Period's 6 s by
        // its @duration (the fourth SegmentURL starts at 6 s: offline, past what plays).
        #expect(answered == 2 + 3 + 3)
        _ = serve.stop()
    }

    /// A SegmentTemplate whose URLs are given at the Period level and whose SegmentTimeline (and
    /// timescale) at each AdaptationSet's, the Representations giving none: `--seconds N` caches
    /// per Representation its init and exactly the segments the inherited timeline starts before
    /// N (video 2 s each; ffmpeg's audio at 0, 1.984, 3.989 and 5.995 s), nothing more.
    @Test(.requires(.nginx, .dashTools))
    func secondsFetchesExactlyTheSegmentsOfAnInheritedTimeline() throws {
        let nginx = try origin()
        let text = Self.mpd("""
            <SegmentTemplate initialization="init-stream$RepresentationID$.m4s" media="chunk-stream$RepresentationID$-$Number%05d$.m4s" startNumber="1"/>
            <AdaptationSet id="0" contentType="video">
            <SegmentTemplate timescale="12800"><SegmentTimeline><S t="0" d="25600" r="2"/></SegmentTimeline></SegmentTemplate>
            <Representation id="0" \(Self.video)/>
            </AdaptationSet>
            <AdaptationSet id="1" contentType="audio">
            <SegmentTemplate timescale="48000"><SegmentTimeline><S t="0" d="95232"/><S d="96256" r="1"/><S d="256"/></SegmentTimeline></SegmentTemplate>
            <Representation id="1" \(Self.audio)/>
            </AdaptationSet>
            """)
        try text.write(toFile: nginx.root + "/tl/inherited.mpd", atomically: true, encoding: .utf8)
        // The oracle: each segment's start as ffprobe reads it from the init and the segment.
        func start(_ s: Int, _ n: Int) throws -> Double {
            let joined = dir.file("joined-\(s)-\(n).mp4")
            var bytes = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/tl/init-stream\(s).m4s"))
            bytes += try Data(contentsOf: URL(fileURLWithPath: nginx.root + String(format: "/tl/chunk-stream\(s)-%05d.m4s", n)))
            try bytes.write(to: URL(fileURLWithPath: joined))
            let p = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=pts_time", "-of", "csv=p=0", "-read_intervals", "%+#1", joined])
            return try #require(Double(String(decoding: p.out, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""))
        }
        var starts: [Int: [Double]] = [:]
        for (s, count) in [(0, 3), (1, 4)] { starts[s] = try (1...count).map { try start(s, $0) } }
        #expect(starts[1]?.count == 4 && starts[1]![1] > 1.9 && starts[1]![1] < 2.0, "\(starts)")
        for seconds in [1.0, 2.0, 3.0, 4.5] {
            let cache = dir.file("cache-\(seconds)")
            let r = try VCacheBinary.run(["prefetch", "--seconds", String(seconds), nginx.url("/tl/inherited.mpd")], cacheDir: cache)
            #expect(r.status == 0, "\(seconds): \(r.stderr)")
            var expected: Set<String> = ["init-stream0.m4s", "init-stream1.m4s"]
            for (s, list) in starts {
                for (i, t) in list.enumerated() where t < seconds - 0.0005 { expected.insert(String(format: "chunk-stream\(s)-%05d.m4s", i + 1)) }
            }
            #expect(try Self.cachedWhole(cache, nginx, folder: "/tl/") == expected, "--seconds \(seconds)")
        }
    }
}
