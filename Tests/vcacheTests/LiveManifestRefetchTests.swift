import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A live manifest (a dynamic MPD, an HLS playlist without EXT-X-ENDLIST) that `prefetch` fetches
/// again: its new copy replaces the cached one only once whole and the manifest it must be, so an
/// error page, a body no MPD, a stream expansion refuses, or a kill at any moment of the refetch
/// leaves the cached copy and its stream as they were (final probe, items 1-3). Served by the
/// in-process TestOrigin.
@Suite struct LiveManifestRefetchTests {
    let dir = TempDirectory("vcache-liverefetch")
    static let dashXML = "application/dash+xml"
    static let kept = "it could not be fetched again: its cached copy is kept, and its stream as it was"

    /// A dynamic MPD whose timeline lists two 2 s segments (available whatever the clock says).
    static let dynamicMPD = Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="1970-01-01T00:00:00Z" minimumUpdatePeriod="PT2S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <Period id="0" start="PT0S">
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate timescale="1" initialization="v/init.mp4" media="v/$Number$.m4s" startNumber="0">
                <SegmentTimeline><S t="0" d="2" r="1"/></SegmentTimeline>
              </SegmentTemplate>
              <Representation id="v" bandwidth="100000" width="320" height="180" codecs="avc1.42c00d"/>
            </AdaptationSet>
          </Period>
        </MPD>

