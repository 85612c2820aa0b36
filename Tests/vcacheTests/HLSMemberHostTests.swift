import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A playlist is data from the origin, not a list of hosts the user chose: prefetch fetches a
/// stream's members only from the hosts its playlists came from (the URL given, and where its
/// playlists were redirected), and from hosts `--allow-host` names. Each member refused is said
/// on a line of its own, counted in the summary, and fails the stream (exit 4).
@Suite struct HLSMemberHostTests {
    let dir = TempDirectory("vcache-hlshosts")
    static let mpegurl = "application/vnd.apple.mpegurl"

    @Test
    func membersOnAnotherHostAreRefusedUnlessAllowed() throws {
        // 127.0.0.2 stands for another host (a CDN, or 169.254.169.254).
        let origin = try TestOrigin(), other = try TestOrigin(address: "127.0.0.2")
        let seg = HLSHostileOriginTests.ts(20, seed: 41), far = HLSHostileOriginTests.ts(20, seed: 42)
        origin.setResource("/s/seg0.ts", .init(body: seg, contentType: "video/mp2t"))
        other.setResource("/x/seg1.ts", .init(body: far, contentType: "video/mp2t"))
        other.setResource("/x/k.key", .init(body: Data(repeating: 1, count: 16), contentType: "application/octet-stream"))
        let text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\n\(other.url("/x/seg1.ts"))\n"
            + "#EXT-X-KEY:METHOD=AES-128,URI=\"\(other.url("/x/k.key"))\",IV=0x00000000000000000000000000000001\n#EXTINF:2.0,\nseg2.ts\n#EXT-X-ENDLIST\n"
        origin.setResource("/s/index.m3u8", .init(body: Data(text.utf8), contentType: Self.mpegurl))
        origin.setResource("/s/seg2.ts", .init(body: Data(repeating: 3, count: 32), contentType: "video/mp2t"))
        let url = origin.url("/s/index.m3u8")

        let refused = try VCacheBinary.run(["prefetch", url], cacheDir: dir.file("a"))
        #expect(refused.status == 4, "\(refused.stderr)")
        #expect(other.requests("/x/seg1.ts").isEmpty && other.requests("/x/k.key").isEmpty, "the other host was asked")
        // One line for the stream: its first refused member, and how many more (a cron log
        // is not flooded by a playlist of thousands of segments on another host).
        let lines = refused.stderrLines.filter { $0.contains("cannot prefetch \(other.url("/x/"))") }
        #expect(lines.count == 1 && lines[0].contains("cannot prefetch \(other.url("/x/seg1.ts")): ") && lines[0].contains("--allow-host 127.0.0.2")
                && lines[0].contains("(and 1 more member of this stream refused for its host, not said one by one)"), "\(refused.stderr)")
        #expect(refused.stderrLines.last?.contains("2 stream members refused") == true, "\(refused.stderr)")
        // What the playlist's own host serves is cached all the same.
        let a = try CacheInspector(directory: dir.file("a"))
        #expect(try a.entry(origin.url("/s/seg0.ts"))?.sha256 == TestBytes.sha256(seg))
        #expect(try a.entry(other.url("/x/seg1.ts")) == nil)
        // check says they are refused, not merely missing: no wait brings them.
        let check = try VCacheBinary.run(["check", url], cacheDir: dir.file("a"))
        #expect(check.status == 1)
        #expect(check.stdout.contains("2 of them are on 127.0.0.2, not the stream's own host: prefetch refuses them unless --allow-host 127.0.0.2 allows them"),
                "\(check.stdout)")
        let checkAllowed = try VCacheBinary.run(["check", url, "--allow-host", "127.0.0.2"], cacheDir: dir.file("a"))
        #expect(checkAllowed.status == 1 && checkAllowed.stdout.contains("2 of the") && !checkAllowed.stdout.contains("refuses"), "\(checkAllowed.stdout)")
        // --json: the kind and the count.
        let json = try VCacheBinary.run(["prefetch", "--json", url], cacheDir: dir.file("a"))
        #expect(json.status == 4)
        #expect(json.stdout.contains("\"refused_host\"") && json.stdout.contains("\"refused_members\":2"), "\(json.stdout)")

        // Allowed by name (any port), or by host and port: fetched.
        for rule in ["127.0.0.2", "127.0.0.2:\(other.port)"] {
            let cache = dir.file("b-\(rule.count)")
            let allowed = try VCacheBinary.run(["prefetch", "-q", url, "--allow-host", rule], cacheDir: cache)
            #expect(allowed.status == 0, "\(rule): \(allowed.stderr)")
            #expect(try CacheInspector(directory: cache).entry(other.url("/x/seg1.ts"))?.sha256 == TestBytes.sha256(far))
            let ready = try VCacheBinary.run(["check", url, "--allow-host", rule], cacheDir: cache)
            #expect(ready.status == 0, "\(rule): \(ready.stdout)")
        }
        // Another port of the other host is still not allowed by a rule with a port.
        let wrongPort = try VCacheBinary.run(["prefetch", "-q", url, "--allow-host", "127.0.0.2:\(other.port == 1 ? 2 : other.port - 1)"], cacheDir: dir.file("c"))
        #expect(wrongPort.status == 4, "\(wrongPort.stderr)")
        // A malformed rule is a usage error.
        let bad = try VCacheBinary.run(["prefetch", url, "--allow-host", "http://x/"], cacheDir: dir.file("d"))
        #expect(bad.status == 2 && bad.stderrLines.count == 1, "\(bad.stderr)")
    }

    /// A playlist redirected to another host (a CDN edge) brings that host with it: the members
    /// its relative URIs name there are the stream's own.
    @Test
    func theHostAPlaylistWasRedirectedToIsTheStreamsOwn() throws {
        let origin = try TestOrigin(), edge = try TestOrigin(address: "127.0.0.2")
        let seg = HLSHostileOriginTests.ts(20, seed: 43)
        edge.setResource("/e/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts"]), contentType: Self.mpegurl))
        edge.setResource("/e/seg0.ts", .init(body: seg, contentType: "video/mp2t"))
        origin.setResource("/m/master.m3u8", .init(body: Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\nlow/index.m3u8\n".utf8), contentType: Self.mpegurl))
        var redirect = TestOrigin.Faults()
        redirect.redirectTo = edge.url("/e/index.m3u8")
        origin.setFaults("/m/low/index.m3u8", redirect)
        let r = try VCacheBinary.run(["prefetch", "-q", origin.url("/m/master.m3u8")], cacheDir: dir.file("cache"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try CacheInspector(directory: dir.file("cache")).entry(edge.url("/e/seg0.ts"))?.sha256 == TestBytes.sha256(seg))
        // Again, all cached: the host it was redirected to is still the stream's (the catalog says so).
        let again = try VCacheBinary.run(["prefetch", "-q", origin.url("/m/master.m3u8")], cacheDir: dir.file("cache"))
        #expect(again.status == 0, "\(again.stderr)")
    }
}

/// The HLS options of prefetch and check are checked as they are read: an empty or malformed
/// value is a usage error (exit 2, one line), never a stream that later fails to match.
@Suite struct HLSOptionTests {
    let dir = TempDirectory("vcache-hlsoptions")

    @Test(arguments: [["--audio", ""], ["--audio", " "], ["--audio", "en US"], ["--audio", "en,fr"], ["--variant", ""],
                      ["--variant", "0"], ["--variant", "0p"], ["--variant", "<=0p"], ["--allow-host", ""]])
    func aMalformedHLSOptionIsAUsageError(_ option: [String]) throws {
        for command in ["prefetch", "check"] where command == "prefetch" || option[0] != "--allow-host" {
            let r = try VCacheBinary.run([command, "http://127.0.0.1:1/s/index.m3u8"] + option, cacheDir: dir.file("cache"))
            #expect(r.status == 2 && r.stderrLines.count == 1 && r.stderr.contains(option[0]), "\(command) \(option): \(r.status) \(r.stderr)")
        }
    }

    @Test func aLanguageTagIsTaken() throws {
        let r = try VCacheBinary.run(["check", "http://127.0.0.1:1/s/index.m3u8", "--audio", "pt-BR"], cacheDir: dir.file("cache"))
        #expect(r.status == 1, "\(r.stderr)")  // absent, not a usage error
    }
}
