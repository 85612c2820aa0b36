import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// GStreamer's `playbin` (its own DASH demuxer, which follows the MPD's Periods and timing, where
/// ffmpeg plays one Period) as a third player of warmed DASH streams: offline through `serve`, and
/// from an exported folder with two Periods.
@Suite struct DASHGStreamerTests {
    let dir = TempDirectory("vcache-dashgst")

    /// Every kind warmed for its first 3 s (SegmentBase whole) plays offline through serve in
    /// GStreamer: every frame of the cached seconds (two 2 s segments at 25 fps), none past them.
    @Test(.requires(.nginx, .dashTools, .gstreamer))
    func everyKindWarmedPlaysOfflineThroughServe() throws {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
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
        for (s, frames) in partly.map({ ($0, 100) }) + [("sb", 150)] {
            let got = try GStreamer.play(serve.url(origin + "/\(s)/manifest.mpd"))
            #expect(got.status == 0 && got.frames == frames, "\(s) offline: \(got.frames) frames, exit \(got.status): \(got.err)")
            #expect(got.last.map { abs($0 - Double(frames - 1) / 25) < 0.001 } == true, "\(s) offline: last frame at \(String(describing: got.last))")
        }
        _ = serve.stop()
    }

    /// A stream of two Periods, the second with its own presentationTimeOffset (S@t in the
    /// media's own time, as an ended live stream or a spliced programme has): its export, and
    /// serve with the origin stopped, play all 6 s without a gap or a lost segment: 150 frames,
    /// the last at 5.96 s. (GStreamer places media by the MPD's own timing, so it played the
    /// export that dropped the offset too; `exportedTimingMatchesTheMediaAndLsCountsEveryPeriod`
    /// holds the timing to the media's tfdt, as MSE players need it. A second Period with S@t in
    /// media time but no offset made GStreamer play 100 frames of the 150.)
    @Test(.requires(.nginx, .dashTools, .gstreamer))
    func twoPeriodsPlayWholeFromTheExportAndThroughServe() throws {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        try FileManager.default.createDirectory(atPath: nginx.root + "/h", withIntermediateDirectories: true)
        let url = try nginx.publish("h/twoper.mpd", DASHExportTests.twoPeriods)
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out")
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let port = nginx.port
        nginx.stop()
        let refused = RefusingPort(port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        for (how, uri) in [("export", "file://\(out)/manifest.mpd"), ("serve", serve.url(url))] {
            let got = try GStreamer.play(uri)
            #expect(got.status == 0 && got.frames == 150, "\(how): \(got.frames) frames, exit \(got.status): \(got.err)")
            #expect(got.last.map { abs($0 - 5.96) < 0.001 } == true, "\(how): last frame at \(String(describing: got.last))")
        }
        _ = serve.stop()
    }
}
