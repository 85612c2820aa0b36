import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `vcache info` on MP4s: the facts from the cached bytes, and --probe fetching only what they need.
@Suite struct InfoTests {
    let dir = TempDirectory("vcache-info")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    @Test func probeFetchesTheHeadersAndTheMoovAndInfoTellsTheTracks() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("end.mp4", try Fixtures.data("moov-at-end.mp4"))
        let r = try vcache(["info", url, "--probe"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("mp4 layout     moov after mdat (the player needs the end of the file first)"))
        #expect(lines.contains("moov           9.4 KiB at offset 286439"))
        #expect(lines.contains("fragmented     no"))
        #expect(lines.contains("duration       10.000 s"))
        #expect(lines.contains("track 1        vide avc1, timescale 12800, 250 samples, 164 kbit/s"))
        #expect(lines.contains("track 2        soun mp4a, timescale 44100, 432 samples, 64 kbit/s"))
        #expect(lines.contains("--seconds 2    57.0 KiB (58384 bytes)"))
        nginx.stop()
        // A 4 KiB head, the moov's header one hop past mdat, the moov: nothing of the media.
        let log = nginx.accessLog().filter { $0.path == "/end.mp4" }.map { $0.range ?? "-" }
        #expect(log == ["bytes=0-4095", "bytes=286439-286446", "bytes=286447-296068"])
    }

    @Test func jsonCarriesTheSameFactsAndAnUncachedURLNeedsProbe() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("front.mp4", try Fixtures.data("moov-at-front.mp4"))
        #expect(try vcache(["config", "unset", "max-size"]).status == 0)  // the cache exists, the video is not in it
        let missing = try vcache(["info", url])
        #expect(missing.status == 1)
        #expect(missing.stderr == "vcache: not in the cache: \(url); see 'vcache ls', or add --probe\n")
        #expect(try vcache(["prefetch", "-q", url, "--seconds", "2"]).status == 0)
        let r = try vcache(["info", url, "--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let mp4 = try #require(o["mp4"] as? [String: Any])
        #expect(mp4["fragmented"] as? Bool == false)
        #expect(mp4["moov_offset"] as? Int == 32)
        let tracks = try #require(mp4["tracks"] as? [[String: Any]])
        #expect(tracks.map { $0["codec"] as? String } == ["avc1", "mp4a"])
        let need = try #require(mp4["bytes_for_seconds"] as? [String: Any])
        // ftyp, moov and the samples of the first 2 s: more than the moov, no more than what --seconds 2 cached.
        let two = try #require(need["2"] as? Int)
        #expect(two > mp4["moov_bytes"] as? Int ?? .max)
        let cached = try #require(try CacheInspector(directory: cache).entry(url)).cachedBytes
        #expect(Int64(two) <= cached)
    }
}
