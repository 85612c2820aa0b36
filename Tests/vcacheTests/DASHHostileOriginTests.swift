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
    func lsState(_ cache: String) throws -> String? {
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        for line in ls.stdout.split(separator: "\n").map(String.init) {
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], o["format"] as? String == "dash" else { continue }
            return o["state"] as? String
        }
        return nil
    }

    /// Probe bug 3: audio whole beside a video whose segments were all refused is not a complete stream.
    @Test(.timeLimit(.minutes(3)))
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
        #expect(try lsState(cache) == "partial")
        let info = try VCacheBinary.run(["info", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(info.stdout.contains("partial") && !info.stdout.contains("state: complete"), "\(info.stdout)")
        // Allowed, the same stream is whole: complete.
        let allowed = try VCacheBinary.run(["prefetch", "-q", origin.url("/s/manifest.mpd"), "--allow-host", "127.0.0.2"], cacheDir: cache)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(try lsState(cache) == "complete")
    }

    /// Probe bug 4: a segment the MPD names on the stream's own host, redirected by it to another
    /// host, is refused as one named there would be (HLS: the same rule).
    @Test(.timeLimit(.minutes(3)))
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
        #expect(try lsState(cache) == "partial")
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
    @Test(.requires(.dashTools), .timeLimit(.minutes(5)))
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
