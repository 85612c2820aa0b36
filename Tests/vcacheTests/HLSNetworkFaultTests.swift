import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, network faults on an HLS stream under `prefetch`: an ffmpeg-made VOD playlist of 8
/// MPEG-TS segments (about 510 kB each) served by nginx in a network namespace of the test's own
/// (`NetNamespace`), and one connection broken once it carried 300 kB (in the middle of a
/// segment): reset, or black-holed. With `-j 1` that is the first segment's connection, with
/// `-j 8` whichever crossed first. And the playlist itself cut by a reset halfway. Each time: exit
/// 3, one `vcache:` line naming the member that failed and why, every claim of every member equal
/// to the origin's bytes, nothing said complete that is not, `check` not ready; then a run without
/// the fault completes every member byte-exact, `check` ready, `verify` clean. Needs root and
/// ffmpeg; elsewhere the runner reports each test skipped (on CI, failed) with the reason.
@Suite struct HLSNetworkFaultTests {
    let dir = TempDirectory("vcache-hlsnetfaults")
    static let segments = (0..<8).map { String(format: "seg_%03d.ts", $0) }

    struct StreamNotMade: Error, CustomStringConvertible { let description: String }

    /// A namespace whose nginx serves the stream at /hls/index.m3u8 (the tests carry
    /// `.requires(.ffmpeg, .netNamespace)`; a stream ffmpeg could not make throws).
    func namespace() throws -> NetNamespace {
        let ns = try NetNamespace()
        let out = ns.root + "/hls"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        // 8 s of lossless 640x360 in 1 s segments: about 510 kB each, so 300 kB is mid-segment.
        let made = try Tool.run("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25",
                                                    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "8",
                                                    "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", "-g", "25", "-keyint_min", "25",
                                                    "-sc_threshold", "0", "-c:a", "aac", "-b:a", "64k", "-f", "hls", "-hls_time", "1",
                                                    "-hls_playlist_type", "vod", "-hls_segment_filename", out + "/seg_%03d.ts", out + "/index.m3u8"])
        guard made.status == 0 else {
            ns.stop()
            throw StreamNotMade(description: "ffmpeg could not make the stream: \(made.err)")
        }
        return ns
    }

    /// The stream's members (playlist first) with the origin's bytes of each.
    func members(_ ns: NetNamespace, playlist: String = "index.m3u8") throws -> [(url: String, bytes: Data)] {
        let list = try String(contentsOfFile: ns.root + "/hls/" + playlist, encoding: .utf8)
        #expect(list.split(separator: "\n").filter { !$0.hasPrefix("#") } == Self.segments.map { Substring($0) }, "ffmpeg made \(list)")
        return try ([playlist] + Self.segments).map { (ns.url("/hls/" + $0), try Data(contentsOf: URL(fileURLWithPath: ns.root + "/hls/" + $0))) }
    }

    func prefetch(_ ns: NetNamespace, cache: String, _ args: [String]) throws -> (status: Int32, said: [String], err: String) {
        let r = try ns.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", VCacheBinary.path, "prefetch"] + args)
        return (r.status, r.err.split(separator: "\n").map(String.init).filter { $0.contains("vcache: ") }, r.err)
    }

    /// Every claim of every member equals the origin's bytes; the members in `incomplete` are not
    /// complete, every other one is.
    func expectTrueClaims(_ cache: String, _ members: [(url: String, bytes: Data)], incomplete: Set<String>) throws {
        let inspector = try CacheInspector(directory: cache)
        for m in members {
            let claims = try inspector.verifyClaims(m.url, origin: m.bytes)
            #expect(claims.mismatch == nil, "\(m.url): a claimed range differs from the origin: \(String(describing: claims.mismatch))")
            let complete = try inspector.entry(m.url)?.isComplete == true
            #expect(complete != incomplete.contains(m.url), "\(m.url): complete \(complete)")
            if complete { #expect(try inspector.dataSHA256(m.url) == TestBytes.sha256(m.bytes), "\(m.url)") }
        }
        #expect(try inspector.consistencyProblems().isEmpty)
    }

    /// The fault lifted, a run completes every member byte-exact; `check` and `verify` agree.
    func expectTheNextRunCompletes(_ ns: NetNamespace, cache: String, _ members: [(url: String, bytes: Data)], jobs: String) throws {
        let playlist = members[0].url
        #expect(try VCacheBinary.run(["check", playlist], cacheDir: cache).status == 1, "the stream was said ready with a member missing")
        try ns.liftFaults()
        let again = try prefetch(ns, cache: cache, ["-q", "-j", jobs, playlist])
        #expect(again.status == 0, "\(again.err)")
        let inspector = try CacheInspector(directory: cache)
        for m in members {
            #expect(try inspector.entry(m.url)?.sha256 == TestBytes.sha256(m.bytes), "\(m.url)")
            #expect(try inspector.dataSHA256(m.url) == TestBytes.sha256(m.bytes), "\(m.url)")
        }
        let check = try VCacheBinary.run(["check", playlist], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0 && verify.stdout.contains("9 entries checked, 0 with problems"), "\(verify.stdout)")
    }

    /// A segment's connection reset, or black-holed, once it carried 300 kB; with one job (the
    /// first segment's connection: the playlist's few bytes came before) and with eight.
    @Test(.requires(.ffmpeg, .netNamespace), arguments: ["reset", "black hole"], ["1", "8"])
    func aFaultMidSegmentNamesTheSegmentExits3AndTheNextRunCompletesTheStream(fault: String, jobs: String) throws {
        let ns = try namespace()
        defer { ns.stop() }
        let cache = dir.file("cache")
        let members = try members(ns)
        let playlist = members[0].url
        try ns.faultOnce(after: 300_000, fault == "reset" ? .reset : .blackHole)
        let started = ContinuousClock.now
        let r = try prefetch(ns, cache: cache, ["-j", jobs, "--retries", "0", "--timeout", "2s", playlist])
        print("prefetch -j \(jobs) under a \(fault): exit \(r.status) in \(ContinuousClock.now - started): \(r.said)")
        #expect(r.status == 3, "\(r.err)")
        let cause = fault == "reset" ? "connection failed while receiving (Recv failure: Connection reset by peer)" : "stalled: no data received for 2.0s"
        let named = Self.segments.map { ns.url("/hls/" + $0) }.filter { url in r.said.contains { $0.hasSuffix("vcache: cannot prefetch \(url): \(cause)") } }
        #expect(r.said.count == 1 && named.count == 1, "\(r.err)")
        if jobs == "1" { #expect(named == [ns.url("/hls/seg_000.ts")], "\(r.err)") }
        #expect(r.err.contains("0 done, 1 failed"), "\(r.err)")
        try expectTrueClaims(cache, members, incomplete: Set(named))
        let cut = try #require(members.first { named.contains($0.url) })
        let kept = try CacheInspector(directory: cache).verifyClaims(cut.url, origin: cut.bytes).claimed
        print("\(cut.url): \(kept) of \(cut.bytes.count) bytes kept")
        try expectTheNextRunCompletes(ns, cache: cache, members, jobs: jobs)
    }

    /// The playlist itself (padded with comment lines to 199 kB) reset at 100 kB: nothing of the
    /// stream is fetched, the playlist is kept partial and true, and the next run completes.
    @Test(.requires(.ffmpeg, .netNamespace))
    func aPlaylistCutHalfwayExits3FetchesNoSegmentAndTheNextRunCompletes() throws {
        let ns = try namespace()
        defer { ns.stop() }
        let cache = dir.file("cache")
        let lines = try String(contentsOfFile: ns.root + "/hls/index.m3u8", encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let padding = (1...2500).map { "# padding line \($0): a playlist long enough to be cut in the middle of its body" }
        let padded = (lines.prefix(5) + padding.map { Substring($0) } + lines.dropFirst(5)).joined(separator: "\n")
        try padded.write(toFile: ns.root + "/hls/padded.m3u8", atomically: true, encoding: .utf8)
        let members = try members(ns, playlist: "padded.m3u8")
        let playlist = members[0].url
        try ns.faultOnce(after: 100_000, .reset)
        let r = try prefetch(ns, cache: cache, ["--retries", "0", playlist])
        #expect(r.status == 3, "\(r.err)")
        #expect(r.said.count == 1 && r.said[0].hasSuffix("vcache: cannot prefetch \(playlist): connection failed while receiving (Recv failure: Connection reset by peer)"), "\(r.err)")
        let inspector = try CacheInspector(directory: cache)
        let claims = try inspector.verifyClaims(playlist, origin: members[0].bytes)
        print("the playlist cut: \(claims.claimed) of \(members[0].bytes.count) bytes kept")
        #expect(claims.mismatch == nil && claims.claimed < Int64(members[0].bytes.count))
        for m in members.dropFirst() { #expect(try inspector.entry(m.url) == nil, "\(m.url) was fetched from a cut playlist") }
        try expectTrueClaims(cache, Array(members.prefix(1)), incomplete: [playlist])
        try expectTheNextRunCompletes(ns, cache: cache, members, jobs: "4")
    }
}
