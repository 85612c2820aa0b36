import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24, serve's last items: a playlist behind a redirect plays offline (its final URL is
/// kept).
@Suite struct HLSServeMembersTests {
    let dir = TempDirectory("vcache-hlsmembers")

    static let mpegurl = "application/vnd.apple.mpegurl"

    /// The rewritten playlist's URI lines, each fetched through the proxy: their SHA-256s.
    func fetchEveryURI(of playlist: String) throws -> [String] {
        let answer = try Curl.fetch([playlist], in: dir)
        #expect(answer.status == 200, "\(playlist): \(answer.status)")
        let text = String(decoding: answer.body, as: UTF8.self)
        return try text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { line in
            let r = try Curl.fetch([String(line)], in: dir)
            #expect(r.status == 200, "\(line): \(r.status)")
            return TestBytes.sha256(r.body)
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aPlaylistBehindARedirectPlaysOfflineAfterPlayingAndAfterPrefetch() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else {
            print("skipped: ffmpeg is not installed")
            return
        }
        let made = dir.file("streams")
        let run = try Tool.run("/usr/bin/env", ["bash", Fixtures.path("hls/make-streams.sh"), made])
        #expect(run.status == 0, "\(run.err)")
        // /ts/index.m3u8 answers 302 to /moved/ts/index.m3u8, whose segment URIs are relative.
        let origin = try TestOrigin()
        let files = try FileManager.default.contentsOfDirectory(atPath: made + "/ts").sorted()
        var segments: [String] = []
        for name in files {
            let body = try Data(contentsOf: URL(fileURLWithPath: made + "/ts/" + name))
            let playlist = name.hasSuffix(".m3u8")
            origin.setResource("/moved/ts/" + name, .init(body: body, contentType: playlist ? Self.mpegurl : "video/mp2t"))
            if name.hasSuffix(".ts") { segments.append(TestBytes.sha256(body)) }
        }
        #expect(segments.count == 2, "\(files)")
        var redirect = TestOrigin.Faults()
        redirect.redirectTo = origin.url("/moved/ts/index.m3u8")
        origin.setFaults("/ts/index.m3u8", redirect)
        let url = origin.url("/ts/index.m3u8")

        // Played through serve online; warmed by prefetch alone (never played) in another cache.
        let played = try ServeProcess(cacheDir: dir.file("played"), logDir: dir)
        let online = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", played.url(url), "-f", "null", "-"])
        #expect(online.status == 0 && online.err.isEmpty, "online: \(online.err)")
        let prefetch = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: dir.file("warmed"))
        #expect(prefetch.status == 0, "\(prefetch.stderr)")

        origin.stop()
        let refused = RefusingPort(origin.port)  // offline: nothing else may answer on that port
        defer { withExtendedLifetime(refused) {} }
        let warmed = try ServeProcess(cacheDir: dir.file("warmed"), logDir: dir)
        for (name, serve) in [("played", played), ("prefetched", warmed)] {
            let offline = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(url), "-f", "null", "-"])
            #expect(offline.status == 0 && offline.err.isEmpty, "\(name), offline: \(offline.err)")
            // Every segment the cached playlist names resolves to the bytes the origin served.
            #expect(try fetchEveryURI(of: serve.url(url)) == segments, "\(name)")
            serve.stop()
        }
    }
}
