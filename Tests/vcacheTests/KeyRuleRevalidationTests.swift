import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Hostile probe h2, F1 and F3: a partly cached stream whose manifest the origin answers in other
/// bytes that name the same entries (a signed-URL CDN's token, rotated on every answer, which
/// `--key-strip-param` strips; an MPD's attributes written in another order) is completed from
/// what is cached: the members stay, the new copy (the URLs that answer now) replaces the old.
@Suite struct KeyRuleRevalidationTests {
    let dir = TempDirectory("vcache-keyreval")

    /// Every file of `folder` but its manifest, served under `prefix`, answering only `query`.
    static func serveFiles(_ origin: TestOrigin, _ folder: String, _ prefix: String, manifest: String, query: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        var faults = TestOrigin.Faults()
        faults.requiredQuery = query
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name != manifest && !name.hasSuffix(".m3u8") {
            let body = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
            files[prefix + name] = body
            origin.setResource(prefix + name, .init(body: body, etag: "\"\(name)\"", contentType: "video/mp4"))
            origin.setFaults(prefix + name, faults)
        }
        return files
    }

    /// ffmpeg's `num` MPD with `?token=T` on its SegmentTemplate's URLs.
    static func signedMPD(_ mpd: String, _ token: String) -> Data {
        Data(mpd.replacing(".m4s\"", with: ".m4s?token=\(token)\"").utf8)
    }

