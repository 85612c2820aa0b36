import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// GStreamer's `playbin` (its own DASH demuxer, which follows the MPD's Periods and timing, where
/// ffmpeg plays one Period) on an exported folder with two Periods and through `serve` offline.
/// (`DASHServeTests` has it play every kind warmed, offline.)
@Suite struct DASHGStreamerTests {
    let dir = TempDirectory("vcache-dashgst")

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
