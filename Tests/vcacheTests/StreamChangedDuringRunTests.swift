import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// The origin re-encodes in place while one run fetches the stream (hostile probe h3): the
/// run's later members are the new encode under the manifest it read. A run that fetched members
/// of a static stream asks for its manifest once more at their end; changed, what it fetched is
/// dropped and the item fails (`changed`, exit 3), and the next run completes the stream from the
/// new manifest only (Docs/dash.md, Docs/hls.md, "Changed during a run"). Served by TestOrigin.
@Suite struct StreamChangedDuringRunTests {
    let dir = TempDirectory("vcache-changedrun")
    typealias R = DASHRevalidationTests

    @Test
    func anMPDReEncodedWhileARunFetchesItsStreamFailsTheRunAndDropsWhatItFetched() throws {
        let origin = try TestOrigin()
        let old = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        // One member at a time, the video's last held: the audio comes after it.
        origin.hold("/s/v/1.m4s", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "1", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/1.m4s"))
        let new = StreamRaceTests.serve(origin, seed: 7, width: 640)
        origin.release("/s/v/1.m4s")
        let r = run.finish()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): its manifest changed on the origin during this run: the 6 entries this run fetched of its stream may be of the new version, not the one the manifest it read names, so they were dropped: run the prefetch again\n"), "\(r.stderr)")
        #expect(origin.headers("/s/manifest.mpd").last?["if-none-match"] == "\"m1\"")
        #expect(try R.cachedDigests(cache, origin, Array(old.keys)).isEmpty)
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        // The next run finds the MPD changed and completes the stream from the new one only.
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        try StreamRaceTests.expectCompleteFrom(new, etag: "\"m7\"", cache: cache, origin: origin, url: url)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// Unchanged at the end (304): the run stands, with one request more; a run that fetched
    /// nothing asks for nothing.
    @Test
    func anUnchangedMPDAtTheRunsEndCostsOneConditionalRequest() throws {
        let origin = try TestOrigin()
        let encode = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        let r = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(origin.requests("/s/manifest.mpd").count == 2)
        #expect(origin.headers("/s/manifest.mpd").last?["if-none-match"] == "\"m1\"")
        try StreamRaceTests.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(origin.requests("/s/manifest.mpd").count == 2)
        // A dynamic MPD and a live playlist change by design: each run fetches them once, never at its end.
        let live = try LiveManifestRefetchTests().origin()
        for path in ["/d/live.mpd", "/h/live.m3u8"] {
            let r = try VCacheBinary.run(["prefetch", "-q", live.url(path)], cacheDir: dir.file("live"))
            #expect(r.status == 0, "\(path): \(r.stderr)")
            #expect(live.requests(path).count == 1, "\(path)")
        }
    }

    @Test
    func anHLSMediaPlaylistReEncodedWhileARunFetchesItFailsTheRun() throws {
        let origin = try TestOrigin()
        let old = HLSRevalidationTests.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        origin.hold("/h/1.ts", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "1", "--json", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/h/1.ts"))
        // The master stays as it was (the same resolution): only the media playlist and its
        // segments change.
        let new = HLSRevalidationTests.encode(origin, seed: 50, resolution: "320x180")
        var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for n in 0..<4 { media += "#EXTINF:2.002,\n\(n).ts\n" }
        origin.setResource("/h/v.m3u8", .init(body: Data((media + "#EXT-X-ENDLIST\n").utf8), etag: "\"v50\"", contentType: "application/vnd.apple.mpegurl"))
        origin.release("/h/1.ts")
        let r = run.finish()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.contains("\"kind\":\"changed\""), "\(r.stdout)")
        #expect(r.stdout.contains("its manifest changed on the origin during this run: the 5 entries this run fetched of its stream may be of the new version"), "\(r.stdout)")
        #expect(origin.headers("/h/v.m3u8").last?["if-none-match"] == "\"v1\"")
        #expect(try R.cachedDigests(cache, origin, Array(old.keys)).isEmpty)
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try R.cachedDigests(cache, origin, Array(new.keys)) == new.mapValues { TestBytes.sha256($0) })
    }

    static func statuses(_ list: [(Int, [String: String])]) -> TestOrigin.Faults {
        var f = TestOrigin.Faults()
        f.statuses = list
        return f
    }