    static func requestCounts(_ origin: TestOrigin, _ paths: some Sequence<String>) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: paths.map { ($0, origin.requests($0).count) })
    }

    @Test(.requires(.dashTools))
    func aDASHStreamWhoseTokensRotateIsCompletedFromWhatIsCached() throws {
        let streams = dir.file("streams")
        try Fixtures.makeDASHStreams(into: streams)
        let mpd = try String(contentsOfFile: streams + "/num/manifest.mpd", encoding: .utf8)
        #expect(mpd.contains(".m4s\""))
        let origin = try TestOrigin()
        let files = try Self.serveFiles(origin, streams + "/num", "/n/", manifest: "manifest.mpd", query: "token=aaa")
        origin.setResource("/n/manifest.mpd", .init(body: Self.signedMPD(mpd, "aaa"), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/n/manifest.mpd")
        let first = try VCacheBinary.run(["prefetch", "--seconds", "2", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(first.status == 0, "\(first.stderr)")
        // The CDN signs anew: the old token is refused, the MPD names the new one (a new ETag).
        _ = try Self.serveFiles(origin, streams + "/num", "/n/", manifest: "manifest.mpd", query: "token=bbb")
        origin.setResource("/n/manifest.mpd", .init(body: Self.signedMPD(mpd, "bbb"), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        let before = Self.requestCounts(origin, files.keys)
        let r = try VCacheBinary.run(["prefetch", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("its manifest changed"), "\(r.stderr)")
        // What the first run cached is not asked again; the rest is, with the new token.
        let after = Self.requestCounts(origin, files.keys)
        for p in ["/n/init-stream0.m4s", "/n/init-stream1.m4s", "/n/chunk-stream0-00001.m4s", "/n/chunk-stream1-00001.m4s"] {
            #expect(after[p] == before[p], "\(p) asked again")
        }
        #expect(origin.queries("/n/chunk-stream0-00003.m4s") == ["token=bbb"])
        // Every member cached is the origin's (ffmpeg writes one audio chunk more than the MPD names).
        let digests = try DASHRevalidationTests.cachedDigests(cache, origin, Array(files.keys))
        #expect(digests.count >= files.count - 1 && digests == files.filter { digests[$0.key] != nil }.mapValues { TestBytes.sha256($0) })
        let check = try VCacheBinary.run(["check", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        // The MPD cached is the one that answers now.
        let store = try CacheStore(directory: cache, readOnly: true)
        let e = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(store.cachedBytes(of: e, at: 0, count: try #require(e.length)).map { Data($0) } == Self.signedMPD(mpd, "bbb"))
    }

    /// F3: no validators, and an MPD whose attributes come in another order on every answer.
    @Test(.requires(.dashTools))
    func aDASHMPDReSerialisedInAnotherAttributeOrderKeepsWhatIsCached() throws {
        let streams = dir.file("streams")
        try Fixtures.makeDASHStreams(into: streams)
        let mpd = try String(contentsOfFile: streams + "/num/manifest.mpd", encoding: .utf8)
        let origin = try TestOrigin()
        let files = try Self.serveFiles(origin, streams + "/num", "/n/", manifest: "manifest.mpd", query: "")
        for p in files.keys { origin.setFaults(p, TestOrigin.Faults()) }
        origin.setResource("/n/manifest.mpd", .init(body: Data(mpd.utf8), contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/n/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        // The same MPD, its SegmentTemplate's attributes in reverse order.
        let reordered = mpd.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard let open = line.firstRange(of: "<SegmentTemplate ") else { return String(line) }
            let body = line[open.upperBound...].dropLast(line.hasSuffix("/>") ? 2 : 1)
            let attributes = body.split(separator: "\" ").map { $0.hasSuffix("\"") ? String($0) : $0 + "\"" }
            return line[..<open.upperBound] + attributes.reversed().joined(separator: " ") + (line.hasSuffix("/>") ? "/>" : ">")
        }.joined(separator: "\n")
        #expect(reordered != mpd)
        #expect(try MPD.parse(Array(reordered.utf8), url: url) == MPD.parse(Array(mpd.utf8), url: url))
        origin.setResource("/n/manifest.mpd", .init(body: Data(reordered.utf8), contentType: DASHRevalidationTests.dashXML))
        let before = Self.requestCounts(origin, files.keys)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("its manifest changed"), "\(r.stderr)")
        let after = Self.requestCounts(origin, files.keys)
        for p in ["/n/init-stream0.m4s", "/n/chunk-stream0-00001.m4s"] { #expect(after[p] == before[p], "\(p) asked again") }
        let digests = try DASHRevalidationTests.cachedDigests(cache, origin, Array(files.keys))
        #expect(digests.count >= files.count - 1 && digests == files.filter { digests[$0.key] != nil }.mapValues { TestBytes.sha256($0) })
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
    }

    @Test(.requires(.streamTools))
    func anHLSStreamWhoseTokensRotateIsCompletedFromWhatIsCached() throws {
        let streams = dir.file("streams")
        try Fixtures.makeStreams(into: streams)
        let playlist = try String(contentsOfFile: streams + "/fmp4/index.m3u8", encoding: .utf8)
        func signed(_ token: String) -> Data {
            Data(playlist.replacing(".m4s\n", with: ".m4s?token=\(token)\n").replacing("init.mp4\"", with: "init.mp4?token=\(token)\"").utf8)
        }
        #expect(signed("a") != Data(playlist.utf8))
        let origin = try TestOrigin()
        let files = try Self.serveFiles(origin, streams + "/fmp4", "/h/", manifest: "index.m3u8", query: "token=aaa")
        origin.setResource("/h/index.m3u8", .init(body: signed("aaa"), etag: "\"p1\"", contentType: "application/vnd.apple.mpegurl"))
        let cache = dir.file("c")
        let url = origin.url("/h/index.m3u8")
        let first = try VCacheBinary.run(["prefetch", "--seconds", "2", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(first.status == 0, "\(first.stderr)")
        _ = try Self.serveFiles(origin, streams + "/fmp4", "/h/", manifest: "index.m3u8", query: "token=bbb")
        origin.setResource("/h/index.m3u8", .init(body: signed("bbb"), etag: "\"p2\"", contentType: "application/vnd.apple.mpegurl"))
        let before = Self.requestCounts(origin, files.keys)
        let r = try VCacheBinary.run(["prefetch", "--key-strip-param", "token", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("its manifest changed"), "\(r.stderr)")
        let after = Self.requestCounts(origin, files.keys)
        for p in ["/h/init.mp4", "/h/seg_000.m4s"] { #expect(after[p] == before[p], "\(p) asked again") }
        #expect(origin.queries("/h/seg_001.m4s").last == "token=bbb")
        #expect(try DASHRevalidationTests.cachedDigests(cache, origin, Array(files.keys)) == files.mapValues { TestBytes.sha256($0) })
    }

    /// F14: a master that only gains a variant keeps the variants whose media playlists are
    /// unchanged (the complete one included); only what changed or is no longer named goes.
    @Test(.requires(.streamTools))
    func anHLSMasterThatGainsAVariantKeepsTheUnchangedVariants() throws {
        let streams = dir.file("streams")
        try Fixtures.makeStreams(into: streams)
        let origin = try TestOrigin()
        let root = streams + "/abr"
        var files: [String: Data] = [:]
        for sub in try FileManager.default.subpathsOfDirectory(atPath: root) {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + sub, isDirectory: &isDir), !isDir.boolValue else { continue }
            let body = try Data(contentsOf: URL(fileURLWithPath: root + "/" + sub))
            files["/abr/" + sub] = body
            origin.setResource("/abr/" + sub, .init(body: body, etag: "\"\(sub)\"", contentType: sub.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "video/mp4"))
        }
        let master = try #require(files["/abr/master.m3u8"])
        let url = origin.url("/abr/master.m3u8")
        let cache = dir.file("c")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", "--seconds", "2", url], cacheDir: cache).status == 0)
        let cached = files.keys.filter { (try? CacheInspector(directory: cache).entry(origin.url($0)))??.isComplete == true }
        #expect(cached.contains("/abr/180p/seg_001.m4s") && cached.contains("/abr/90p/seg_000.m4s") && !cached.contains("/abr/90p/seg_001.m4s"))
        // The master gains a variant (another name): a new ETag, new bytes.
        var grown = master
        grown.append(Data("#EXT-X-STREAM-INF:BANDWIDTH=99000000,RESOLUTION=160x90,AUDIO=\"aud\"\n90p/index.m3u8?v=low\n".utf8))
        origin.setResource("/abr/master.m3u8", .init(body: grown, etag: "\"master-2\"", contentType: "application/vnd.apple.mpegurl"))
        let before = Self.requestCounts(origin, files.keys)
        let r = try VCacheBinary.run(["prefetch", "--variant", "worst", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let after = Self.requestCounts(origin, files.keys)
        // Nothing cached was fetched again: the media playlists were asked for (conditionally), not the segments.
        for p in cached where !p.hasSuffix(".m3u8") { #expect(after[p] == before[p], "\(p) fetched again") }
        #expect(after["/abr/90p/seg_001.m4s"] == (before["/abr/90p/seg_001.m4s"] ?? 0) + 1)
        #expect(try DASHRevalidationTests.cachedDigests(cache, origin, Array(files.keys)).filter { !$0.key.hasSuffix("master.m3u8") }
                == files.filter { !$0.key.hasSuffix("master.m3u8") }.mapValues { TestBytes.sha256($0) })
    }
}
