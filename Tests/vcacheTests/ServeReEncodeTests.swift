import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `serve` completing a partly cached stream after the origin re-encoded it in place (hostile
/// probe h3, "Not covered yet"): a player reading through serve gets only the new encode's bytes,
/// and the cache never holds members of two manifest versions. Served by TestOrigin.
@Suite struct ServeReEncodeTests {
    let dir = TempDirectory("vcache-servereencode")
    static let dashPaths = ["v/init.mp4", "v/0.m4s", "v/1.m4s", "a/init.mp4", "a/0.m4s", "a/1.m4s"]

    /// The rewritten MPD's proxied BaseURL (`…/d/<folder>/`).
    static func baseURL(_ mpd: Data) throws -> String {
        let text = String(decoding: mpd, as: UTF8.self)
        let open = try #require(text.range(of: "<BaseURL>")), close = try #require(text.range(of: "</BaseURL>"))
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// Every member of the DASH stream through serve: SHA-256 by origin path, with each status.
    func playDASH(_ serve: ServeProcess, _ url: String) throws -> [String: String] {
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200, "MPD: \(mpd.status)")
        let base = try Self.baseURL(mpd.body)
        var got: [String: String] = [:]
        for p in Self.dashPaths {
            let r = try Curl.fetch([base + p], in: dir)
            #expect(r.status == 200, "\(p): \(r.status)")
            got["/s/" + p] = TestBytes.sha256(r.body)
        }
        return got
    }

    /// Every cached member that holds bytes, SHA-256 of what is held, by origin path (partial ones too).
    static func cachedDASH(_ cache: String, _ origin: TestOrigin) throws -> [String: String] {
        let store = try CacheStore(directory: cache, readOnly: true)
        var out: [String: String] = [:]
        for p in dashPaths {
            guard let e = try CacheInspector(directory: cache).entry(origin.url("/s/" + p)), let n = e.length, e.isComplete,
                  let bytes = store.cachedBytes(of: e, at: 0, count: n) else { continue }
            out["/s/" + p] = TestBytes.sha256(Data(bytes))
        }
        return out
    }

    static func cachedMPD(_ cache: String, _ url: String) throws -> Data? {
        let store = try CacheStore(directory: cache, readOnly: true)
        guard let e = try CacheInspector(directory: cache).entry(url) else { return nil }
        return store.cachedMPD(e).map { Data($0.bytes) }
    }

    /// Encode 1 and its MPD, its first 2 s cached by prefetch; then the origin re-encodes in
    /// place (encode 7, a new MPD). Returns the new encode's bytes and the old.
    func reEncodedAfterPartialPrefetch() throws -> (origin: TestOrigin, old: [String: Data], new: [String: Data], cache: String, url: String) {
        let origin = try TestOrigin()
        let old = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        let warmed = try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        #expect(try Self.cachedDASH(cache, origin).count == 4)
        let new = DASHRevalidationTests.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 640), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        return (origin, old, new, cache, url)
    }

    @Test
    func aDASHStreamReEncodedAfterAPartialPrefetchIsServedAndCachedFromTheNewMPDOnly() throws {
        let (origin, _, new, cache, url) = try reEncodedAfterPartialPrefetch()
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let played = try playDASH(serve, url)
        // The members it stored from the origin confirmed (`ServeMemberConfirmTests`): until then
        // the stream is marked unconfirmed.
        #expect(serve.logLines(within: 10) { $0.contains("the members confirmed") }.count >= 1, "\(serve.log)")
        _ = serve.stop()
        let want = new.mapValues { TestBytes.sha256($0) }
        #expect(played == want, "a player read the old encode's bytes under the new MPD")
        // The new MPD over the new members only: every member cached, each the new encode's.
        #expect(try Self.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 640))
        #expect(try Self.cachedDASH(cache, origin) == want)
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete")
        // A prefetch now finds it complete: it asks for nothing.
        let before = origin.requests("/s/manifest.mpd").count
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0 && origin.requests("/s/manifest.mpd").count == before, "\(r.stderr)")
    }

    /// A player: ffmpeg's own DASH stream (320x180), its first 2 s prefetched, then encoded
    /// again in place at 640x360 under the same names; ffmpeg reading through serve decodes
    /// every frame of the new encode exactly as from its files, and the cache holds that encode.
    @Test(.requires(.dashTools))
    func ffmpegPlaysEveryFrameOfTheNewEncodeThroughServe() throws {
        func encode(_ name: String, size: String) throws -> String {
            let folder = dir.file("encode-" + name)
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let r = try Tool.run("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25",
                                                     "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "6", "-map", "0:v", "-map", "1:a",
                                                     "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0",
                                                     "-b:v", "300k", "-c:a", "aac", "-b:a", "64k", "-f", "dash", "-seg_duration", "2",
                                                     "-use_template", "1", "-use_timeline", "0", folder + "/manifest.mpd"])
            #expect(r.status == 0, "\(r.err)")
            return folder
        }
        let origin = try TestOrigin()
        func publish(_ folder: String, _ tag: String) throws -> [String: Data] {
            var out: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
                out[name] = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
                origin.setResource("/n/" + name, .init(body: out[name]!, etag: "\"\(tag)-\(name)\"",
                                                       contentType: name.hasSuffix(".mpd") ? DASHRevalidationTests.dashXML : "video/mp4"))
            }
            return out
        }
        let old = try encode("old", size: "320x180"), new = try encode("new", size: "640x360")
        _ = try publish(old, "old")
        let cache = dir.file("c"), url = origin.url("/n/manifest.mpd")
        let warmed = try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        let files = try publish(new, "new")
        func frames(_ input: String) throws -> (String, String) {
            let r = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", input, "-map", "0:v", "-f", "framemd5", "-"])
            return (String(decoding: r.out, as: UTF8.self), r.err)
        }
        let (want, _) = try frames(new + "/manifest.mpd")
        #expect(want.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == 150)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let (played, errors) = try frames(serve.url(url))
        _ = serve.stop()
        #expect(played == want, "ffmpeg through serve decoded other frames than the new encode's: \(errors)")
        let store = try CacheStore(directory: cache, readOnly: true)
        for (name, body) in files where !name.hasSuffix(".mpd") {
            guard let e = try CacheInspector(directory: cache).entry(origin.url("/n/" + name)), let n = e.length, e.isComplete else { continue }
            #expect(store.cachedBytes(of: e, at: 0, count: n).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(body), "\(name): the old encode's bytes")
        }
    }

    /// A prefetch holding the stream (here: the test holds its lock): serve answers the new MPD
    /// and its segments from the origin and stores none of it; the old MPD and its members stay
    /// as they were. Once the lock is free, the next answer of the MPD takes the new version.
    @Test
    func aDASHStreamHeldByAnotherProcessIsPassedThroughAndNothingOfTheNewVersionIsStored() throws {
        let (origin, old, new, cache, url) = try reEncodedAfterPartialPrefetch()
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let want = new.mapValues { TestBytes.sha256($0) }
        #expect(try playDASH(serve, url) == want, "a player read the old encode's bytes under the new MPD")
        let passed = serve.logLines(within: 5) { $0.contains("passed through, not stored") }
        #expect(passed.count == 6, "\(serve.log)")
        // Nothing of the new version stored: the old MPD over the old members it named.
        #expect(try Self.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 320))
        let oldCached = try Self.cachedDASH(cache, origin)
        #expect(oldCached == old.filter { !$0.key.hasSuffix("/1.m4s") }.mapValues { TestBytes.sha256($0) })
        store.releaseStreamLock(lock, root: root)
        #expect(try playDASH(serve, url) == want)
        _ = serve.stop()
        #expect(try Self.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 640))
        #expect(try Self.cachedDASH(cache, origin) == want)
    }

    /// Pass-through outlives the serve that saw the new version (hostile probe h9d, F3): a
    /// prefetch holds the stream (here the test holds its lock), serve answers the new MPD and
    /// marks the stream's root `manifest-unconfirmed`; serve restarts; the player holding the new
    /// MPD asks for members without asking the MPD again. The new serve, finding the root marked
    /// and no answer of the MPD of its own, asks the MPD first: members are passed through (the
    /// new encode), never the cached old encode's bytes; nothing of the new version is stored.
    @Test
    func aRestartedServePassesThroughTheMembersOfAStreamItFindsMarked() throws {
        let (origin, old, new, cache, url) = try reEncodedAfterPartialPrefetch()
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let first = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([first.url(url)], in: dir)
        #expect(mpd.status == 200)
        let folder = String(try Self.baseURL(mpd.body).dropFirst(first.base.count))
        _ = first.stop()
        let asked = origin.requests("/s/manifest.mpd").count
        let second = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = second.stop() }
        for p in ["v/0.m4s", "a/0.m4s", "v/1.m4s"] {
            let r = try Curl.fetch([second.base + folder + p], in: dir)
            #expect(r.status == 200, "\(p): \(r.status)")
            #expect(TestBytes.sha256(r.body) == TestBytes.sha256(new["/s/" + p]!), "\(p): the old encode's bytes under the new MPD")
        }
        // One question of the MPD, then the members passed through.
        #expect(origin.requests("/s/manifest.mpd").count == asked + 1)
        #expect(second.logLines(within: 5) { $0.contains("its manifest asked before a member is answered from the cache") }.count == 1, "\(second.log)")
        #expect(second.logLines(within: 5) { $0.contains("passed through, not stored") }.count == 3, "\(second.log)")
        // Nothing of the new version stored: the old MPD over the old members it named.
        #expect(try Self.cachedMPD(cache, url) == DASHRevalidationTests.mpd(width: 320))
        #expect(try Self.cachedDASH(cache, origin) == old.filter { !$0.key.hasSuffix("/1.m4s") }.mapValues { TestBytes.sha256($0) })
    }

    /// HLS, a prefetch holding the stream: the new master and its media playlist are answered,
    /// the segments passed through; the old master and the segment cached from it stay as they
    /// were, nothing of the new encode stored.
    @Test
    func anHLSStreamHeldByAnotherProcessIsPassedThroughAndNothingOfTheNewVersionIsStored() throws {
        let origin = try TestOrigin()
        let old = HLSRevalidationTests.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = HLSRevalidationTests.encode(origin, seed: 50, resolution: "640x360")
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try playHLS(serve, url) == (0..<4).map { TestBytes.sha256(new["/h/\($0).ts"]!) }, "a player read the old encode's bytes under the new playlists")
        #expect(serve.logLines(within: 5) { $0.contains("passed through, not stored") }.count == 4, "\(serve.log)")
        _ = serve.stop()
        let inspector = try CacheInspector(directory: cache)
        let m = try #require(try inspector.entry(url))
        #expect(store.cachedBytes(of: m).map { String(decoding: $0, as: UTF8.self).contains("320x180") } == true, "the new master was stored")
        let first = try #require(try inspector.entry(origin.url("/h/0.ts")))
        #expect(store.cachedBytes(of: first, at: 0, count: try #require(first.length)).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(old["/h/0.ts"]!))
        for n in 1..<4 { #expect(try inspector.entry(origin.url("/h/\(n).ts"))?.ranges.isEmpty ?? true, "\(n).ts stored") }
    }

    /// HLS alike (h9d F3): serve restarted while a prefetch holds the master's stream, the player
    /// asking segments of the new media playlist it holds: the new serve asks that playlist
    /// first (the master's stream is marked) and passes the new encode through, never the
    /// cached old segment.
    @Test
    func aRestartedServePassesThroughTheSegmentsOfAnHLSStreamItFindsMarked() throws {
        let origin = try TestOrigin()
        let old = HLSRevalidationTests.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = HLSRevalidationTests.encode(origin, seed: 50, resolution: "640x360")
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let first = try ServeProcess(cacheDir: cache, logDir: dir)
        let master = try Curl.fetch([first.url(url)], in: dir)
        let variant = try #require(String(decoding: master.body, as: UTF8.self).split(separator: "\n").first { !$0.hasPrefix("#") })
        let media = try Curl.fetch([String(variant)], in: dir)
        let uris = String(decoding: media.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(uris.count == 4)
        _ = first.stop()
        let second = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = second.stop() }
        let played = try uris.map { u in
            let r = try Curl.fetch([second.base + String(u.dropFirst(first.base.count))], in: dir)
            #expect(r.status == 200, "\(u): \(r.status)")
            return TestBytes.sha256(r.body)
        }
        #expect(played == (0..<4).map { TestBytes.sha256(new["/h/\($0).ts"]!) }, "the old encode's bytes under the new playlist")
        #expect(second.logLines(within: 5) { $0.contains("passed through, not stored") }.count == 4, "\(second.log)")
        let inspector = try CacheInspector(directory: cache)
        let cached = try #require(try inspector.entry(origin.url("/h/0.ts")))
        #expect(store.cachedBytes(of: cached, at: 0, count: try #require(cached.length)).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(old["/h/0.ts"]!))
    }

    /// A VOD media playlist given alone, re-encoded in place (new durations and bytes) while a
    /// prefetch holds it: its segments are passed through; once the lock is free the next answer
    /// takes the new version, the old segment dropped first.
    @Test
    func aMediaPlaylistHeldByAnotherProcessIsPassedThroughThenTakenOnceFree() throws {
        let origin = try TestOrigin()
        func encode(_ seed: UInt64, duration: String) -> [Data] {
            var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:3\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            var out: [Data] = []
            for n in 0..<4 {
                text += "#EXTINF:\(duration),\n\(n).ts\n"
                out.append(HLSHostileOriginTests.ts(20, seed: seed &+ UInt64(n)))
                origin.setResource("/p/\(n).ts", .init(body: out[n], etag: "\"\(seed)-\(n)\"", contentType: "video/mp2t"))
            }
            origin.setResource("/p/index.m3u8", .init(body: Data((text + "#EXT-X-ENDLIST\n").utf8), contentType: "application/vnd.apple.mpegurl"))
            return out
        }
        let old = encode(1, duration: "2.0")
        let cache = dir.file("c"), url = origin.url("/p/index.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = encode(50, duration: "2.5").map { TestBytes.sha256($0) }
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        func play() throws -> [String] {
            let media = try Curl.fetch([serve.url(url)], in: dir)
            #expect(media.status == 200)
            return try String(decoding: media.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map {
                let r = try Curl.fetch([String($0)], in: dir)
                #expect(r.status == 200, "\($0): \(r.status)")
                return TestBytes.sha256(r.body)
            }
        }
        #expect(try play() == new, "a player read the old encode's bytes under the new playlist")
        #expect(serve.logLines(within: 5) { $0.contains("passed through, not stored") }.count == 4, "\(serve.log)")
        let inspector = try CacheInspector(directory: cache)
        func cached(_ path: String) throws -> String? {
            guard let e = try inspector.entry(origin.url(path)), e.isComplete, let n = e.length else { return nil }
            return store.cachedBytes(of: e, at: 0, count: n).map { TestBytes.sha256(Data($0)) }
        }
        let playlist = try #require(try inspector.entry(url))
        #expect(store.cachedBytes(of: playlist).map { String(decoding: $0, as: UTF8.self).contains("#EXTINF:2.0,") } == true,
                "the new playlist was stored over the old segment")
        #expect(try cached("/p/0.ts") == TestBytes.sha256(old[0]))
        for n in 1..<4 { #expect(try cached("/p/\(n).ts") == nil, "\(n).ts stored") }
        store.releaseStreamLock(lock, root: root)
        #expect(try play() == new)
        _ = serve.stop()
        #expect(try (0..<4).map { try cached("/p/\($0).ts") } == new)
    }

    /// The master, its variant's media playlist and every segment through serve: their SHA-256s.
    func playHLS(_ serve: ServeProcess, _ url: String) throws -> [String] {
        let master = try Curl.fetch([serve.url(url)], in: dir)
        #expect(master.status == 200)
        let variant = try #require(String(decoding: master.body, as: UTF8.self).split(separator: "\n").first { !$0.hasPrefix("#") })
        let media = try Curl.fetch([String(variant)], in: dir)
        #expect(media.status == 200)
        let uris = String(decoding: media.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(uris.count == 4)
        return try uris.map { u in
            let r = try Curl.fetch([String(u)], in: dir)
            #expect(r.status == 200, "\(u): \(r.status)")
            return TestBytes.sha256(r.body)
        }
    }

    /// HLS: a master re-encoded in place (its variant's RESOLUTION changed) over a media
    /// playlist of the same text: the segments cached from the old encode are never served
    /// under it, and those cached after are the new encode's only.
    @Test
    func anHLSStreamReEncodedAfterAPartialPrefetchIsServedAndCachedFromTheNewPlaylistsOnly() throws {
        let origin = try TestOrigin()
        HLSRevalidationTests.encode(origin, seed: 1, resolution: "320x180")
        let cache = dir.file("c")
        let url = origin.url("/h/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let new = HLSRevalidationTests.encode(origin, seed: 50, resolution: "640x360")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let played = try playHLS(serve, url)
        _ = serve.stop()
        #expect(played == (0..<4).map { TestBytes.sha256(new["/h/\($0).ts"]!) }, "a player read the old encode's bytes under the new playlists")
        let store = try CacheStore(directory: cache, readOnly: true)
        for (path, body) in new {
            let e = try #require(try CacheInspector(directory: cache).entry(origin.url(path)), "\(path) not cached")
            #expect(store.cachedBytes(of: e, at: 0, count: try #require(e.length)).map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(body), "\(path)")
        }
        let m = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(store.cachedBytes(of: m).map { String(decoding: $0, as: UTF8.self).contains("640x360") } == true, "the old master stayed over the new members")
    }

    /// An MPD of two video Representations (`v`, `w`: `$RepresentationID$` in the template) and
    /// audio `a`, two 2 s segments each, the video `width` wide.
    static func twoRepresentations(width: Int) -> Data {
        Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="100000" width="\(width)" height="180" codecs="avc1.42c00d"/>
              <Representation id="w" bandwidth="300000" width="\(width * 2)" height="360" codecs="avc1.42c00d"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en">
              <SegmentTemplate initialization="a/init.mp4" media="a/$Number$.m4s" duration="2" timescale="1" startNumber="0"/>
              <Representation id="a" bandwidth="64000" codecs="mp4a.40.2"/>
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    /// One encode of `twoRepresentations` under `/r/`: each path's bytes.
    static func encodeTwo(_ origin: TestOrigin, seed: UInt8) -> [String: Data] {
        var out: [String: Data] = [:]
        for (i, r) in ["v", "w", "a"].enumerated() {
            let base = seed &+ UInt8(i * 16)
            out["/r/\(r)/init.mp4"] = DASHHostileOriginTests.box("ftyp", 24, fill: base)
            for n in 0..<2 { out["/r/\(r)/\(n).m4s"] = DASHHostileOriginTests.box("moof", 300 + Int(seed), fill: base &+ UInt8(n + 1)) }
        }
        for (path, body) in out {
            origin.setResource(path, .init(body: body, etag: "\"\(seed)-\(path)\"", contentType: path.hasSuffix(".m4s") ? "video/iso.segment" : "video/mp4"))
        }
        origin.setResource("/r/manifest.mpd", .init(body: twoRepresentations(width: 320 * Int(seed)), etag: "\"m\(seed)\"", contentType: DASHRevalidationTests.dashXML))
        return out
    }

    /// The nightly warm-up (`prefetch MPD`: one video Representation, its members recorded),
    /// then a player's ABR reads the other Representation through serve: what serve stores of
    /// it is recorded as the stream's member, so the origin's re-encode drops it with the rest
    /// (one log line says how many), and the player never gets the old encode's bytes under
    /// the new MPD (hostile probe h9c, F6, F9).
    @Test
    func segmentsOfARepresentationPrefetchDidNotChooseAreDroppedByAReEncode() throws {
        let origin = try TestOrigin()
        let old = Self.encodeTwo(origin, seed: 1)
        let cache = dir.file("c"), url = origin.url("/r/manifest.mpd")
        let warmed = try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        let store = try CacheStore(directory: cache, readOnly: true)
        func cached(_ path: String) throws -> String? {
            guard let e = try CacheInspector(directory: cache).entry(origin.url(path)), e.isComplete, let n = e.length else { return nil }
            return store.cachedBytes(of: e, at: 0, count: n).map { TestBytes.sha256(Data($0)) }
        }
        #expect(try cached("/r/v/1.m4s") == TestBytes.sha256(old["/r/v/1.m4s"]!) && cached("/r/w/0.m4s") == nil, "prefetch chose another Representation")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        func play(_ rep: String) throws -> [String] {
            let mpd = try Curl.fetch([serve.url(url)], in: dir)
            #expect(mpd.status == 200)
            let base = try Self.baseURL(mpd.body)
            return try ["init.mp4", "0.m4s", "1.m4s"].map {
                let r = try Curl.fetch([base + rep + "/" + $0], in: dir)
                #expect(r.status == 200, "\(rep)/\($0): \(r.status)")
                return TestBytes.sha256(r.body)
            }
        }
        let digests = { (e: [String: Data], rep: String) in ["init.mp4", "0.m4s", "1.m4s"].map { TestBytes.sha256(e["/r/\(rep)/\($0)"]!) } }
        #expect(try play("w") == digests(old, "w"))
        #expect(try cached("/r/w/1.m4s") == TestBytes.sha256(old["/r/w/1.m4s"]!), "serve did not store the segment")
        let new = Self.encodeTwo(origin, seed: 2)
        #expect(try play("w") == digests(new, "w"), "a player read the old encode's bytes under the new MPD")
        // v (3), a (3) from prefetch, w (3) from serve.
        let took = serve.logLines(within: 5) { $0.contains("re-encoded on the origin: the 9 entries cached from the old copy were dropped, the new copy stored") }
        #expect(took.count == 1, "\(serve.log)")
        for rep in ["v", "a"] {
            for name in ["init.mp4", "0.m4s", "1.m4s"] { #expect(try cached("/r/\(rep)/\(name)") == nil, "\(rep)/\(name) of the old encode kept") }
        }
        #expect(try ["init.mp4", "0.m4s", "1.m4s"].map { try cached("/r/w/\($0)") } == digests(new, "w"))
    }

    /// The nightly warm-up (one video Representation), then a player opens the MPD through
    /// serve, which the origin now answers stamped with the answer's time (a just-in-time
    /// packager's `publishTime`): the same encode, so nothing is dropped, and the stream stays
    /// complete to `ls` (hostile probe h9d: F13, every player's answer emptied the warmed stream;
    /// F1, recording every Representation on each answer made it partial for good, so each cron
    /// run asked for the MPD again).
    @Test
    func aServedAnswerKeepsAWarmedStreamCompleteAndAPublishTimeIsNoReEncode() throws {
        let origin = try TestOrigin()
        let old = Self.encodeTwo(origin, seed: 1)
        let cache = dir.file("c"), url = origin.url("/r/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        let stamped = String(decoding: Self.twoRepresentations(width: 320), as: UTF8.self)
            .replacingOccurrences(of: "type=\"static\"", with: "type=\"static\" publishTime=\"2026-11-29T05:00:00Z\"")
        origin.setResource("/r/manifest.mpd", .init(body: Data(stamped.utf8), etag: "\"m1-stamped\"", contentType: DASHRevalidationTests.dashXML))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        #expect(try Curl.fetch([serve.url(url)], in: dir).status == 200)
        let store = try CacheStore(directory: cache, readOnly: true)
        for rep in ["v", "a"] {
            for name in ["init.mp4", "0.m4s", "1.m4s"] {
                let e = try CacheInspector(directory: cache).entry(origin.url("/r/\(rep)/\(name)"))
                let bytes = e.flatMap { e in e.length.flatMap { store.cachedBytes(of: e, at: 0, count: $0) } }
                #expect(bytes.map { TestBytes.sha256(Data($0)) } == TestBytes.sha256(old["/r/\(rep)/\(name)"]!), "\(rep)/\(name) dropped")
            }
        }
        #expect(!serve.log.contains("re-encoded"), "\(serve.log)")
        let streams = HLSCacheTests.events(try VCacheBinary.run(["ls", "--json"], cacheDir: cache)).filter { $0["event"] as? String == "stream" }
        #expect(streams.first?["state"] as? String == "complete", "\(streams)")
        let asked = origin.requests("/r/manifest.mpd").count
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "worst", url], cacheDir: cache).status == 0)
        #expect(origin.requests("/r/manifest.mpd").count == asked, "a complete stream's MPD was asked again")
    }

    /// Pass-through (a prefetch holds the stream; here the test holds its lock): each answer
    /// carries the origin's ETag, and a player resuming the old encode's download with its
    /// ETag in If-Range gets 200 and the new encode whole, never its bytes spliced on (h9c, F7).
    /// Alike streamed (an origin that answers ranges) and fetched whole (one that does not).
    @Test(arguments: [false, true])
    func aPassedThroughMemberCarriesItsValidatorAndHonoursIfRange(originIgnoresRanges: Bool) throws {
        let (origin, _, new, cache, url) = try reEncodedAfterPartialPrefetch()
        if originIgnoresRanges { origin.setFaults("/s/v/0.m4s", { var f = TestOrigin.Faults(); f.ignoreRanges = true; return f }()) }
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let member = try Self.baseURL(mpd.body) + "v/0.m4s", body = try #require(new["/s/v/0.m4s"])
        let newTag = "\"7-\("/s/v/0.m4s".count)\"", oldTag = "\"1-\("/s/v/0.m4s".count)\""
        let whole = try Curl.fetch([member], in: dir)
        #expect(whole.status == 200 && whole.headers["etag"] == newTag, "\(whole.headers)")
        #expect(TestBytes.sha256(whole.body) == TestBytes.sha256(body))
        let resumedOld = try Curl.fetch(["-H", "Range: bytes=100-", "-H", "If-Range: \(oldTag)", member], in: dir)
        #expect(resumedOld.status == 200 && resumedOld.headers["content-range"] == nil, "a range of the new encode under the old ETag")
        #expect(TestBytes.sha256(resumedOld.body) == TestBytes.sha256(body))
        let resumedNew = try Curl.fetch(["-H", "Range: bytes=100-", "-H", "If-Range: \(newTag)", member], in: dir)
        #expect(resumedNew.status == 206 && resumedNew.headers["content-range"] == "bytes 100-\(body.count - 1)/\(body.count)")
        #expect(TestBytes.sha256(resumedNew.body) == TestBytes.sha256(body.dropFirst(100)))
        #expect(serve.logLines(within: 5) { $0.contains("passed through, not stored") }.count == 3, "\(serve.log)")
    }

    /// Pass-through from an origin whose ETag differs per answer (two nodes behind a balancer,
    /// h9d F5): the span asked under If-Range of the first bytes' ETag comes back 200 whole under
    /// the other ETag. Serve never sends a head it cannot honour (before: `200, Content-Length`,
    /// then the answer cut with no byte): the member is fetched whole, checked, and the asked
    /// span cut from it; the log says so.
    @Test
    func aPassedThroughMemberFromAnOriginWhoseETagDiffersPerAnswerIsAnsweredWhole() throws {
        let (origin, _, new, cache, url) = try reEncodedAfterPartialPrefetch()
        origin.setFaults("/s/v/0.m4s", { var f = TestOrigin.Faults(); f.rotateETags = ["\"node-a\"", "\"node-b\""]; return f }())
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let member = try Self.baseURL(mpd.body) + "v/0.m4s", body = try #require(new["/s/v/0.m4s"])
        let whole = try Curl.fetch([member], in: dir)
        #expect(whole.status == 200, "\(whole.status) \(whole.headers)")
        #expect(TestBytes.sha256(whole.body) == TestBytes.sha256(body), "\(whole.body.count) of \(body.count) bytes")
        let span = try Curl.fetch(["-H", "Range: bytes=100-199", member], in: dir)
        #expect(span.status == 206 && span.headers["content-range"] == "bytes 100-199/\(body.count)", "\(span.status) \(span.headers)")
        #expect(TestBytes.sha256(span.body) == TestBytes.sha256(body.dropFirst(100).prefix(100)))
        let lines = serve.logLines(within: 5) { $0.contains("its span was not answered as the version of its first bytes") && $0.contains("so it was fetched whole") }
        #expect(lines.count == 2, "\(serve.log)")
    }

    /// Pass-through checks a member as the normal path does before storing it: an error page
    /// answered 200 in a segment's place (as a web page, or as bytes no segment starts with)
    /// is answered 502, never passed on (h9c, F8). Alike streamed and fetched whole.
    @Test(arguments: [false, true])
    func aPassedThroughErrorPageIsAnswered502(originIgnoresRanges: Bool) throws {
        let (origin, _, _, cache, url) = try reEncodedAfterPartialPrefetch()
        let page = Data("<html><body>maintenance</body></html>".utf8)
        origin.setResource("/s/v/0.m4s", .init(body: page, etag: "\"p0\"", contentType: "text/html"))
        origin.setResource("/s/v/1.m4s", .init(body: page, etag: "\"p1\"", contentType: "application/octet-stream"))
        if originIgnoresRanges {
            var f = TestOrigin.Faults()
            f.ignoreRanges = true
            for p in ["/s/v/0.m4s", "/s/v/1.m4s", "/s/a/0.m4s"] { origin.setFaults(p, f) }
        }
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        let base = try Self.baseURL(try Curl.fetch([serve.url(url)], in: dir).body)
        #expect(try Curl.fetch([base + "v/0.m4s"], in: dir).status == 502)
        #expect(try Curl.fetch([base + "v/1.m4s"], in: dir).status == 502)
        #expect(try Curl.fetch([base + "a/0.m4s"], in: dir).status == 200)
        let refused = serve.logLines(within: 5) { $0.contains(" 502 ") && $0.contains("passed through, not stored, not passed on") }
        #expect(refused.count == 2, "\(serve.log)")
        #expect(refused.contains { $0.contains("origin answered a web page (Content-Type: text/html) for a .m4s video") })
        #expect(refused.contains { $0.contains("origin's answer for a DASH segment is not one: its first bytes '<html><body>main'") })
    }

    /// Pass-through never holds a member whole: a Range a player asks is asked of the origin as
    /// ranges (its first bytes for the checks, then the span), streamed on, so six players asking
    /// a few bytes of a large file cost a few bytes each (h9c, F2: each fetched the whole file).
    @Test
    func aPassedThroughRangeIsAskedOfTheOriginAsARange() throws {
        let (origin, _, new, cache, url) = try reEncodedAfterPartialPrefetch()
        let store = try CacheStore(directory: cache)
        let root = CacheKeyRules().key(for: url)
        let lock = try #require(try store.tryLockStream(root: root))
        defer { store.releaseStreamLock(lock, root: root) }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        defer { _ = serve.stop() }
        let base = try Self.baseURL(try Curl.fetch([serve.url(url)], in: dir).body)
        let body = try #require(new["/s/v/1.m4s"]), before = origin.requests("/s/v/1.m4s").count
        for _ in 0..<6 {
            let r = try Curl.fetch(["-r", "100-199", base + "v/1.m4s"], in: dir)
            #expect(r.status == 206 && r.headers["content-range"] == "bytes 100-199/\(body.count)")
            #expect(TestBytes.sha256(r.body) == TestBytes.sha256(body.dropFirst(100).prefix(100)))
        }
        let asked = origin.requests("/s/v/1.m4s").dropFirst(before)
        #expect(asked.count == 12 && asked.allSatisfy { $0 == "bytes=0-375" || $0 == "bytes=100-199" }, "\(asked)")
        let lines = serve.logLines(within: 5) { $0.contains("bytes=100-199 206 cache=0 origin=100 ") && $0.contains("streamed from the origin") }
        #expect(lines.count == 6, "\(serve.log)")
    }

    /// Two MPDs naming the same segment URLs, both complete; the origin re-encodes both; a player
    /// plays one through serve. Serve taking its new version drops the other's cached copy first
    /// (prefetch's rule, h9d F10): the other stream is never complete under its old MPD over the
    /// new encode's segments; its next answer through serve is the new MPD, over the new encode.
    @Test
    func takingOneMPDsReEncodeDropsTheCopyOfAnotherNamingTheSameSegments() throws {
        let origin = try TestOrigin()
        func other(_ width: Int) -> Data {
            Data(String(decoding: DASHRevalidationTests.mpd(width: width), as: UTF8.self).replacingOccurrences(of: "minBufferTime=\"PT2S\"", with: "minBufferTime=\"PT3S\"").utf8)
        }
        _ = DASHRevalidationTests.encode(origin, seed: 1)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 320), etag: "\"m1\"", contentType: DASHRevalidationTests.dashXML))
        origin.setResource("/s/other.mpd", .init(body: other(320), etag: "\"o1\"", contentType: DASHRevalidationTests.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd"), otherURL = origin.url("/s/other.mpd")
        let warmed = try VCacheBinary.run(["prefetch", "-q", url, otherURL], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        let new = DASHRevalidationTests.encode(origin, seed: 7)
        origin.setResource("/s/manifest.mpd", .init(body: DASHRevalidationTests.mpd(width: 640), etag: "\"m2\"", contentType: DASHRevalidationTests.dashXML))
        origin.setResource("/s/other.mpd", .init(body: other(640), etag: "\"o2\"", contentType: DASHRevalidationTests.dashXML))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let want = new.mapValues { TestBytes.sha256($0) }
        #expect(try playDASH(serve, url) == want)
        #expect(serve.log.contains { $0.contains("; \(otherURL) names members of its old version too: that manifest's cached copy was dropped, so it is fetched again and what it named dropped") }, "\(serve.log)")
        #expect(serve.logLines(within: 10) { $0.contains("the members confirmed") }.count >= 1, "\(serve.log)")
        #expect(try Self.cachedMPD(cache, otherURL) == nil, "the other MPD's old copy stayed over the new encode's segments")
        let check = try VCacheBinary.run(["check", otherURL], cacheDir: cache)
        #expect(check.stdout.contains("0 of 1 ready"), "\(check.stdout)")
        // Asked through serve again: its new MPD, over the new encode.
        #expect(try playDASH(serve, otherURL) == want)
        _ = serve.stop()
        #expect(try Self.cachedMPD(cache, otherURL) == other(640))
        #expect(try Self.cachedDASH(cache, origin) == want)
    }

    /// HLS: a master (unchanged byte for byte) over three media playlists, all cached; the origin
    /// re-encodes its media playlists in place; a player through serve reads the master and one
    /// variant only. Serve taking that playlist's new version marks the master's stream to be
    /// asked for again and drops every other member of it, as prefetch does (h9d F11): the other
    /// variants of the old encode never stay complete beside the new one; the next prefetch of
    /// the master completes the stream from the new encode.
    @Test
    func takingAChangedMediaPlaylistMarksItsMasterAndDropsItsOtherMembers() throws {
        let origin = try TestOrigin()
        let old = HLSMemberPlaylistTests.encodeShared(origin, seed: 1)
        let cache = dir.file("c"), master = origin.url("/s/master.m3u8")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "all", master], cacheDir: cache).status == 0)
        let new = HLSMemberPlaylistTests.encodeShared(origin, seed: 2)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let m = try Curl.fetch([serve.url(master)], in: dir)
        let b = try #require(String(decoding: m.body, as: UTF8.self).split(separator: "\n").first { $0.contains("/b.m3u8") })
        let media = try Curl.fetch([String(b)], in: dir)
        #expect(media.status == 200)
        for u in String(decoding: media.body, as: UTF8.self).split(separator: "\n") where !u.hasPrefix("#") {
            let r = try Curl.fetch([String(u)], in: dir)
            #expect(r.status == 200, "\(u): \(r.status)")
        }
        #expect(serve.log.contains { $0.contains("; it is a member of the stream of \(master): what that stream's other playlists named went too (it may be of the old encode), and its master is asked for again by the next prefetch") }, "\(serve.log)")
        _ = serve.stop()
        for (p, body) in old.segments { #expect(try HLSMemberPlaylistTests.cachedSHA(origin.url(p), cache) != TestBytes.sha256(body), "\(p): the old encode's") }
        for p in ["/s/a.m3u8", "/s/alt.m3u8"] { #expect(try HLSMemberPlaylistTests.cachedSHA(origin.url(p), cache) == nil, "\(p): the old copy stayed") }
        #expect(try CacheStore(directory: cache, readOnly: true).catalog.rootRole(CacheKeyRules().key(for: master)) == .manifestToAsk)
        let check = try VCacheBinary.run(["check", master], cacheDir: cache)
        #expect(check.stdout.contains("0 of 1 ready"), "\(check.stdout)")
        let again = try VCacheBinary.run(["prefetch", "-q", "--variant", "all", master], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        for (p, text) in new.playlists { #expect(try HLSMemberPlaylistTests.cachedSHA(origin.url(p), cache) == TestBytes.sha256(Data(text.utf8)), "\(p)") }
        for (p, body) in new.segments { #expect(try HLSMemberPlaylistTests.cachedSHA(origin.url(p), cache) == TestBytes.sha256(body), "\(p)") }
    }

    /// A warmed stream whose MPD the origin now answers differing only in its member URLs'
    /// queries (hostile probe h9d, F4): a cache-busting `?v=1` -> `?v=2` of a re-encode, or a
    /// signed-URL CDN's token new on each answer. Serve judges it as prefetch's end check does:
    /// member URLs under the key rules, so a parameter they keep makes it a re-encode (the old
    /// members dropped, the player gets the new encode, the cache holds only it) and a token
    /// they strip is the same stream (nothing dropped); no member is asked anything.
    @Test(arguments: ["version", "token under the key rules", "token without a key rule"])
    func anMPDDifferingOnlyInMemberQueriesIsJudgedUnderTheKeyRules(kind: String) throws {
        typealias R = DASHRevalidationTests
        let origin = try TestOrigin()
        _ = R.encode(origin, seed: 1)
        let reEncoded = kind != "token under the key rules"
        let (q1, q2) = kind == "version" ? ("?v=1", "?v=2") : ("?token=a1b2c3d4e5", "?token=f6a7b8c9d0")
        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320, query: q1), etag: "\"m1\"", contentType: R.dashXML))
        let cache = dir.file("c"), url = origin.url("/s/manifest.mpd")
        if !reEncoded { #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0) }
        let warmed = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(warmed.status == 0, "\(warmed.stderr)")
        let want = kind == "version" ? R.encode(origin, seed: 7) : R.encode(origin, seed: 1)
        let oldKeys = ["/s/v/init.mp4", "/s/v/0.m4s", "/s/v/1.m4s", "/s/a/init.mp4", "/s/a/0.m4s", "/s/a/1.m4s"]
        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: 320, query: q2), etag: "\"m2\"", contentType: R.dashXML))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let mpd = try Curl.fetch([serve.url(url)], in: dir)
        #expect(mpd.status == 200)
        let base = try Self.baseURL(mpd.body)
        var played: [String: String] = [:]
        for p in Self.dashPaths {
            let r = try Curl.fetch([base + p + q2], in: dir)
            #expect(r.status == 200, "\(p): \(r.status)")
            played["/s/" + p] = TestBytes.sha256(r.body)
        }
        _ = serve.stop()
        #expect(played == want.mapValues { TestBytes.sha256($0) }, "\(kind): a player read the other encode")
        // (Under the key rules an entry's key is its URL without the token.)
        let kept = try R.cachedDigests(cache, origin, oldKeys.map { $0 + (reEncoded ? q1 : "") })
        #expect(!oldKeys.contains { origin.requests($0).contains("bytes=0-0") }, "\(kind): a member was asked")
        if reEncoded {
            // A token the key rules keep is named with the rule, as prefetch's error does (h10c F1); a version is not.
            let hint = "(MPD, rewritten; re-encoded on the origin: the 6 entries cached from the old copy were dropped, the new copy stored; only the query parameter token of its member URLs differs: if the origin signs URLs anew on each answer, 'vcache config set key-strip-param token' keys them as one)"
            let plain = "(MPD, rewritten; re-encoded on the origin: the 6 entries cached from the old copy were dropped, the new copy stored)"
            #expect(serve.log.contains { $0.contains(kind == "version" ? plain : hint) }, "\(kind): \(serve.log)")
            #expect(kept.isEmpty, "\(kind): the old members stayed: \(kept.keys.sorted())")
            let got = try R.cachedDigests(cache, origin, want.keys.map { $0 + q2 })
            #expect(got == Dictionary(uniqueKeysWithValues: want.map { ($0.key + q2, TestBytes.sha256($0.value)) }))
        } else {
            #expect(!serve.log.contains { $0.contains("re-encoded") }, "\(serve.log)")
            #expect(kept == want.mapValues { TestBytes.sha256($0) }, "the warmed stream was dropped")
        }
    }

    /// HLS alike (h9d F4): a VOD media playlist answered again differing only in its segment
    /// URLs' queries is a re-encode when the key rules keep the parameter (`?v=2`), the same
    /// stream when they strip it (a token): nothing dropped then.
    @Test(arguments: [true, false])
    func aPlaylistDifferingOnlyInSegmentQueriesIsJudgedUnderTheKeyRules(reEncoded: Bool) throws {
        let origin = try TestOrigin()
        func publish(_ seed: UInt64, _ query: String) -> [Data] {
            let bodies = [HLSHostileOriginTests.ts(20, seed: seed), HLSHostileOriginTests.ts(30, seed: seed + 1)]
            for (i, b) in bodies.enumerated() { origin.setResource("/p/seg\(i).ts", .init(body: b, etag: "\"\(seed)-\(i)\"", contentType: "video/mp2t")) }
            origin.setResource("/p/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["seg0.ts" + query, "seg1.ts" + query]), etag: "\"p\(query)\"",
                                                      contentType: "application/vnd.apple.mpegurl"))
            return bodies
        }
        let old = publish(1, reEncoded ? "?v=1" : "?token=aaa")
        let cache = dir.file("c"), url = origin.url("/p/index.m3u8")
        if !reEncoded { #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0) }
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        _ = publish(reEncoded ? 9 : 1, reEncoded ? "?v=2" : "?token=bbb")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        #expect(try Curl.fetch([serve.url(url)], in: dir).status == 200)
        _ = serve.stop()
        #expect(!origin.requests("/p/seg0.ts").contains("bytes=0-0") && !origin.requests("/p/seg1.ts").contains("bytes=0-0"))
        #expect(serve.log.contains { $0.contains("re-encoded on the origin") } == reEncoded, "\(serve.log)")
        let store = try CacheStore(directory: cache, readOnly: true)
        let q = reEncoded ? "?v=1" : ""  // (under the key rule, the key of the URL without its token)
        for (i, body) in old.enumerated() {
            let e = try CacheInspector(directory: cache).entry(origin.url("/p/seg\(i).ts" + q))
            let held = e.flatMap { e in e.length.flatMap { store.cachedBytes(of: e, at: 0, count: $0) } }.map { TestBytes.sha256(Data($0)) }
            #expect(held == (reEncoded ? nil : TestBytes.sha256(body)), "seg\(i)")
        }
    }
}
