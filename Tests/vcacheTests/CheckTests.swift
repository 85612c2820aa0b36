import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 23: "is tomorrow's playlist ready?". `vcache check` says per URL whether what the list
/// asks for is cached (bytes, or the first seconds as the MP4's structure says), exit 0 only
/// when all are; the missing bytes it names are exactly what prefetch then fetches.
@Suite struct CheckTests {
    let dir = TempDirectory("vcache-check")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    @Test func aListIsReadyOnlyWhenEveryItemIsCached() throws {
        let nginx = try Nginx()
        let end = try nginx.publish("end.mp4", try Fixtures.data("moov-at-end.mp4"))
        let other = try nginx.publish("other.mp4", try Fixtures.data("moov-at-front.mp4"))
        #expect(try vcache(["prefetch", "-q", end, "--seconds", "1"]).status == 0)
        let list = try dir.write("tomorrow.txt", Data("\(end) 1s\n\(end) 5s\n\(other) 2M\n".utf8))
        let r = try vcache(["check", "-i", list])
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(r.stdout)")
        #expect(lines[1].hasPrefix("ready ") && lines[1].contains("its first 1.0s are cached"))
        #expect(lines[2].hasPrefix("missing ") && lines[2].contains("of the first 5.0s are not cached"))
        #expect(lines[3].hasPrefix("absent ") && lines[3].contains("not in the cache"))
        #expect(lines[4] == "1 of 3 ready")
        // The bytes it says are missing are what prefetch fetches for them.
        let json = try vcache(["check", end, "--seconds", "5", "--json"])
        let checked = try #require(json.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first)
        let missing = try #require(checked["missing_bytes"] as? Int)
        let fetch = try vcache(["prefetch", end, "--seconds", "5", "--json"])
        let done = try #require(fetch.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["event"] as? String == "done" })
        #expect(done["fetched_bytes"] as? Int == missing)
        #expect(try vcache(["prefetch", "-q", other, "--bytes", "2M"]).status == 0)
        let again = try vcache(["check", "-i", list])
        #expect(again.status == 0 && again.stdout.hasSuffix("3 of 3 ready\n"), "\(again.stdout)")
        // Offline truth: it never asks the origin.
        let before = nginx.accessLog().count
        _ = try vcache(["check", "-i", list])
        #expect(nginx.accessLog().count == before)
        #expect(try vcache(["check"]).status == 2)
    }

    /// `info` says how many seconds play from the cached bytes, and draws what is cached: the
    /// seconds it names are exactly the longest `check --seconds` that is ready. For a fragmented
    /// MP4, whose moov does not say its duration, the seconds are searched for the same way.
    @Test(arguments: [("moov-at-end.mp4", 3.0, " of"), ("fragmented.mp4", 1.0, " from the cache (fragmented")])
    func infoSaysHowManySecondsPlayOffline(fixture: String, warmed: Double, wording: String) throws {
        let nginx = try Nginx()
        let url = try nginx.publish(fixture, try Fixtures.data(fixture))
        #expect(try vcache(["prefetch", "-q", url, "--seconds", String(warmed)]).status == 0)
        let json = try vcache(["info", url, "--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let playable = try #require(o["playable_seconds"] as? Double)
        #expect(playable >= warmed && playable < 10)
        #expect(try vcache(["check", url, "--seconds", String(format: "%.1f", playable)]).status == 0)
        #expect(try vcache(["check", url, "--seconds", String(format: "%.1f", playable + 0.1)]).status == 1)
        let text = try vcache(["info", url]).stdout
        #expect(text.contains("plays offline  the first \(String(format: "%.1fs", playable))\(wording)"), "\(text)")
        #expect(text.contains("█") && text.contains("(the video, start to end)"))
    }
}