    /// Holds the run at its first video segment, has `change` done to the origin, then holds the
    /// end check's answer (the MPD answered 200, body held at byte 10): the stream is mid end check.
    static func heldAtEndCheck(_ origin: TestOrigin, _ args: [String], cache: String, change: () -> Void) throws -> VCacheBinary.Running {
        origin.hold("/s/v/1.m4s", at: 10)
        let run = try VCacheBinary.start(args, cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/1.m4s"))
        change()
        origin.hold("/s/manifest.mpd", at: 10)
        origin.release("/s/v/1.m4s")
        #expect(origin.waitUntilHeld("/s/manifest.mpd"))
        return run
    }

    /// A run's members are unconfirmed until its end check finds the manifest unchanged (h9b F1):
    /// while the check waits, `ls` says partial, `check` missing and `export` refuses; a SIGTERM
    /// then stops the item (143, its JSON summary says 143, h9b F9), the mark stays, and the next
    /// run asks for the MPD again and completes the stream from the new encode only.
    @Test
    func aStreamIsUnconfirmedUntilItsEndCheckPassesAndAKillLeavesItSo() throws {
        let origin = try TestOrigin()
        let old = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        var new: [String: Data] = [:]
        let run = try Self.heldAtEndCheck(origin, ["prefetch", "-j", "1", "--json", url], cache: cache) {
            new = StreamRaceTests.serve(origin, seed: 7, width: 640)
        }
        // The members: 2 of the old encode, 4 of the new, under the old MPD.
        #expect(try R.cachedDigests(cache, origin, ["/s/v/0.m4s"]) == ["/s/v/0.m4s": TestBytes.sha256(old["/s/v/0.m4s"]!)])
        #expect(try R.cachedDigests(cache, origin, ["/s/a/1.m4s"]) == ["/s/a/1.m4s": TestBytes.sha256(new["/s/a/1.m4s"]!)])
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        let why = "a run fetching its stream has not found its manifest unchanged on the origin yet (it is asking now, or it was stopped or killed before it asked)"
        let check = try VCacheBinary.run(["check", "--json", url], cacheDir: cache)
        #expect(check.status != 0)
        #expect(check.stdout.contains("\"state\":\"missing\""), "\(check.stdout)")
        #expect(check.stdout.contains(why), "\(check.stdout)")
        let out = dir.file("out")
        let export = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(export.status != 0)
        #expect(export.stderr.contains("\(url) does not play from the cache: \(why); run 'vcache prefetch \(url)' to complete it"), "\(export.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out + "/manifest.mpd"))
        run.kill(SIGTERM)
        let r = run.finish()
        origin.release("/s/manifest.mpd")
        #expect(r.signalled && r.status == SIGTERM, "\(r.status) \(r.stderr)")
        let summary = r.stdout.split(separator: "\n").last { $0.contains("\"event\":\"summary\"") }.map(String.init) ?? ""
        #expect(summary.contains("\"exit_code\":143"), "\(summary)")
        #expect(summary.contains("\"done\":0"), "\(summary)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status != 0)
        // `evict --partial` takes it, as any partial stream (its members are all complete entries).
        let evicted = try VCacheBinary.run(["evict", "--partial"], cacheDir: cache)
        #expect(evicted.status == 0, "\(evicted.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == nil)
        // The next run asks for the MPD (changed): the old members go, the stream comes from the new one.
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        try StreamRaceTests.expectCompleteFrom(new, etag: "\"m7\"", cache: cache, origin: origin, url: url)
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status == 0)
    }

