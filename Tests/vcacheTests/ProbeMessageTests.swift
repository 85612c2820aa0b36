import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Lines that said something untrue or beside the point (hostile probe h1, F5, F6, F7): the
/// `failed:` recap of a stream failed by a member, the stop of a live manifest's refetch, an MPD
/// with a DTD.
@Suite struct ProbeMessageTests {
    let dir = TempDirectory("vcache-probemessages")
    static let dashXML = LiveManifestRefetchTests.dashXML

    func origin() throws -> TestOrigin {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/d/v/", seed: 40)
        origin.setResource("/d/live.mpd", .init(body: LiveManifestRefetchTests.dynamicMPD, contentType: Self.dashXML))
        return origin
    }

    /// The recap names the member that failed: the MPD itself answered 200 (it read as "the MPD
    /// answered 404", the sign of an ended event, in a cron log).
    @Test
    func theRecapOfAStreamFailedByAMemberNamesTheMember() throws {
        let origin = try origin()
        var faults = TestOrigin.Faults()
        faults.statuses = Array(repeating: (404, [:]), count: 8)
        origin.setFaults("/d/v/1.m4s", faults)
        origin.setResource("/other.mp4", .init(body: DASHHostileOriginTests.box("ftyp", 64, fill: 9)))
        let mpd = origin.url("/d/live.mpd")
        let r = try VCacheBinary.run(["prefetch", "--retries", "0", mpd, origin.url("/other.mp4")], cacheDir: dir.file("c"))
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("failed:\n  \(mpd): member \(origin.url("/d/v/1.m4s")): origin answered 404 Not Found\n"), "\(r.stderr)")
        // --json's summary names it too (hostile probe h4, F7: it read as the MPD answering 404).
        let json = try VCacheBinary.run(["prefetch", "--json", "--retries", "0", mpd], cacheDir: dir.file("c-json"))
        let summary = try #require(json.stdout.split(separator: "\n").last { $0.contains("\"event\":\"summary\"") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(summary.utf8)) as? [String: Any])
        let failures = try #require(object["failures"] as? [[String: Any]])
        #expect(failures.count == 1 && failures[0]["url"] as? String == mpd && failures[0]["member"] as? String == origin.url("/d/v/1.m4s"), "\(summary)")
    }

    /// A live MPD's refetch stopped by SIGTERM or --max-time: the new copy is dropped (the cached
    /// one kept), and the lines say so instead of "what arrived is saved and a rerun resumes".
    @Test(arguments: [false, true])
    func aStoppedRefetchOfALiveManifestPromisesNoResume(deadline: Bool) throws {
        let origin = try origin()
        let cache = dir.file("c-\(deadline)"), url = origin.url("/d/live.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let newer = LiveManifestRefetchTests.dynamicMPD + Data("<!-- later -->\n".utf8)
        origin.setResource("/d/live.mpd", .init(body: newer, contentType: Self.dashXML))
        origin.hold("/d/live.mpd", at: newer.count / 2)
        defer { origin.release("/d/live.mpd") }
        let running = try VCacheBinary.start(["prefetch", url] + (deadline ? ["--max-time", "1"] : []), cacheDir: cache)
        #expect(origin.waitUntilHeld("/d/live.mpd"))
        if !deadline { running.kill(SIGTERM) }
        let r = running.finish()
        #expect(r.status == (deadline ? 3 : SIGTERM), "\(r.stderr)")
        #expect(!r.stderr.contains("resumes"), "\(r.stderr)")
        if deadline {
            #expect(r.stderr.contains("stopped \(url) at the --max-time deadline: the new copy being fetched was dropped and the cached copy kept; the next run fetches it again"), "\(r.stderr)")
        } else {
            #expect(r.stderr.contains("cannot prefetch \(url): interrupted; the new copy being fetched was dropped and the cached copy kept: the next run fetches it again"), "\(r.stderr)")
        }
    }

    /// An MPD with a DOCTYPE before its root is refused for its DTD, not as "not an <MPD> root
    /// element", after a short comment or a long one (hostile probe h4, F9: past the first 4 KiB
    /// it was the latter).
    @Test(arguments: [1, 6000])
    func anMPDWithADoctypeIsRefusedForItsDTD(commentLength: Int) throws {
        let origin = try origin()
        var body = Data("<?xml version=\"1.0\"?>\n<!-- \(String(repeating: "c", count: commentLength)) -->\n<!DOCTYPE MPD>\n".utf8)
        body += LiveManifestRefetchTests.dynamicMPD.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)[1]
        origin.setResource("/d/doct.mpd", .init(body: body, contentType: "text/xml"))
        let r = try VCacheBinary.run(["prefetch", "-q", origin.url("/d/doct.mpd")], cacheDir: dir.file("c"))
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr == "vcache: cannot prefetch \(origin.url("/d/doct.mpd")): origin's answer for a .mpd declares a DTD or entities (<!DOCTYPE or <!ENTITY): vcache refuses those in an MPD, never expanded or fetched; nothing of it was kept\n", "\(r.stderr)")
    }

    /// `--seconds ' 5'`, `1h1h`, a duration under a millisecond: refused in the usual line (exit 2).
    @Test(arguments: [" 5", "1h1h", "0.0000000000000000000001"])
    func malformedDurationsAreRefused(_ text: String) throws {
        let r = try VCacheBinary.run(["prefetch", "--retries", "0", "--seconds", text, "http://127.0.0.1:9/x.mp4"], cacheDir: dir.file("c"))
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("vcache: invalid duration '\(text)' for --seconds; use e.g. 30s, 5m, 2h"), "\(r.stderr)")
    }
}
