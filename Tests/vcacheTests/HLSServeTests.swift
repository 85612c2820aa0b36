import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24 (a first slice): HLS through `serve`. A playlist is answered rewritten, every URI in
/// it pointing at the proxy, so ffmpeg fetches segments, init sections, byte ranges, keys and
/// renditions through the cache; with the origin stopped, what was played plays again.
@Suite struct HLSServeTests {
    let dir = TempDirectory("vcache-hlsserve")

    @Test(.timeLimit(.minutes(2)))
    func everyKindOfStreamPlaysThroughTheProxyAndThenOffline() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else {
            print("skipped: ffmpeg is not installed")
            return
        }
        let nginx = try Nginx()
        let made = try Tool.run("/usr/bin/env", ["bash", Fixtures.path("hls/make-streams.sh"), nginx.root + "/hls"])
        #expect(made.status == 0, "\(made.err)")
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