    /// --max-time running out while the MPD is asked for again at the run's end (h9b F2): the
    /// item is stopped (exit 3, its line says so), never complete; the next run asks for the MPD
    /// (304, its ETag the same) and the stream is complete without fetching a member again.
    @Test
    func maxTimeDuringTheEndCheckStopsTheItemAndTheNextRunConfirmsIt() throws {
        let origin = try TestOrigin()
        let encode = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        let run = try Self.heldAtEndCheck(origin, ["prefetch", "-j", "1", "--max-time", "4s", url], cache: cache) {
            // The same bytes under another ETag: the end check gets a body to hold.
            origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320), etag: "\"m1b\"", contentType: R.dashXML))
        }
        let r = run.finish()
        origin.release("/s/manifest.mpd")
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("1 stopped at --max-time"), "\(r.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        let segments = origin.requests("/s/v/1.m4s").count
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/s/v/1.m4s").count == segments)
        #expect(origin.requests("/s/manifest.mpd").count == 3)
        try StreamRaceTests.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)
    }

    /// The end check answered 503 (h9b F3): asked again as any request (--retries); with no
    /// retry left, the run stands, one note says so, and the stream stays unconfirmed (partial)
    /// until the next run finds the MPD unchanged.
    @Test
    func anEndCheckAnswered503IsRetriedAndUnansweredLeavesTheStreamUnconfirmed() throws {
        let origin = try TestOrigin()
        let encode = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let url = origin.url("/s/manifest.mpd")
        // One 503 once the MPD was read: the end check's retry gets the 304.
        origin.setFaults("/s/manifest.mpd", Self.statuses([(0, [:]), (503, [:])]))
        let cache = dir.file("c")
        let r = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(origin.requests("/s/manifest.mpd").count == 3)
        try StreamRaceTests.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)

        let origin2 = try TestOrigin()
        let encode2 = StreamRaceTests.serve(origin2, seed: 1, width: 320)
        let url2 = origin2.url("/s/manifest.mpd")
        origin2.setFaults("/s/manifest.mpd", Self.statuses([(0, [:]), (503, [:])]))
        let cache2 = dir.file("c2")
        let once = try VCacheBinary.run(["prefetch", "--retries", "0", url2], cacheDir: cache2)
        #expect(once.status == 0, "\(once.stderr)")
        #expect(once.stderr.contains(" note: \(url2): its manifest could not be asked for again at the end of this run (origin answered 503): what this run fetched stays, unconfirmed, so the stream reads partial until its next run finds the manifest unchanged\n"), "\(once.stderr)")
        #expect(origin2.requests("/s/manifest.mpd").count == 2)
        #expect(try DASHHostileOriginTests.lsState(cache2) == "partial")
        let again = try VCacheBinary.run(["prefetch", "-q", url2], cacheDir: cache2)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin2.requests("/s/manifest.mpd").count == 3)
        try StreamRaceTests.expectCompleteFrom(encode2, etag: "\"m1\"", cache: cache2, origin: origin2, url: url2)
    }

    /// A re-encode during the run whose MPD differs only in a cache-busting `?v=1` -> `?v=2` on
    /// every member URL, the member answered before it stored last (hostile probe h10a, F1: two
    /// lanes, the first segment held while the other lane fetches the new encode's): a query
    /// the key rules keep is part of the member's name, so the MPD is another encode whatever
    /// the members answer; nothing is asked of them (no `bytes=0-0`), the run's members are
    /// dropped (exit 3, the error naming the parameter), never completed mixed; the next run
    /// completes the new encode.
    @Test
    func aReEncodeThatChangesOnlyAVersionQueryIsAnotherEncodeWhateverIsStoredFirst() throws {
        let origin = try TestOrigin()
        let old = R.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320, query: "?v=1"), etag: "\"m1\"", contentType: R.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        origin.hold("/s/v/0.m4s", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "2", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/0.m4s"))
        let new = R.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320, query: "?v=2"), etag: "\"m2\"", contentType: R.dashXML))
        // The other lane fetches the rest (the new encode) before the held answer ends.
        for p in ["/s/v/1.m4s", "/s/a/0.m4s", "/s/a/1.m4s"] { #expect(origin.waitUntilServed(p, atLeast: new[p]!.count), "\(p)") }
        origin.release("/s/v/0.m4s")
        let r = run.finish()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): its manifest changed on the origin during this run: the 6 entries this run fetched of its stream may be of the new version, not the one the manifest it read names, so they were dropped: run the prefetch again\n"), "\(r.stderr)")
        // A short `v=2` is a version: no hint to strip it (h10c F5).
        #expect(!r.stderr.contains("key-strip-param"), "\(r.stderr)")
        #expect(!old.keys.contains { origin.requests($0).contains("bytes=0-0") })
        #expect(try R.cachedDigests(cache, origin, old.keys.map { $0 + "?v=1" }).isEmpty)
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status != 0)
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        let got = try R.cachedDigests(cache, origin, new.keys.map { $0 + "?v=2" })
        #expect(got == Dictionary(uniqueKeysWithValues: new.map { ($0.key + "?v=2", TestBytes.sha256($0.value)) }))
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    /// An MPD whose only difference at the end check is the query of URLs that name no member
    /// (h10a F10: a `moreInformationURL`, a `Location`, signed anew on each answer): the same
    /// encode, the run stands (exit 0, complete) and a rerun fetches nothing.
    @Test
    func aQueryOfURLsNamingNoMemberIsNoReEncode() throws {
        let origin = try TestOrigin()
        let encode = R.encode(origin, seed: 1)
        func stamped(_ t: Int) -> Data {
            let text = String(decoding: R.mpd(width: 320), as: UTF8.self).replacingOccurrences(of: "<Period>",
                with: "<ProgramInformation moreInformationURL=\"\(origin.url("/info.html"))?s=\(t)\"/>\n  <Location>\(origin.url("/s/manifest.mpd"))?s=\(t)</Location>\n  <Period>")
            return Data(text.utf8)
        }
        origin.setResource("/s/manifest.mpd", .init(body: stamped(1), etag: "\"m1\"", contentType: R.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        origin.hold("/s/v/1.m4s", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "1", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/1.m4s"))
        origin.setResource("/s/manifest.mpd", .init(body: stamped(2), etag: "\"m2\"", contentType: R.dashXML))
        origin.release("/s/v/1.m4s")
        let r = run.finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(encode.keys.allSatisfy { origin.requests($0).count == 1 })
    }

    /// A signed-URL HLS origin whose every URI carries a token new on each answer, the master's
    /// playlist URIs and the AES-128 key's (h10a F8, F9; the key answered without validators):
    /// with `key-strip-param t` in the cache's config the stream completes in one run and a
    /// rerun asks for no member; without it the tokens name other members (the end check finds
    /// another encode, exit 3) and the error names `t` and the rule, as does the next run's note.
    @Test
    func signedHLSWithTokensInTheMasterAndKeyURIsIsOneStreamUnderTheKeyRule() throws {
        for rule in [true, false] {
            let origin = try TestOrigin()
            func sign(_ t: Int) {
                let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\nv.m3u8?t=sig\(t)abcdef0\n"
                var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin?t=sig\(t)abcdef0\"\n"
                for n in 0..<3 { media += "#EXTINF:2.0,\n\(n).ts?t=sig\(t)abcdef0\n" }
                origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"ma\(t)\"", contentType: "application/vnd.apple.mpegurl"))
                origin.setResource("/h/v.m3u8", .init(body: Data((media + "#EXT-X-ENDLIST\n").utf8), etag: "\"v\(t)\"", contentType: "application/vnd.apple.mpegurl"))
            }
            sign(1)
            origin.setResource("/h/key.bin", .init(body: Data(repeating: 7, count: 16), contentType: "application/octet-stream"))
            for n in 0..<3 { origin.setResource("/h/\(n).ts", .init(body: HLSHostileOriginTests.ts(20, seed: UInt64(n)), etag: "\"s\(n)\"", contentType: "video/mp2t")) }
            let members = ["/h/key.bin", "/h/0.ts", "/h/1.ts", "/h/2.ts"]
            let cache = dir.file("c-\(rule)")
            let url = origin.url("/h/master.m3u8")
            if rule { #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "t"], cacheDir: cache).status == 0) }
            origin.hold("/h/1.ts", at: 10)
            let run = try VCacheBinary.start(["prefetch", "-j", "1", url], cacheDir: cache)
            #expect(origin.waitUntilHeld("/h/1.ts"))
            sign(2)
            origin.release("/h/1.ts")
            let r = run.finish()
            if rule {
                #expect(r.status == 0, "\(r.stderr)")
                #expect(try Self.hlsState(cache) == "complete")
                let before = members.map { origin.requests($0).count }
                sign(3)
                let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
                #expect(again.status == 0, "\(again.stderr)")
                #expect(members.map { origin.requests($0).count } == before)
                #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status == 0)
            } else {
                #expect(r.status == 3, "\(r.stderr)")
                #expect(r.stderr.contains(": only the query parameter t of its member URLs differs: if the origin signs URLs anew on each answer, 'vcache config set key-strip-param t' keys them as one; if it re-encoded, run the prefetch again\n"), "\(r.stderr)")
                #expect(!members.contains { origin.requests($0).contains("bytes=0-0") })
                #expect(try Self.hlsState(cache) == "partial")
                // The next run finds the master changed as it begins: the note names `t` too, and
                // the stream is completed from the answer it read (the origin signs nothing new).
                let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
                #expect(again.status == 0, "\(again.stderr)")
                #expect(again.stderr.contains("note: \(url): its manifest changed on the origin since the stream was partly cached: the stream is completed from the new one; "), "\(again.stderr)")
                #expect(again.stderr.contains("; only the query parameter t of its member URLs differs: if the origin signs URLs anew on each answer, 'vcache config set key-strip-param t' keys them as one\n"), "\(again.stderr)")
                #expect(try Self.hlsState(cache) == "complete")
            }
        }
    }

    /// The end check answered 200 with an HTML page (a CDN's error page, h9d F14): no MPD, so no
    /// answer to judge by, not a re-encode: the run stands (exit 0) with the note, the stream
    /// unconfirmed; the next run finds the MPD unchanged and confirms it, fetching nothing again.
    @Test
    func anEndCheckAnsweredWithAnHTMLPageIsNoAnswerNotAReEncode() throws {
        let origin = try TestOrigin()
        let encode = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        origin.hold("/s/v/1.m4s", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "1", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/1.m4s"))
        origin.setResource("/s/manifest.mpd", .init(body: Data("<html><body>maintenance</body></html>".utf8), contentType: "text/html"))
        origin.release("/s/v/1.m4s")
        let r = run.finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains(" note: \(url): its manifest could not be asked for again at the end of this run (the origin's answer is not an MPD): what this run fetched stays, unconfirmed, so the stream reads partial until its next run finds the manifest unchanged\n"), "\(r.stderr)")
        #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        _ = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let again = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/s/v/1.m4s").count == 1)
        try StreamRaceTests.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)
    }

    /// `info` of an unconfirmed stream (h9d F9, F15): its state says why it is partial, in
    /// words, with no role row named after the mark; `--json` gives the root `role: manifest`
    /// with `unconfirmed: true` (Docs/json.md), as a root to ask again has `ask_again`.
    @Test
    func infoOfAnUnconfirmedStreamSaysWhyAndItsRootIsTheManifest() throws {
        let origin = try TestOrigin()
        _ = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let url = origin.url("/s/manifest.mpd")
        origin.setFaults("/s/manifest.mpd", Self.statuses([(0, [:]), (503, [:])]))
        let cache = dir.file("c")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--retries", "0", url], cacheDir: cache).status == 0)
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("partial; not confirmed: a run fetching its stream has not found its manifest unchanged on the origin yet (it is asking now, was stopped or killed before it asked, or the origin did not answer): the next prefetch asks for it again\n"), "\(info.stdout)")
        #expect(!info.stdout.contains("unconfirmeds"), "\(info.stdout)")
        // Serve does not answer it offline: info does not say it plays (h10a, F15's leftover).
        #expect(info.stdout.contains("plays offline  not until its manifest is confirmed (serve answers it offline with 502; "), "\(info.stdout)")
        // ls --json says why, as its text line does (h10a F11).
        let lsJSON = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        let row = lsJSON.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["event"] as? String == "stream" }
        #expect(row?["unconfirmed"] as? Bool == true, "\(lsJSON.stdout)")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.stdout.contains(" entries, unconfirmed: the next prefetch asks for its manifest again)"), "\(ls.stdout)")
        let json = try VCacheBinary.run(["info", "--json", url], cacheDir: cache)
        let event = json.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["event"] as? String == "stream" }
        let members = event?["members"] as? [[String: Any]] ?? []
        #expect(members.first?["role"] as? String == "manifest", "\(json.stdout)")
        #expect(members.first?["unconfirmed"] as? Bool == true, "\(json.stdout)")
        #expect(members.allSatisfy { ["manifest", "segment", "init"].contains($0["role"] as? String ?? "") }, "\(json.stdout)")
        let doc = try String(contentsOfFile: Fixtures.directory + "/../../Docs/json.md", encoding: .utf8)
        #expect(doc.contains("has `unconfirmed: true`"))
    }

    /// An MPD redirected to another location on each answer (h9b F5), a token new in every
    /// segment URL on each answer that the cache's key rules strip, a `publishTime` stamped on
    /// each answer (h9b F6): no re-encode, so the run stands (exit 0, complete) and a rerun asks
    /// for nothing.
    @Test
    func answersThatDifferOnlyInLocationTokensOrPublishTimeAreNoReEncode() throws {
        // Per-answer redirect: /e1/ first, /e2/ for the end check (its 304 answered there).
        do {
            let origin = try TestOrigin()
            let encode = R.encode(origin, seed: 1)
            for e in ["/e1", "/e2"] {
                for (path, body) in encode { origin.setResource(e + path, .init(body: body, etag: "\"\(path)\"", contentType: "video/mp4")) }
                origin.setResource(e + "/s/manifest.mpd", .init(body: R.mpd(width: 320), etag: "\"m1\"", contentType: R.dashXML))
            }
            origin.setFaults("/s/manifest.mpd", Self.statuses([(302, ["Location": "/e1/s/manifest.mpd"]), (302, ["Location": "/e2/s/manifest.mpd"])]))
            let cache = dir.file("r")
            let url = origin.url("/s/manifest.mpd")
            let r = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(origin.headers("/e2/s/manifest.mpd").last?["if-none-match"] == "\"m1\"")
            #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
            let got = try R.cachedDigests(cache, origin, encode.keys.map { "/e1" + $0 })
            #expect(got == Dictionary(uniqueKeysWithValues: encode.map { ("/e1" + $0.key, TestBytes.sha256($0.value)) }))
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            #expect(origin.requests("/s/manifest.mpd").count == 2)
        }
        // A token new on each answer (`key-strip-param token`); a publishTime new on each answer.
        let stamped = { (token: String, time: String) -> Data in
            var text = String(decoding: R.mpd(width: 320, query: "?token=\(token)"), as: UTF8.self)
            text = text.replacingOccurrences(of: "type=\"static\"", with: "type=\"static\" publishTime=\"\(time)\"")
            return Data(text.utf8)
        }
        for (first, second) in [(("aaa", "2026-01-01T00:00:00Z"), ("bbb", "2026-01-01T00:00:00Z")),
                                (("aaa", "2026-01-01T00:00:00Z"), ("aaa", "2026-01-01T00:00:07Z"))] {
            let origin = try TestOrigin()
            let encode = R.encode(origin, seed: 1)
            origin.setResource("/s/manifest.mpd", .init(body: stamped(first.0, first.1), etag: "\"m1\"", contentType: R.dashXML))
            let cache = dir.file("t-\(second.0)")
            let url = origin.url("/s/manifest.mpd")
            #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
            origin.hold("/s/v/1.m4s", at: 10)
            let run = try VCacheBinary.start(["prefetch", "-j", "1", "-q", url], cacheDir: cache)
            #expect(origin.waitUntilHeld("/s/v/1.m4s"))
            origin.setResource("/s/manifest.mpd", .init(body: stamped(second.0, second.1), etag: "\"m2\"", contentType: R.dashXML))
            origin.release("/s/v/1.m4s")
            let r = run.finish()
            #expect(r.status == 0, "\(second): \(r.stderr)")
            #expect(origin.requests("/s/manifest.mpd").count == 2)
            #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
            // Keyed without the token (the key rules strip it).
            #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
        }
    }

    /// The end check in `-v` (h9b F12), and a 304 answered to it when it carried no validator
    /// (the origin gave none): no answer about the bytes, so the stream stays unconfirmed.
    @Test
    func theEndCheckIsTracedAndA304WithoutValidatorsIsNoAnswer() throws {
        let origin = try TestOrigin()
        _ = StreamRaceTests.serve(origin, seed: 1, width: 320)
        let url = origin.url("/s/manifest.mpd")
        let traced = try VCacheBinary.run(["prefetch", "-v", url], cacheDir: dir.file("v"))
        #expect(traced.status == 0, "\(traced.stderr)")
        #expect(traced.stderr.contains("\(url): end check: > GET If-None-Match: \"m1\"\n"), "\(traced.stderr)")
        #expect(traced.stderr.contains("\(url): end check: unchanged (the version this run read)\n"), "\(traced.stderr)")

        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320), contentType: R.dashXML))
        origin.setFaults("/s/manifest.mpd", Self.statuses([(0, [:]), (304, [:])]))
        let cache = dir.file("c")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(origin.headers("/s/manifest.mpd").last?["if-none-match"] == nil)
        #expect(r.stderr.contains(" note: \(url): its manifest could not be asked for again at the end of this run (origin answered 304 to a request without validators): what this run fetched stays, unconfirmed, so the stream reads partial until its next run finds the manifest unchanged\n"), "\(r.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
    }

    /// Two MPDs naming the same segment URLs in one run (h9b F8): the end check of the one whose
    /// item fetched them drops them, and the other, whose stream they were members of too, is
    /// not reported done: both fail, and a note names why the second did.
    @Test
    func aStreamSharingMembersDroppedByAnotherRootsEndCheckIsNotDone() throws {
        let origin = try TestOrigin()
        func other(_ width: Int, _ etag: String) {
            let text = String(decoding: R.mpd(width: width), as: UTF8.self).replacingOccurrences(of: "minBufferTime=\"PT2S\"", with: "minBufferTime=\"PT3S\"")
            origin.setResource("/s/other.mpd", .init(body: Data(text.utf8), etag: etag, contentType: R.dashXML))
        }
        let old = StreamRaceTests.serve(origin, seed: 1, width: 320)
        other(320, "\"o1\"")
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd"), url2 = origin.url("/s/other.mpd")
        origin.hold("/s/v/1.m4s", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "1", url, url2], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/v/1.m4s"))
        _ = StreamRaceTests.serve(origin, seed: 7, width: 640)
        other(640, "\"o7\"")
        origin.release("/s/v/1.m4s")
        let r = run.finish()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("0 done, 2 failed;"), "\(r.stderr)")
        let noted = [(url2, url), (url, url2)].contains { a, b in
            r.stderr.contains(" note: \(a): members of its stream were fetched for \(b), whose manifest changed on the origin during this run, and were dropped with what that run fetched\n")
        }
        #expect(noted, "\(r.stderr)")
        #expect(try R.cachedDigests(cache, origin, Array(old.keys)).isEmpty)
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(!ls.stdout.contains("complete"), "\(ls.stdout)")
    }

    /// The HLS state word from `ls --json`.
    static func hlsState(_ cache: String) throws -> String? {
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        for line in ls.stdout.split(separator: "\n").map(String.init) {
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], o["format"] as? String == "hls" else { continue }
            return o["state"] as? String
        }
        return nil
    }

    /// An HLS master's stream is unconfirmed while its end check waits, though its media
    /// playlist's members were recorded after the mark was set (h9b F1, F15); the check
    /// passing (the same bytes under a new ETag) confirms it, with no member fetched again.
    @Test
    func anHLSStreamIsUnconfirmedUntilItsEndCheckPasses() throws {
        let origin = try TestOrigin()
        let encode = HLSRevalidationTests.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        origin.hold("/h/1.ts", at: 10)
        let run = try VCacheBinary.start(["prefetch", "-j", "2", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/h/1.ts"))
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\nv.m3u8\n"
        origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"again\"", contentType: "application/vnd.apple.mpegurl"))
        origin.hold("/h/master.m3u8", at: 10)
        origin.release("/h/1.ts")
        #expect(origin.waitUntilHeld("/h/master.m3u8"))
        #expect(try Self.hlsState(cache) == "partial")
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status != 0)
        origin.release("/h/master.m3u8")
        let r = run.finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Self.hlsState(cache) == "complete")
        #expect(try VCacheBinary.run(["check", url], cacheDir: cache).status == 0)
        #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
        #expect(encode.keys.allSatisfy { origin.requests($0).count == 1 })
    }
}
