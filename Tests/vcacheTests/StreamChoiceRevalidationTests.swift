import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A stream complete for one choice, asked for another (`--variant`, `--audio`; hostile probe h3,
/// F8): the cached static manifest is asked for again before the new choice's members are
/// fetched, so they never come from a re-encode under the old manifest. The same choice again
/// asks for nothing. Served by TestOrigin.
@Suite struct StreamChoiceRevalidationTests {
    let dir = TempDirectory("vcache-choicereval")
    typealias R = DASHRevalidationTests

    /// A static MPD of two video Representations (`v` 180 lines, `w` 360, `width` wide) and one
    /// audio, two 2 s segments each, under `/s/<id>/`.
    static func mpd(width: Int) -> Data {
        Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="100000" width="\(width)" height="180" codecs="avc1.42c00d"/>
              <Representation id="w" bandwidth="200000" width="\(width * 2)" height="360" codecs="avc1.42c01e"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
              <SegmentTemplate initialization="a/init.mp4" media="a/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="a" bandwidth="64000" codecs="mp4a.40.2"/>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    /// Encode `seed` of every Representation with its MPD (ETag `m<seed>`); each path's bytes.
    static func serve(_ origin: TestOrigin, seed: UInt8, width: Int) -> [String: Data] {
        var out: [String: Data] = [:]
        for (i, r) in ["v", "w", "a"].enumerated() {
            let base = seed &+ UInt8(i * 16)
            out["/s/\(r)/init.mp4"] = DASHHostileOriginTests.box("ftyp", 24, fill: base)
            for n in 0..<2 { out["/s/\(r)/\(n).m4s"] = DASHHostileOriginTests.box("moof", 300 + Int(seed), fill: base &+ UInt8(n + 1)) }
        }
        for (path, body) in out {
            origin.setResource(path, .init(body: body, etag: "\"\(seed)-\(path.count)\"", contentType: path.hasSuffix(".m4s") ? "video/iso.segment" : "video/mp4"))
        }
        origin.setResource("/s/manifest.mpd", .init(body: mpd(width: width), etag: "\"m\(seed)\"", contentType: R.dashXML))
        return out
    }

    static func only(_ encode: [String: Data], _ reps: [String]) -> [String: Data] {
        encode.filter { p, _ in reps.contains { p.hasPrefix("/s/\($0)/") } }
    }

    @Test
    func anotherRepresentationOfACompleteStreamReEncodedInPlaceComesFromTheNewMPD() throws {
        let origin = try TestOrigin()
        let old = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        // The same choice again: nothing to fetch, nothing asked, not even the MPD (the first
        // run asked for it at its end: Docs/dash.md, "Changed during a run").
        #expect(origin.requests("/s/manifest.mpd").count == 2)
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        #expect(origin.requests("/s/manifest.mpd").count == 2)
        // The origin re-encodes in place; a run chooses the other Representation.
        let new = Self.serve(origin, seed: 7, width: 640)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest changed on the origin since the stream was cached for another choice: this run's choice is fetched from the new one; the 6 entries cached from the old one were dropped\n"), "\(r.stderr)")
        #expect(origin.headers("/s/manifest.mpd").dropFirst(2).first?["if-none-match"] == "\"m1\"")
        // The new choice and its audio are the new encode's; the old choice's members are gone.
        let want = Self.only(new, ["w", "a"])
        #expect(try R.cachedDigests(cache, origin, Array(want.keys)) == want.mapValues { TestBytes.sha256($0) })
        #expect(try R.cachedDigests(cache, origin, Array(Self.only(old, ["v"]).keys)).isEmpty)
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == "\"m7\"")
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// The MPD unchanged (304): the new choice is fetched, what is cached stays, one request more.
    @Test
    func anotherRepresentationOfAnUnchangedStreamKeepsWhatIsCached() throws {
        let origin = try TestOrigin()
        let encode = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        let r = try VCacheBinary.run(["prefetch", "--variant", "all", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("note:"), "\(r.stderr)")
        // Asked at the end of the first run, then before and at the end of the second.
        #expect(origin.headers("/s/manifest.mpd").count == 4)
        #expect(origin.headers("/s/manifest.mpd").dropFirst().allSatisfy { $0["if-none-match"] == "\"m1\"" })
        #expect(origin.requests("/s/v/0.m4s").count == 1)
        #expect(try R.cachedDigests(cache, origin, Array(encode.keys)) == encode.mapValues { TestBytes.sha256($0) })
    }

    /// A new --variant the cached MPD has no Representation for (hostile probe h9b, F10): the
    /// MPD is asked for again first, as for any new choice; the origin's now has one (a 1080p
    /// Representation added by a re-encode), so the choice is fetched from the new MPD, the old
    /// members dropped, exit 0. Before: exit 4 from the cached copy, the origin not asked.
    @Test
    func aVariantTheCachedMPDLacksIsAskedOfTheOriginFirst() throws {
        let origin = try TestOrigin()
        _ = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let asked = origin.requests("/s/manifest.mpd").count
        let new = Self.serve(origin, seed: 7, width: 320)
        var x: [String: Data] = ["/s/x/init.mp4": DASHHostileOriginTests.box("ftyp", 24, fill: 90)]
        for n in 0..<2 { x["/s/x/\(n).m4s"] = DASHHostileOriginTests.box("moof", 400, fill: UInt8(91 + n)) }
        for (path, body) in x { origin.setResource(path, .init(body: body, etag: "\"x-\(path.count)\"", contentType: "video/mp4")) }
        let text = String(decoding: Self.mpd(width: 320), as: UTF8.self).replacingOccurrences(
            of: "</AdaptationSet>\n    <AdaptationSet contentType=\"audio\"",
            with: "  <Representation id=\"x\" bandwidth=\"900000\" width=\"1920\" height=\"1080\" codecs=\"avc1.640028\"/>\n    </AdaptationSet>\n    <AdaptationSet contentType=\"audio\"")
        #expect(text.contains("id=\"x\""))
        origin.setResource("/s/manifest.mpd", .init(body: Data(text.utf8), etag: "\"m8\"", contentType: R.dashXML))
        let r = try VCacheBinary.run(["prefetch", "--variant", "1080p", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest changed on the origin since the stream was cached for another choice: this run's choice is fetched from the new one;"), "\(r.stderr)")
        #expect(origin.requests("/s/manifest.mpd").count > asked)
        #expect(try R.cachedDigests(cache, origin, Array(x.keys)) == x.mapValues { TestBytes.sha256($0) })
        #expect(try R.cachedDigests(cache, origin, Array(Self.only(new, ["a"]).keys)) == Self.only(new, ["a"]).mapValues { TestBytes.sha256($0) })
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == "\"m8\"")
    }

    /// The MPD cannot be asked for again: the new choice is not fetched under the cached copy.
    @Test
    func anotherRepresentationIsNotFetchedWhenTheMPDCannotBeAskedAgain() throws {
        let origin = try TestOrigin()
        _ = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        var f = TestOrigin.Faults()
        // 503 to the request and to each of its 3 retries (--retries).
        f.statuses = Array(repeating: (503, [:]), count: 4)
        origin.setFaults("/s/manifest.mpd", f)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): its stream is cached for other choices than this run's and its manifest could not be asked for again (origin answered 503): nothing was fetched, so this choice is not fetched under a cached copy the origin may have changed; run again once the origin answers\n"), "\(r.stderr)")
        #expect(origin.requests("/s/w/0.m4s").isEmpty)
    }

    /// HLS: a master complete for one variant, asked for another after a re-encode in place.
    @Test
    func anotherVariantOfACompleteHLSStreamReadsTheMasterAgain() throws {
        let origin = try TestOrigin()
        func encode(seed: UInt64, bandwidth: Int) -> [String: Data] {
            var master = "#EXTM3U\n"
            var out: [String: Data] = [:]
            for (i, v) in ["lo", "hi"].enumerated() {
                master += "#EXT-X-STREAM-INF:BANDWIDTH=\(bandwidth * (i + 1)),RESOLUTION=\(320 * (i + 1))x\(180 * (i + 1))\n\(v).m3u8\n"
                var media = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
                for n in 0..<2 {
                    media += "#EXTINF:2.0,\n\(v)\(n).ts\n"
                    let body = HLSHostileOriginTests.ts(20, seed: seed &+ UInt64(i * 8 + n))
                    out["/h/\(v)\(n).ts"] = body
                    origin.setResource("/h/\(v)\(n).ts", .init(body: body, etag: "\"\(seed)-\(v)\(n)\"", contentType: "video/mp2t"))
                }
                media += "#EXT-X-ENDLIST\n"
                origin.setResource("/h/\(v).m3u8", .init(body: Data(media.utf8), etag: "\"\(v)\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
            }
            origin.setResource("/h/master.m3u8", .init(body: Data(master.utf8), etag: "\"m\(seed)\"", contentType: "application/vnd.apple.mpegurl"))
            return out
        }
        _ = encode(seed: 1, bandwidth: 100000)
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        #expect(origin.requests("/h/master.m3u8").count == 2)
        let new = encode(seed: 50, bandwidth: 150000)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest changed on the origin since the stream was cached for another choice: this run's choice is fetched from the new one; the 3 entries cached from the old one were dropped\n"), "\(r.stderr)")
        #expect(origin.headers("/h/master.m3u8").dropFirst(2).first?["if-none-match"] == "\"m1\"")
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == "\"m50\"")
        let want = new.filter { $0.key.hasPrefix("/h/hi") }
        #expect(try R.cachedDigests(cache, origin, Array(want.keys)) == want.mapValues { TestBytes.sha256($0) })
        #expect(try R.cachedDigests(cache, origin, ["/h/lo0.ts", "/h/lo1.ts"]).isEmpty)
    }
}
