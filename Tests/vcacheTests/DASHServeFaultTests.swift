import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// An MPD through `serve` from an origin that misbehaves (the DASH serve probe's findings): the
/// player never gets an MPD unrewritten, and nothing half-made or error-shaped is kept.
@Suite struct DASHServeFaultTests {
    let dir = TempDirectory("vcache-dashservefault")
    static let dashXML = DASHHostileOriginTests.dashXML
    static let mpd = DASHHostileOriginTests.mpd(video: "v/")

    /// Whether `body` is the MPD rewritten for `serve`: its BaseURL on the proxy.
    static func isRewritten(_ body: Data, serve: ServeProcess) -> Bool {
        String(decoding: body, as: UTF8.self).contains("<BaseURL>\(serve.base)/d/")
    }

    /// F6: an MPD URL answered later with an HTML page or an MP4 (200): never the cached MPD as
    /// it was; the cached copy stays for offline.
    @Test
    func anMPDURLLaterAnsweredWithAnotherKindIsNeverTheCachedMPDUnrewritten() throws {
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let url = serve.url(origin.url("/s/manifest.mpd"))
        let good = try Curl.fetch([url], in: dir)
        #expect(good.status == 200 && Self.isRewritten(good.body, serve: serve))
        for (body, type) in [(Data("<html>maintenance</html>".utf8), "text/html"), (DASHHostileOriginTests.box("ftyp", 24), "video/mp4")] {
            origin.setResource("/s/manifest.mpd", .init(body: body, contentType: type))
            let got = try Curl.fetch([url], in: dir)
            #expect(got.body != Self.mpd, "\(type): the cached MPD went out unrewritten")
            #expect(got.status == 502, "\(type): \(got.status)")
        }
        _ = serve.stop()
        let store = try CacheStore(directory: cache, readOnly: true)
        let e = try #require(try store.catalog.entry(key: CacheKeyRules().key(for: origin.url("/s/manifest.mpd"))))
        #expect(store.cachedBytes(of: e).map { Data($0) } == Self.mpd, "the good copy was not kept")
    }

    /// F7: a once-good MPD answered broken (not well-formed) is 502 and leaves the good copy.
    @Test
    func aBrokenMPDKeepsTheGoodCopyCachedBeforeIt() throws {
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let url = serve.url(origin.url("/s/manifest.mpd"))
        #expect(try Curl.fetch([url], in: dir).status == 200)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd.prefix(Self.mpd.count - 40), contentType: Self.dashXML))
        #expect(try Curl.fetch([url], in: dir).status == 502)
        _ = serve.stop()
        let store = try CacheStore(directory: cache, readOnly: true)
        let e = try #require(try store.catalog.entry(key: CacheKeyRules().key(for: origin.url("/s/manifest.mpd"))), "the good copy was evicted")
        #expect(store.cachedBytes(of: e).map { Data($0) } == Self.mpd)
    }

    /// F9: an MPD nothing of which fits under the cap is still answered rewritten, as
    /// application/dash+xml, never the origin's bytes raw.
    @Test
    func anMPDThatCannotBeStoredIsStillAnsweredRewritten() throws {
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        let serve = try ServeProcess(cacheDir: dir.file("cache"), logDir: dir, arguments: ["--max-size", "300"])
        let got = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        _ = serve.stop()
        #expect(got.body != Self.mpd, "the MPD went out raw")
        #expect(got.status == 200 && got.headers["content-type"] == "application/dash+xml" && Self.isRewritten(got.body, serve: serve), "\(got.status) \(got.headers)")
    }

