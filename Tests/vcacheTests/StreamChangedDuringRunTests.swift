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
}
