import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// An MPD larger than the head `open` fetches (64 KiB) through `serve` and `prefetch`: one origin
/// request for it through serve (F2), and `prefetch --seconds` of it from an origin that ignores
/// Range and sends no validator (F8).
@Suite struct DASHLargeMPDTests {
    let dir = TempDirectory("vcache-dashlarge")
    static let dashXML = DASHHostileOriginTests.dashXML

    /// `DASHHostileOriginTests.mpd`, padded past 64 KiB with comments before its end tag.
    static let largeMPD: Data = {
        let mpd = String(decoding: DASHHostileOriginTests.mpd(video: "v/"), as: UTF8.self)
        let pad = String(repeating: "<!-- \(String(repeating: "p", count: 1000)) -->\n", count: 100)
        return Data(mpd.replacing("</MPD>", with: pad + "</MPD>").utf8)
    }()

    /// F2: the first request for an MPD over 64 KiB costs one origin request when the origin sends
    /// it whole to the head's range, two when it honours the range (the rest); never a third.
    @Test(arguments: [false, true])
    func theFirstRequestForALargeMPDIsOneOriginRequest(ignoringRanges: Bool) throws {
        #expect(Self.largeMPD.count > 64 << 10)
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.largeMPD, etag: ignoringRanges ? nil : "\"m1\"", contentType: Self.dashXML))
        var faults = TestOrigin.Faults()
        faults.ignoreRanges = ignoringRanges
        origin.setFaults("/s/manifest.mpd", faults)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        let served = origin.requests("/s/manifest.mpd")
        // A second request (the copy is kept): one more, the fresh fetch.
        let again = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        _ = serve.stop()
        #expect(got.status == 200 && DASHServeFaultTests.isRewritten(got.body, serve: serve), "\(got.status)")
        // The head's range; from an origin that honours it, its 206 ends at 64 KiB and the rest is
        // one more request. Never a third to fetch the MPD fresh.
        let expected: [String?] = ignoringRanges ? ["bytes=0-65535"] : ["bytes=0-65535", "bytes=65536-\(Self.largeMPD.count - 1)"]
        #expect(served == expected, "origin requests for the MPD: \(served.map { $0 ?? "whole" })")
        #expect(again.status == 200 && again.body == got.body)
        #expect(origin.requests("/s/manifest.mpd").count == expected.count + 1, "\(origin.requests("/s/manifest.mpd").map { $0 ?? "whole" })")
        let e = try #require(try CacheInspector(directory: cache).entry(origin.url("/s/manifest.mpd")))
        #expect(e.sha256 == TestBytes.sha256(Self.largeMPD), "the MPD was not kept whole")
    }

    /// F8: `prefetch --seconds` of an MPD over 64 KiB from an origin that ignores Range and sends
    /// no validator: the MPD is read whole from the head's one answer (not asked again, which
    /// read as another version and dropped it), and the first segments are fetched.
    @Test
    func prefetchSecondsOfALargeMPDFromAnOriginIgnoringRangeWithNoValidator() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/manifest.mpd", .init(body: Self.largeMPD, contentType: Self.dashXML))
        var faults = TestOrigin.Faults()
        faults.ignoreRanges = true
        origin.setFaults("/s/manifest.mpd", faults)
        let cache = dir.file("cache")
        let run = try VCacheBinary.run(["prefetch", "--seconds", "1", origin.url("/s/manifest.mpd")], cacheDir: cache)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stderr.contains("changed on the origin"), "\(run.stderr)")
        // Once for the run, once at its end (Docs/dash.md, "Changed during a run"), both whole.
        #expect(origin.requests("/s/manifest.mpd").count == 2, "\(origin.requests("/s/manifest.mpd").map { $0 ?? "whole" })")
        let inspector = try CacheInspector(directory: cache)
        let e = try #require(try inspector.entry(origin.url("/s/manifest.mpd")))
        #expect(e.sha256 == TestBytes.sha256(Self.largeMPD))
        for name in ["v/init.mp4", "v/0.m4s", "a/init.mp4", "a/0.m4s"] {
            #expect(try inspector.entry(origin.url("/s/" + name))?.isComplete == true, "\(name) not fetched")
        }
    }
}
