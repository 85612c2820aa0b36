import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 24, serve's last items: a playlist behind a redirect plays offline (its final URL is
/// kept), and an error page answered for a segment is never stored as one.
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

    @Test(.timeLimit(.minutes(1)))
    func anErrorPageAnsweredForASegmentIsNotStored() throws {
        let origin = try TestOrigin()
        let html = Data("<!DOCTYPE html><html><body>Session expired, please log in again</body></html>".utf8)
        origin.setResource("/h/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["s0.ts", "s1.ts", "s2.ts"]), contentType: Self.mpegurl))
        origin.setResource("/h/s0.ts", .init(body: html, contentType: "text/html; charset=utf-8"))
        origin.setResource("/h/s1.ts", .init(body: html, contentType: "application/octet-stream"))
        let good = HLSHostileOriginTests.ts(20, seed: 9)
        origin.setResource("/h/s2.ts", .init(body: good, contentType: "video/mp2t"))
        // The same page at a URL that is no stream's member is passed and kept as it is.
        origin.setResource("/h/other.bin", .init(body: html, contentType: "application/octet-stream"))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/h/index.m3u8"))], in: dir).status == 200)
        for s in ["s0.ts", "s1.ts"] {
            // Twice: the second time the catalog may know its length, and the check still holds.
            for _ in 0..<2 {
                let r = try Curl.fetch([serve.url(origin.url("/h/" + s))], in: dir)
                #expect(r.status == 502, "\(s): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
            }
        }
        let fine = try Curl.fetch([serve.url(origin.url("/h/s2.ts"))], in: dir)
        #expect(fine.status == 200 && fine.body == good)
        let other = try Curl.fetch([serve.url(origin.url("/h/other.bin"))], in: dir)
        #expect(other.status == 200 && other.body == html)
        // Once the origin answers the segment, it plays and is kept.
        origin.setResource("/h/s1.ts", .init(body: good, contentType: "application/octet-stream"))
        let fixed = try Curl.fetch([serve.url(origin.url("/h/s1.ts"))], in: dir)
        #expect(fixed.status == 200 && fixed.body == good)
        serve.stop()
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(origin.url("/h/s0.ts"))?.cachedBytes ?? 0 == 0)
        #expect(try inspector.entry(origin.url("/h/s1.ts"))?.sha256 == TestBytes.sha256(good))
        #expect(try inspector.entry(origin.url("/h/s2.ts"))?.sha256 == TestBytes.sha256(good))
        #expect(try inspector.entry(origin.url("/h/other.bin"))?.sha256 == TestBytes.sha256(html))
    }
}
