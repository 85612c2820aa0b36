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
    @Test(.requires(.nginx, .dashTools), .timeLimit(.minutes(4)))
    func aNameThatIsNotTheOriginsIsRefusedNeverAnsweredWithAnotherResource() throws {
        let nginx = try origin()
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir)
        let mpd = nginx.url("/num/manifest.mpd")
        let own = try Curl.fetch([serve.url(mpd)], in: dir)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: nginx.root + "/num/manifest.mpd"))
        #expect(own.status == 200 && own.body == bytes)
        let token = ProxyURLCoding.encode(mpd)
        let wrong = try Curl.fetch([serve.base + "/v/" + token + "/init-stream0.m4s"], in: dir)
        #expect(wrong.status == 404)
        let body = String(decoding: wrong.body, as: UTF8.self)
        #expect(body == "'init-stream0.m4s' is not the name of \(mpd) (a URL resolved against a proxy URL names another resource: not served)\n")
        // ffprobe through serve: never handed the MPD in the init segment's place.
        let probe = try Tool.run("/usr/bin/ffprobe", ["-v", "error", serve.url(mpd)])
        #expect(!probe.err.contains("XML declaration allowed only at the start"), "\(probe.err)")
        _ = serve.stop()
        #expect(serve.log.contains { $0.contains(" 404 ") && $0.contains("'init-stream0.m4s' is not the name of") }, "\(serve.log)")
    }
}