        """.utf8)

    /// A live HLS media playlist of two MPEG-TS segments.
    static let livePlaylist = Data("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:2.0,\ns0.ts\n#EXTINF:2.0,\ns1.ts\n".utf8)

    /// An origin serving the MPD at `path` (and the playlist at /h/live.m3u8) and their members.
    func origin(mpdAt path: String = "/d/live.mpd") throws -> TestOrigin {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/d/v/", seed: 40)
        origin.setResource(path, .init(body: Self.dynamicMPD, contentType: Self.dashXML))
        for n in 0..<2 {
            // Four MPEG-TS packets: a sync byte, a header with no error and no scrambling, a payload.
            var ts = Data((0..<(188 * 4)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) })
            for p in 0..<4 { ts[p * 188] = 0x47; ts[p * 188 + 1] = 0x01; ts[p * 188 + 3] = 0x10 }
            origin.setResource("/h/s\(n).ts", .init(body: ts, contentType: "video/mp2t"))
        }
        origin.setResource("/h/live.m3u8", .init(body: Self.livePlaylist, contentType: "application/vnd.apple.mpegurl"))
        return origin
    }

    /// What `ls --json` and `info` say of the cache: its rows (one per stream or loose entry), the
    /// stream's state, and the manifest's SHA-256 as the catalog holds it.
    struct Seen: Equatable {
        var rows: Int
        var state: String?
        var members: String?
        var manifestSHA: String?
    }

    func seen(_ cache: String, _ url: String) throws -> Seen {
        let ls = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        var rows = 0
        var state: String?
        for line in ls.stdout.split(separator: "\n") {
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], o["url"] != nil, o["event"] as? String != "summary" else { continue }
            rows += 1
            if o["url"] as? String == url { state = o["state"] as? String }
        }
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        let members = info.stdout.split(separator: "\n").first { $0.hasPrefix("members") }.map(String.init)
        return Seen(rows: rows, state: state, members: members, manifestSHA: try CacheInspector(directory: cache).entry(url)?.sha256)
    }

    /// Item 1: a dynamic MPD whose URL answers 200 text/html (an error page) when fetched again is
    /// refused with one line and exit 4, nothing of the page kept, the cached MPD and its stream as
    /// they were (it was kept as a plain complete entry with exit 0, the stream gone, its members
    /// loose, and every later run said "nothing to fetch"). The same for an MPD whose URL does not
    /// end in .mpd (an MPD stream root by its Content-Type), and for a .mpd answered with a page on
    /// its first prefetch (cached as complete with exit 0).
    @Test
    func aDynamicMPDAnsweredWithAWebPageKeepsItsCachedCopyAndStream() throws {
        let page = Data("<html><body>oops</body></html>".utf8)
        for (path, what) in [("/d/live.mpd", "a .mpd"), ("/d/live", "an MPD")] {
            let origin = try origin(mpdAt: path)
            let cache = dir.file("c\(path.count)"), url = origin.url(path)
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            let before = try seen(cache, url)
            #expect(before == Seen(rows: 1, state: "complete", members: "members        4 of the 4 it names cached", manifestSHA: TestBytes.sha256(Self.dynamicMPD)))
            origin.setResource(path, .init(body: page, contentType: "text/html"))
            let failed = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
            #expect(failed.status == 4, "\(failed.stderr)")
            #expect(failed.stderr.contains("vcache: cannot prefetch \(url): origin's answer for \(what) is not an MPD: its first bytes '<html><body>oops' are not an <MPD> root element; nothing of it was kept\n"), "\(failed.stderr)")
            #expect(failed.stderr.contains("\(url): \(Self.kept)"), "\(failed.stderr)")
            #expect(try seen(cache, url) == before)
            // The origin back: the MPD is fetched again (not "nothing to fetch"), the stream whole.
            origin.setResource(path, .init(body: Self.dynamicMPD, contentType: Self.dashXML))
            let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(again.status == 0 && !again.stderr.contains("nothing to fetch"), "\(again.stderr)")
            #expect(try seen(cache, url) == before)
            #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        }

        // A static .mpd answered with a page on its first prefetch: refused, nothing kept.
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: page, contentType: "text/html"))
        let cache = dir.file("static"), url = origin.url("/s/manifest.mpd")
        let first = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
        #expect(first.status == 4, "\(first.stderr)")
        #expect(first.stderr.contains("vcache: cannot prefetch \(url): origin's answer for a .mpd is not an MPD: its first bytes '<html><body>oops' are not an <MPD> root element; nothing of it was kept\n"), "\(first.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url) == nil)
    }

    /// Item 2: a dynamic MPD fetched again, answered 200 application/dash+xml with a body that is
    /// no MPD, or with one whose root is an MPD but which expansion refuses (not well-formed XML):
    /// exit 4, and the cached copy and its stream are put back (they were lost).
    @Test
    func aDynamicMPDWhoseNewCopyIsRefusedIsPutBack() throws {
        let origin = try origin()
        let cache = dir.file("c"), url = origin.url("/d/live.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let before = try seen(cache, url)
        #expect(before.rows == 1 && before.state == "complete" && before.manifestSHA == TestBytes.sha256(Self.dynamicMPD), "\(before)")
        let broken = Data("<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"dynamic\"><Period><AdaptationSet>".utf8)
        for (body, said) in [(Data("hello, not an MPD\n".utf8), "origin's answer for a .mpd is not an MPD: its first bytes 'hello, not an MP' are not an <MPD> root element"),
                             (broken, "not an MPD vcache can read")] {
            origin.setResource("/d/live.mpd", .init(body: body, contentType: Self.dashXML))
            let failed = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
            #expect(failed.status == 4, "\(failed.stderr)")
            #expect(failed.stderr.contains(said), "\(failed.stderr)")
            #expect(failed.stderr.contains("\(url): \(Self.kept)"), "\(failed.stderr)")
            #expect(try seen(cache, url) == before)
        }
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// Item 3: SIGKILL while the new MPD's (or live playlist's) body is arriving (the origin holds
    /// it half sent) leaves the cached copy and its stream: `ls` and `info` show the stream with
    /// its members and the old manifest's SHA-256 (both were gone: the copy was only in memory).
    /// The next run replaces it. SIGTERM at the same moment puts the copy back and exits 143.
    @Test
    func aKillDuringTheRefetchOfALiveManifestKeepsItsCachedCopyAndStream() throws {
        let origin = try origin()
        for (path, body) in [("/d/live.mpd", Self.dynamicMPD), ("/h/live.m3u8", Self.livePlaylist)] {
            for signal in [SIGKILL, SIGTERM] {
                let cache = dir.file("c\(path.count)-\(signal)"), url = origin.url(path)
                origin.release(path)
                origin.setResource(path, .init(body: body, contentType: path.hasSuffix(".mpd") ? Self.dashXML : "application/vnd.apple.mpegurl"))
                let first = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
                #expect(first.status == 0, "\(first.stderr)")
                let before = try seen(cache, url)
                #expect(before.rows == 1 && before.state == "complete" && before.manifestSHA == TestBytes.sha256(body), "\(before)")
                // A new copy (a comment more), held at its middle.
                let newer = body + Data((path.hasSuffix(".mpd") ? "<!-- later -->\n" : "#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n").utf8)
                origin.setResource(path, .init(body: newer, contentType: path.hasSuffix(".mpd") ? Self.dashXML : "application/vnd.apple.mpegurl"))
                origin.hold(path, at: newer.count / 2)
                let running = try VCacheBinary.start(["prefetch", url], cacheDir: cache)
                #expect(origin.waitUntilHeld(path))
                running.kill(signal)
                let r = running.finish()
                if signal == SIGKILL {
                    #expect(r.signalled && r.status == SIGKILL)
                } else {
                    #expect(r.signalled && r.status == SIGTERM, "\(r.stderr)")
                    #expect(r.stderr.contains("\(url): \(Self.kept)"), "\(r.stderr)")
                }
                #expect(try seen(cache, url) == before)
                #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
                // The next run fetches the new copy, which replaces the old, in the same stream.
                origin.release(path)
                let next = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
                #expect(next.status == 0, "\(next.stderr)")
                var after = before
                after.manifestSHA = TestBytes.sha256(newer)
                #expect(try seen(cache, url) == after)
            }
        }
    }

    /// Finding F3/F4: SIGKILL inside the replacement itself (`storeWhole`, between its commit
    /// that drops the old claims and the one that claims the new bytes) left the manifest holding
    /// no bytes ("partial ... 0/0 segments", export refused) and the new copy as a loose row of
    /// the same URL, which the next run threw away: an origin that no longer answers never gave the
    /// stream back. Now the next run restores the whole new copy, without the origin: one row,
    /// complete with its members, the new manifest's SHA-256, export works.
    @Test
    func aKillInsideTheReplacementOfALiveManifestIsRestoredByTheNextRunWithoutTheOrigin() throws {
        for (path, body) in [("/d/live.mpd", Self.dynamicMPD), ("/h/live.m3u8", Self.livePlaylist)] {
            let origin = try origin()
            let type = path.hasSuffix(".mpd") ? Self.dashXML : "application/vnd.apple.mpegurl"
            let cache = dir.file("k\(path.count)"), url = origin.url(path)
            origin.setResource(path, .init(body: body, contentType: type))
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            let before = try seen(cache, url)
            #expect(before.rows == 1 && before.state == "complete", "\(before)")
            let newer = body + Data((path.hasSuffix(".mpd") ? "<!-- later -->\n" : "#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n").utf8)
            origin.setResource(path, .init(body: newer, contentType: type))
            let pauseDir = TempDirectory("vcache-liverefetch-pause")
            let pause = PausePoint("drop-all-after-invalidate", in: pauseDir)
            let running = try VCacheBinary.start(["prefetch", "-q", url], cacheDir: cache, environment: pause.environment)
            #expect(pause.waitUntilReached())
            running.kill(SIGKILL)
            #expect(running.finish().signalled)
            // The origin no longer answers the manifest (the event is over).
            var gone = TestOrigin.Faults()
            gone.statuses = Array(repeating: (404, [:]), count: 20)
            origin.setFaults(path, gone)
            let next = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(next.stderr.contains("\(url): \(Self.kept)"), "\(next.stderr)")
            var after = before
            after.manifestSHA = TestBytes.sha256(newer)
            #expect(try seen(cache, url) == after)
            #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(newer))
            let out = dir.file("export\(path.count)")
            let export = try VCacheBinary.run(["export", url, out], cacheDir: cache)
            if path.hasSuffix(".mpd") {
                #expect(export.status == 0, "\(export.stderr)")
            } else {
                // A live playlist is refused by export as such (it was "not the root of a cached stream").
                #expect(export.status == 1 && export.stderr.contains("\(url) is a live playlist (no EXT-X-ENDLIST)"), "\(export.stderr)")
            }
            #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        }
    }

    /// Finding F4: the staging entry a killed refetch leaves is vcache's own: `ls` does not list
    /// it as a second row of the URL (it did, and `info URL` did not know it), and `evict URL`
    /// removes it with the entry (it stayed, and a second `evict URL` said "not in the cache").
    @Test
    func theStagingEntryOfAKilledRefetchIsNotListedAndGoesWithEvictURL() throws {
        let origin = try origin()
        let cache = dir.file("f4"), url = origin.url("/d/live.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let stream = try CacheInspector(directory: cache).store.catalog.allEntries().count
        origin.setResource("/d/live.mpd", .init(body: Self.dynamicMPD + Data("<!-- later -->\n".utf8), contentType: Self.dashXML))
        let pauseDir = TempDirectory("vcache-liverefetch-pause")
        let pause = PausePoint("drop-all-after-invalidate", in: pauseDir)
        let running = try VCacheBinary.start(["prefetch", "-q", url], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        #expect(running.finish().signalled)
        let store = try CacheInspector(directory: cache).store
        #expect(try store.catalog.allEntries().count == stream + 1, "the stream's entries and the staging entry")
        #expect(try seen(cache, url).rows == 1)
        let evicted = try VCacheBinary.run(["evict", url], cacheDir: cache)
        #expect(evicted.status == 0, "\(evicted.stderr)")
        #expect(try store.catalog.allEntries().isEmpty)
        #expect(try seen(cache, url).rows == 0)
    }

    /// Finding F3 with `verify`: the manifest a kill left without bytes was "0 with problems";
    /// now `verify` says it, and `verify --fix` restores the new copy (no origin asked).
    @Test
    func verifyFixRestoresALiveManifestWhoseReplacementAKillCut() throws {
        let origin = try origin()
        let cache = dir.file("vf"), url = origin.url("/h/live.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let before = try seen(cache, url)
        let newer = Self.livePlaylist + Data("#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n".utf8)
        origin.setResource("/h/live.m3u8", .init(body: newer, contentType: "application/vnd.apple.mpegurl"))
        let pauseDir = TempDirectory("vcache-liverefetch-pause")
        let pause = PausePoint("drop-all-after-invalidate", in: pauseDir)
        let running = try VCacheBinary.start(["prefetch", "-q", url], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        #expect(running.finish().signalled)
        let checked = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(checked.status != 0 && checked.stdout.contains("its bytes were lost by a run killed while replacing them with a new copy; 'vcache verify --fix' restores that copy"), "\(checked.stdout)\(checked.stderr)")
        let requests = origin.requests("/h/live.m3u8").count
        let fixed = try VCacheBinary.run(["verify", "--fix"], cacheDir: cache)
        // 1: a problem was found, even if fixed (Docs/cli.md, verify).
        #expect(fixed.status == 1, "\(fixed.stdout)\(fixed.stderr)")
        #expect(fixed.stdout.contains("3 entries checked, 1 with problems, 1 fixed") && fixed.stdout.contains("restored the new copy that run fetched"), "\(fixed.stdout)")
        var after = before
        after.manifestSHA = TestBytes.sha256(newer)
        #expect(try seen(cache, url) == after)
        #expect(try CacheInspector(directory: cache).store.catalog.allEntries().count == before.rows + 2, "the playlist and its 2 segments, no staging entry")
        #expect(origin.requests("/h/live.m3u8").count == requests)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}

/// An empty 200 for a manifest (an origin starting up, a CDN glitch): refused, nothing kept, and
/// the manifest the origin serves later is fetched, by prefetch and by serve. It used to be kept
/// as a complete 0-byte entry that every later run took for the manifest ("nothing to fetch",
/// exit 0, serve answering 0 bytes for good), and an empty refetch of a live one exited 5,
/// blaming the cache (hostile probe h1, F1, F1b, F2).
@Suite struct EmptyManifestTests {
    let dir = TempDirectory("vcache-emptymanifest")

    @Test
    func anEmptyManifestIsRefusedAndTheRealOneFetchedLater() throws {
        let live = try LiveManifestRefetchTests().origin()
        for (path, body, type, what) in [("/d/live.mpd", LiveManifestRefetchTests.dynamicMPD, LiveManifestRefetchTests.dashXML, "a .mpd is empty: not an MPD"),
                                         ("/h/live.m3u8", LiveManifestRefetchTests.livePlaylist, "application/vnd.apple.mpegurl", "a .m3u8 is empty: not a playlist")] {
            let cache = dir.file("c\(path.count)"), url = live.url(path)
            live.setResource(path, .init(body: Data(), contentType: type))
            let empty = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
            #expect(empty.status == 4, "\(empty.stderr)")
            #expect(empty.stderr.contains("vcache: cannot prefetch \(url): origin's answer for \(what)"), "\(empty.stderr)")
            #expect(try CacheInspector(directory: cache).entry(url) == nil, "the empty answer was kept")
            // The origin serves the manifest now: fetched, its stream with it.
            live.setResource(path, .init(body: body, contentType: type))
            let real = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
            // A refetch answered empty: refused as not the manifest (4), the cached copy kept.
            live.setResource(path, .init(body: Data(), contentType: type))
            let refetch = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
            #expect(refetch.status == 4 && refetch.stderr.contains(what), "\(refetch.status): \(refetch.stderr)")
            #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        }
    }

    @Test
    func serveAnswersAnEmptyMPDWith502AndTheRealOneOnceTheOriginHasIt() throws {
        let live = try LiveManifestRefetchTests().origin()
        live.setResource("/d/live.mpd", .init(body: Data(), contentType: "application/octet-stream"))
        let cache = dir.file("serve")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { serve.stop() }
        let url = live.url("/d/live.mpd")
        let empty = try Curl.fetch([serve.url(url)], in: dir)
        #expect(empty.status == 502, "\(empty.status): \(serve.log.suffix(2))")
        live.setResource("/d/live.mpd", .init(body: LiveManifestRefetchTests.dynamicMPD, contentType: LiveManifestRefetchTests.dashXML))
        let real = try Curl.fetch([serve.url(url)], in: dir)
        #expect(real.status == 200 && String(decoding: real.body, as: UTF8.self).contains("<MPD"), "\(real.status): \(serve.log.suffix(2))")
    }

    /// prefetch under too few descriptors says so and does not start: at 6 to 9 it died by SIGILL
    /// (libdispatch), at 10 to 16 its downloads failed with EMFILE. Descriptors a parent left
    /// open count against the limit (a wrapper holding 36 under `ulimit -n 48`: it died too).
    @Test(.requires(.prlimit))
    func prefetchWithTooFewDescriptorsSaysSoAndStartsNothing() throws {
        let origin = try TestOrigin()
        origin.setResource("/v.bin", .init(body: TestBytes.make(1 << 16, seed: 5), etag: "\"v\""))
        let cache = dir.file("fds")
        let r = try Tool.run("/usr/bin/prlimit", ["--nofile=8:8", "/usr/bin/env", "VCACHE_DIR=\(cache)", VCacheBinary.path, "prefetch", origin.url("/v.bin")])
        #expect(r.status == 1, "\(r.status): \(r.err)")
        #expect(r.err == "vcache: cannot prefetch: only 8 open files are allowed (ulimit -n), and prefetch needs at least 24: raise the limit (ulimit -n)\n", "\(r.err)")
        #expect(origin.requests("/v.bin").isEmpty)
        // 40 allowed, 30 of them held open by the parent (a shell's `exec`): 10 left.
        let held = try Tool.run("/usr/bin/prlimit", ["--nofile=40:40", "/bin/bash", "-c", "for n in $(seq 10 39); do eval \"exec $n</dev/null\"; done; exec \"$0\" \"$@\"",
                                                     "/usr/bin/env", "VCACHE_DIR=\(cache)", VCacheBinary.path, "prefetch", origin.url("/v.bin")])
        // (bash holds one more of its own: 9 or 10 left.)
        #expect(held.status == 1 && held.err.contains(" open files are allowed (ulimit -n 40, less ") && held.err.contains(" its parent left open), and prefetch needs at least 24"),
                "\(held.status): \(held.err)")
        #expect(origin.requests("/v.bin").isEmpty)
    }
}

/// serve asked for a manifest the origin answers with a 206 it was not asked for, or a 304 to no
/// condition: 502 (or the manifest, fetched again), never that status passed on as the manifest's answer (an empty 206 without
/// Content-Range, a 304 the player never asked for: hostile probe h1, F11). Its errors (4xx,
/// 5xx) still reach the player as they are.
@Suite struct ServeManifestStatusTests {
    let dir = TempDirectory("vcache-servestatus")

    @Test(arguments: [206, 304, 204])
    func aManifestAnsweredWithAStatusNoPlainGETGetsIsNeverPassedOn(_ status: Int) throws {
        let live = try LiveManifestRefetchTests().origin()
        let serve = try ServeProcess(cacheDir: dir.file("c\(status)"), logDir: dir)
        defer { serve.stop() }
        for path in ["/d/live.mpd", "/h/live.m3u8"] {
            var f = TestOrigin.Faults()
            f.statuses = [(status, [:])]
            live.setFaults(path, f)
            // 502, or (the next request of serve's own, to the origin unfaulted) the manifest itself.
            let r = try Curl.fetch([serve.url(live.url(path))], in: dir)
            let text = String(decoding: r.body, as: UTF8.self)
            #expect(r.status == 502 || (r.status == 200 && (text.contains("<MPD") || text.hasPrefix("#EXTM3U"))), "\(path): \(r.status): \(serve.log.suffix(2))")
            var gone = TestOrigin.Faults()
            gone.statuses = [(410, [:])]
            live.setFaults(path, gone)
            #expect(try Curl.fetch([serve.url(live.url(path))], in: dir).status == 410)
        }
    }
}