    /// F4: a 0- or 1-byte 200 for a DASH segment is no segment: 502 and not kept, through serve
    /// and through prefetch.
    @Test
    func anEmptyOrOneByteSegmentIsRefused() throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        origin.setResource("/s/v/0.m4s", .init(body: Data(), contentType: "video/mp4"))
        origin.setResource("/s/v/1.m4s", .init(body: Data("<".utf8), contentType: "video/mp4"))
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir).status == 200)
        let folder = serve.base + "/d/" + ProxyURLCoding.encode(origin.url("/s/")) + "/"
        for name in ["v/0.m4s", "v/1.m4s"] {
            let got = try Curl.fetch([folder + name], in: dir)
            #expect(got.status == 502, "\(name): \(got.status), \(got.body.count) bytes")
        }
        #expect(try Curl.fetch([folder + "a/0.m4s"], in: dir).status == 200)
        _ = serve.stop()
        let inspector = try CacheInspector(directory: cache)
        for name in ["0.m4s", "1.m4s"] {
            #expect(try inspector.entry(origin.url("/s/v/" + name))?.isComplete != true, "\(name) kept complete")
        }
        let prefetched = try VCacheBinary.run(["prefetch", origin.url("/s/manifest.mpd")], cacheDir: dir.file("p"))
        #expect(prefetched.status != 0, "\(prefetched.stderr)")
        #expect(prefetched.stderr.contains("is empty (0 bytes)"), "\(prefetched.stderr)")
        let p = try CacheInspector(directory: dir.file("p"))
        for name in ["0.m4s", "1.m4s"] {
            #expect(try p.entry(origin.url("/s/v/" + name))?.isComplete != true, "prefetch kept \(name) complete")
        }
    }

    /// F4's gaps: a 0- to 7-byte body for a DASH segment or init sent with no Content-Length
    /// (chunked, or ended by the connection's close) is refused as one with a Content-Length is:
    /// 502 through serve, a failed item in prefetch, never kept complete.
    @Test(arguments: [false, true])
    func aShortSegmentWithNoLengthIsRefused(closeDelimited: Bool) throws {
        let origin = try TestOrigin()
        DASHHostileOriginTests.serveSegments(origin, "/s/v/", seed: 10)
        DASHHostileOriginTests.serveSegments(origin, "/s/a/", seed: 20)
        let short = ["v/init.mp4": Data(), "v/0.m4s": Data("<ht".utf8), "v/1.m4s": Data("\0\0\0\u{8}moo".utf8)]
        var faults = TestOrigin.Faults()
        faults.chunkedWithoutLength = !closeDelimited
        faults.closeDelimited = closeDelimited
        for (name, body) in short {
            origin.setResource("/s/" + name, .init(body: body, contentType: "video/mp4"))
            origin.setFaults("/s/" + name, faults)
        }
        origin.setFaults("/s/a/0.m4s", faults)
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir).status == 200)
        let folder = serve.base + "/d/" + ProxyURLCoding.encode(origin.url("/s/")) + "/"
        for name in short.keys.sorted() {
            let got = try Curl.fetch([folder + name], in: dir)
            #expect(got.status == 502, "\(name): \(got.status), \(got.body.count) bytes")
        }
        // A whole segment sent the same way still plays.
        #expect(try Curl.fetch([folder + "a/0.m4s"], in: dir).status == 200)
        _ = serve.stop()
        let inspector = try CacheInspector(directory: cache)
        for name in short.keys {
            #expect(try inspector.entry(origin.url("/s/" + name))?.isComplete != true, "serve kept \(name) complete")
        }
        let prefetched = try VCacheBinary.run(["prefetch", origin.url("/s/manifest.mpd")], cacheDir: dir.file("p"))
        #expect(prefetched.status != 0, "\(prefetched.stderr)")
        #expect(prefetched.stderr.contains("segment is empty (0 bytes)"), "\(prefetched.stderr)")
        #expect(prefetched.stderr.contains("its first bytes '<ht'"), "\(prefetched.stderr)")
        let p = try CacheInspector(directory: dir.file("p"))
        for name in short.keys {
            #expect(try p.entry(origin.url("/s/" + name))?.isComplete != true, "prefetch kept \(name) complete")
        }
        #expect(try p.entry(origin.url("/s/a/0.m4s"))?.isComplete == true)
    }

    /// F3: an MPD sent with no Content-Length, ended by the connection's close, is answered
    /// rewritten and kept whole (its XML says where it ends), not refused and kept in part.
    @Test
    func aCloseDelimitedMPDIsAnsweredAndKeptWhole() throws {
        let origin = try TestOrigin()
        origin.setResource("/s/manifest.mpd", .init(body: Self.mpd, contentType: Self.dashXML))
        var faults = TestOrigin.Faults()
        faults.closeDelimited = true
        origin.setFaults("/s/manifest.mpd", faults)
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let got = try Curl.fetch([serve.url(origin.url("/s/manifest.mpd"))], in: dir)
        _ = serve.stop()
        #expect(got.status == 200 && Self.isRewritten(got.body, serve: serve), "\(got.status)")
        let e = try CacheInspector(directory: cache).entry(origin.url("/s/manifest.mpd"))
        #expect(e == nil || e?.sha256 == TestBytes.sha256(Self.mpd), "a partial entry was kept: \(String(describing: e))")
    }
}
