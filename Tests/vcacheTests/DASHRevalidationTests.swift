import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A partly cached stream is completed from the manifest the origin serves now (probe D2, D12,
/// D9): the cached static MPD is asked for again (conditionally) before its members are fetched;
/// a changed one replaces it and every member of the old version goes. Served by TestOrigin.
@Suite struct DASHRevalidationTests {
    let dir = TempDirectory("vcache-dashreval")
    static let dashXML = "application/dash+xml"

    /// A static MPD of two 2 s segments per Representation: video `v/`, audio `a/`, each
    /// segment URL ending `query` (a signed URL's token), the video `width` wide.
    static func mpd(width: Int, query: String = "") -> Data {
        Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="v/init.mp4\(query)" media="v/$Number$.m4s\(query)" duration="2" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="100000" width="\(width)" height="180" codecs="avc1.42c00d"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
              <SegmentTemplate initialization="a/init.mp4\(query)" media="a/$Number$.m4s\(query)" duration="2" timescale="1" startNumber="0"/>
              <Representation id="a" bandwidth="64000" codecs="mp4a.40.2"/>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    /// One encode: every init and segment under `/s/`, each its own bytes (fMP4 boxes filled
    /// from `seed`) with an ETag naming the encode. Returns each path's bytes.
    @discardableResult
    static func encode(_ origin: TestOrigin, seed: UInt8, faults: TestOrigin.Faults? = nil) -> [String: Data] {
        var out: [String: Data] = [:]
        for (i, r) in ["v", "a"].enumerated() {
            let base = seed &+ UInt8(i * 16)
            out["/s/\(r)/init.mp4"] = DASHHostileOriginTests.box("ftyp", 24, fill: base)
            for n in 0..<2 { out["/s/\(r)/\(n).m4s"] = DASHHostileOriginTests.box("moof", 300 + Int(seed), fill: base &+ UInt8(n + 1)) }
        }
        for (path, body) in out {
            origin.setResource(path, .init(body: body, etag: "\"\(seed)-\(path.count)\"", contentType: path.hasSuffix(".m4s") ? "video/iso.segment" : "video/mp4"))
            if let faults { origin.setFaults(path, faults) }
        }
        return out
    }

    /// The SHA-256 of each cached member, by origin path.
    static func cachedDigests(_ cache: String, _ origin: TestOrigin, _ paths: [String]) throws -> [String: String] {
        let store = try CacheStore(directory: cache, readOnly: true)
        var out: [String: String] = [:]
        for p in paths {
            guard let e = try CacheInspector(directory: cache).entry(origin.url(p)), e.isComplete, let n = e.length,
                  let bytes = store.cachedBytes(of: e, at: 0, count: n) else { continue }
            out[p] = TestBytes.sha256(Data(bytes))
        }
        return out
    }

    /// The origin serving encode 1 and its MPD (ETag "m1"), the stream's first 2 s cached.
    func partlyCached() throws -> (origin: TestOrigin, old: [String: Data], cache: String, url: String) {
        let origin = try TestOrigin()
        let old = Self.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 320), etag: "\"m1\"", contentType: Self.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        return (origin, old, cache, url)
    }

    @Test
    func aStreamReEncodedInPlaceIsCompletedFromTheNewMPDOnly() throws {
        let (origin, _, cache, url) = try partlyCached()
        // The origin re-encodes in place: the same URLs, new bytes, a new MPD with a new ETag.
        let new = Self.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 640), etag: "\"m2\"", contentType: Self.dashXML))
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest changed on the origin since the stream was partly cached: the stream is completed from the new one; the 4 entries cached from the old one were dropped\n"), "\(r.stderr)")
        // Asked at the end of the first run, before this one, and at its end (Docs/dash.md,
        // "Changed during a run").
        #expect(origin.requests("/s/manifest.mpd").count == 4)
        #expect(origin.headers("/s/manifest.mpd").dropFirst(2).first?["if-none-match"] == "\"m1\"")
        #expect(origin.headers("/s/manifest.mpd").last?["if-none-match"] == "\"m2\"")
        // Every member is the new encode's, the MPD the new one.
        let got = try Self.cachedDigests(cache, origin, Array(new.keys))
        #expect(got == new.mapValues { TestBytes.sha256($0) })
        let mpd = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(mpd.validators.etag == "\"m2\"")
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        // Complete now: a rerun has nothing to fetch and asks for nothing, not even the MPD.
        let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(origin.requests("/s/manifest.mpd").count == 4)
    }

    /// A bad deploy: the MPD once answered well-formed with no AdaptationSet (refused, exit 4).
    /// Once the origin serves the stream again, the next run asks for the MPD and completes the
    /// stream; a stream of no Representation was "complete", never asked again (probe h2, F17).
    @Test
    func aStreamWhoseMPDOnceNamedNothingIsCompletedOnceTheOriginIsFixed() throws {
        let (origin, old, cache, url) = try partlyCached()
        let empty = Data("<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" mediaPresentationDuration=\"PT4S\"><Period/></MPD>\n".utf8)
        origin.setResource("/s/manifest.mpd", .init(body: empty, etag: "\"bad\"", contentType: Self.dashXML))
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 4)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 320), etag: "\"m3\"", contentType: Self.dashXML))
        let fixed = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(try Self.cachedDigests(cache, origin, Array(old.keys)) == old.mapValues { TestBytes.sha256($0) })
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    @Test
    func anUnchangedMPDIsAskedOnceConditionallyAndKeepsWhatIsCached() throws {
        let (origin, old, cache, url) = try partlyCached()
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("note:"), "\(r.stderr)")
        // One conditional request (answered 304), and one at the run's end (it fetched the
        // rest); the cached members are not fetched again.
        #expect(origin.requests("/s/manifest.mpd").count == 4)
        #expect(origin.headers("/s/manifest.mpd").last?["if-none-match"] == "\"m1\"")
        #expect(origin.requests("/s/v/0.m4s").count == 1)
        #expect(try Self.cachedDigests(cache, origin, Array(old.keys)) == old.mapValues { TestBytes.sha256($0) })
    }

    @Test
    func rotatedSegmentTokensInTheMPDAreUsedByTheRunThatCompletesTheStream() throws {
        let origin = try TestOrigin()
        var faults = TestOrigin.Faults()
        faults.requiredQuery = "token=aaa"
        Self.encode(origin, seed: 1, faults: faults)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 320, query: "?token=aaa"), etag: "\"m1\"", contentType: Self.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        let first = try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(first.status == 0, "\(first.stderr)")
        // The tokens rotate: the old one is refused (403), the MPD names the new one.
        faults.requiredQuery = "token=bbb"
        let bytes = Self.encode(origin, seed: 1, faults: faults)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 320, query: "?token=bbb"), etag: "\"m2\"", contentType: Self.dashXML))
        let r = try VCacheBinary.run(["prefetch", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        // The same MPD under the key rules (hostile probe h2, F1): what is cached stays, the rest
        // is fetched with the token the new copy names.
        #expect(!r.stderr.contains("its manifest changed"), "\(r.stderr)")
        #expect(origin.queries("/s/v/0.m4s") == ["token=aaa"])
        #expect(origin.queries("/s/v/1.m4s") == ["token=bbb"])
        var got: [String: String] = [:]
        for (p, b) in bytes {
            let e = try #require(try CacheInspector(directory: cache).entry(origin.url(p)))
            let store = try CacheStore(directory: cache, readOnly: true)
            got[p] = store.cachedBytes(of: e, at: 0, count: try #require(e.length)).map { TestBytes.sha256(Data($0)) }
        }
        #expect(got == bytes.mapValues { TestBytes.sha256($0) })
        #expect(try VCacheBinary.run(["check", "--key-strip-param", "token", url], cacheDir: cache).status == 0)
    }

    /// An MPD the origin cannot answer now (a 503, an error page answered 200): the stream is not
    /// completed from a cached copy that may be stale; the item fails and nothing more is fetched.
    @Test
    func aPartialStreamWhoseMPDCannotBeAskedAgainIsNotCompletedFromTheCachedCopy() throws {
        let (origin, _, cache, url) = try partlyCached()
        var f = TestOrigin.Faults()
        f.statuses = [(503, [:])]
        origin.setFaults("/s/manifest.mpd", f)
        var r = try VCacheBinary.run(["prefetch", "--retries", "0", url], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("vcache: cannot prefetch \(url): its stream is partly cached and its manifest could not be asked for again (origin answered 503): nothing more was fetched, so the stream is not completed from a cached copy the origin may have changed; run again once the origin answers\n"), "\(r.stderr)")
        #expect(origin.requests("/s/v/1.m4s").isEmpty)
        // An error page answered 200 is no MPD: the cached one stays, nothing more is fetched.
        origin.setResource("/s/manifest.mpd", .init(body: Data("<html><body>maintenance</body></html>".utf8), contentType: "text/html"))
        r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("its manifest could not be asked for again (the origin's answer is not an MPD)"), "\(r.stderr)")
        #expect(origin.requests("/s/v/1.m4s").isEmpty)
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == "\"m1\"")
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
        // Answering again: the run completes it.
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd(width: 320), etag: "\"m1\"", contentType: Self.dashXML))
        r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    /// A SegmentBase file of `fill`'s bytes: ftyp (0-23), a sidx of two 2 s subsegments of
    /// `size` bytes (24-79), then their moof boxes.
    static func segmentBaseFile(fill: UInt8, size: Int) -> Data {
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var sidx = be32(56) + Array("sidx".utf8) + be32(0) + be32(1) + be32(1000) + be32(0) + be32(0) + [0, 0, 0, 2]
        for _ in 0..<2 { sidx += be32(UInt32(size)) + be32(2000) + be32(0x9000_0000) }
        var file = DASHHostileOriginTests.box("ftyp", 24, fill: fill)
        file.append(Data(sidx))
        for n in 0..<2 { file.append(DASHHostileOriginTests.box("moof", size, fill: fill &+ UInt8(n + 1))) }
        return file
    }

    /// Probe D9: the file behind a SegmentBase changes at the origin, its MPD does not: the
    /// ranges of the cached (old) sidx are never cut from the new file; the next run plans
    /// from the new sidx.
    @Test
    func aSegmentBaseFileChangedUnderAnUnchangedMPDFailsTheItemAndTheNextRunPlansAgain() throws {
        let origin = try TestOrigin()
        origin.setResource("/sb/v.mp4", .init(body: Self.segmentBaseFile(fill: 1, size: 300), etag: "\"v1\"", contentType: "video/mp4"))
        let mpd = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S">
          <Period><AdaptationSet contentType="video" mimeType="video/mp4">
            <Representation id="v" bandwidth="100000" width="320" height="180"><BaseURL>v.mp4</BaseURL>
              <SegmentBase indexRange="24-79"><Initialization range="0-23"/></SegmentBase></Representation>
          </AdaptationSet></Period>
        </MPD>
        """
        origin.setResource("/sb/manifest.mpd", .init(body: Data(mpd.utf8), etag: "\"m1\"", contentType: Self.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/sb/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = Self.segmentBaseFile(fill: 9, size: 400)
        origin.setResource("/sb/v.mp4", .init(body: new, etag: "\"v2\"", contentType: "video/mp4"))
        let r = try VCacheBinary.run(["prefetch", "--seconds", "4", url], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("changed on the origin during this run (its validators changed (ETag \"v1\" -> \"v2\", length 680 -> 880)): the byte ranges planned for it came from the old version, so none was cut from the new one; its cached bytes were dropped: run the prefetch again"), "\(r.stderr)")
        let again = try VCacheBinary.run(["prefetch", "--seconds", "4", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        let e = try #require(try CacheInspector(directory: cache).entry(origin.url("/sb/v.mp4")))
        #expect(e.length == 880 && e.isComplete)
        let store = try CacheStore(directory: cache, readOnly: true)
        #expect(store.cachedBytes(of: e, at: 0, count: 880).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(new))
    }
}
