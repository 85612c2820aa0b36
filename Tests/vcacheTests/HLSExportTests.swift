import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `export STREAM DIR` writes a folder that plays from disk and never reaches the network: what
/// the cache does not hold (a rendition never warmed) is left out, said, and not named; AES-128
/// streams decode from the exported key.
@Suite struct HLSExportTests {
    let dir = TempDirectory("vcache-hlsexport")

    /// The fixture streams on a TestOrigin under /o/, the ABR master given a French audio
    /// rendition and a subtitles group that the default prefetch does not fetch.
    func origin() throws -> TestOrigin {
        let made = dir.file("streams")
        try Fixtures.makeStreams(into: made)
        let origin = try TestOrigin()
        for name in FileManager.default.enumerator(atPath: made)?.allObjects as? [String] ?? [] where name.contains(".") {
            let body = try Data(contentsOf: URL(fileURLWithPath: made + "/" + name))
            origin.setResource("/o/" + name, .init(body: body, contentType: name.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "application/octet-stream"))
            if name.hasPrefix("abr/audio/") { origin.setResource("/o/abr/audio-fr/" + name.dropFirst("abr/audio/".count), .init(body: body)) }
        }
        var master = try String(contentsOfFile: made + "/abr/master.m3u8", encoding: .utf8)
        master = master.replacingOccurrences(of: "URI=\"audio/index.m3u8\"\n", with: """
            URI="audio/index.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="group_aud",NAME="fr",DEFAULT=NO,LANGUAGE="fr",URI="audio-fr/index.m3u8"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="en",DEFAULT=NO,AUTOSELECT=NO,LANGUAGE="en",URI="subs/index.m3u8"

            """).replacingOccurrences(of: "AUDIO=\"group_aud\"", with: "AUDIO=\"group_aud\",SUBTITLES=\"subs\"")
        origin.setResource("/o/abr/master.m3u8", .init(body: Data(master.utf8), contentType: "application/vnd.apple.mpegurl"))
        return origin
    }

    @Test(.requires(.streamTools))
    func renditionsNotCachedAreLeftOutOfTheExportAndSaidSo() throws {
        let origin = try origin()
        let url = origin.url("/o/abr/master.m3u8")
        let cache = dir.file("cache")
        let warm = try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache)
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(origin.requests("/o/abr/audio-fr/index.m3u8").isEmpty)
        let out = dir.file("out")
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        for left in ["audio-fr/index.m3u8", "subs/index.m3u8"] {
            #expect(r.stderr.contains("left out \(origin.url("/o/abr/" + left)): it does not play from the cache"), "\(r.stderr)")
        }
        let master = try String(contentsOfFile: out + "/master.m3u8", encoding: .utf8)
        #expect(!master.contains("http") && !master.contains("audio-fr") && !master.contains("subs"), "\(master)")
        // The best variant (the default), its audio group kept, the subtitles group it named gone.
        #expect(master.components(separatedBy: "#EXT-X-STREAM-INF").count == 2 && master.contains("AUDIO=\"group_aud\"\n180p/index.m3u8"), "\(master)")
        // Played from disk with the origin gone.
        origin.stop()
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", out + "/master.m3u8", "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
    }

    /// A signal while a stream's playlist is written (fsynced, not yet renamed) leaves no temp
    /// file in the folder, as for one video (before: `index.m3u8.vcache-PID` stayed, visible).
    @Test(.requires(.streamTools), arguments: [SIGINT, SIGTERM])
    func aSignalWhileAPlaylistIsWrittenLeavesNoTempFile(signal: Int32) throws {
        let origin = try origin()
        let url = origin.url("/o/ts/index.m3u8")
        let cache = dir.file("cache-sig-\(signal)")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out-sig-\(signal)")
        let pause = PausePoint("stream-export-writing", in: dir)
        let running = try VCacheBinary.start(["export", url, out], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(signal)
        let r = running.finish()
        #expect(r.signalled, "exit \(r.status) \(r.stderr)")
        try? FileManager.default.removeItem(atPath: pause.prefix + ".reached")
        let left = (FileManager.default.enumerator(atPath: out)?.allObjects as? [String] ?? []).filter { $0.contains(".vcache-") }
        #expect(left.isEmpty, "\(left)")
    }

    /// A signal caught while the export goes on writing: the handler removes the hidden folder
    /// and ends the process, and the export's own thread, which failed on what the handler
    /// removed, says nothing and makes nothing more. Before: it printed `cannot export to 'DIR':
    /// cannot rename 'DIR/index2.ts': No such file or directory`, and a file it made while the
    /// handler removed the folder left `DIR/.vcache-export-PID-N/` behind.
    @Test(.requires(.streamTools), arguments: [SIGINT, SIGTERM])
    func aSignalCaughtWhileTheExportGoesOnLeavesNothingAndSaysNothingMore(signal: Int32) throws {
        let origin = try origin()
        let url = origin.url("/o/ts/index.m3u8")
        let cache = dir.file("cache-caught-\(signal)")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out-caught-\(signal)")
        let writing = PausePoint("stream-export-writing", in: dir)
        let caught = PausePoint("export-signal-caught", in: dir)
        let refused = PausePoint("export-refused-after-signal", in: dir)
        defer { caught.release(); writing.release(); refused.release() }
        let running = try VCacheBinary.start(["export", url, out], cacheDir: cache,
                                             environment: PausePoint.environment([writing, caught, refused]))
        #expect(writing.waitUntilReached())
        running.kill(signal)
        // The handler has marked the export stopped and removed nothing yet; the export's thread,
        // let go, goes on to its next file or its commit, and is refused there.
        #expect(caught.waitUntilReached())
        writing.release()
        #expect(refused.waitUntilReached())
        refused.release()
        caught.release()
        let r = running.finish()
        #expect(r.signalled, "exit \(r.status) \(r.stderr)")
        #expect(!r.stderr.contains("cannot export"), "\(r.stderr)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    /// Offline, serve's master lists only renditions that play, as it lists only such variants.
    /// The export folder's fsync failing (EIO): its names may not survive a power cut, so the
    /// export is no success: one line naming the folder, exit 5 (the folders were never synced).
    @Test(.requires(.strace, .streamTools))
    func aStreamExportWhoseFolderCannotSyncExits5() throws {
        let origin = try origin()
        let url = origin.url("/o/abr/master.m3u8")
        let cache = dir.file("cache-sync")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out-sync")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null",
                                              "-e", "trace=fsync", "-e", "inject=fsync:error=EIO", "-P", out,
                                              VCacheBinary.path, "export", url, out])
        #expect(r.status == 5, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.hasPrefix("vcache: ") }
        #expect(lines.count == 1 && lines[0].hasSuffix("'\(out)': Input/output error"), "\(r.err)")
    }

    @Test(.requires(.streamTools))
    func anOfflineMasterThroughServeListsOnlyRenditionsThatPlay() throws {
        let origin = try origin()
        let url = origin.url("/o/abr/master.m3u8")
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        origin.stop()
        let refused = RefusingPort(origin.port)
        defer { withExtendedLifetime(refused) {} }
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let master = String(decoding: try Curl.fetch([serve.url(url)], in: dir).body, as: UTF8.self)
        #expect(master.contains("NAME=\"audio_2\"") && !master.contains("NAME=\"fr\"") && !master.contains("subs"), "\(master)")
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(url), "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
        serve.stop()
    }

    /// An AES-128 stream exports with its key beside its segments, named relatively, and ffmpeg
    /// decodes it from disk (it reads a local key only with -allowed_extensions ALL).
    @Test(.requires(.streamTools))
    func anAES128StreamExportsAndDecodesFromDisk() throws {
        let origin = try origin()
        let url = origin.url("/o/aes/index.m3u8")
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("aes")
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        origin.stop()
        let text = try String(contentsOfFile: out + "/master.m3u8", encoding: .utf8)
        #expect(text.contains("URI=\"enc.key\"") && !text.contains("http"), "\(text)")
        #expect(FileManager.default.contents(atPath: out + "/enc.key") == FileManager.default.contents(atPath: dir.file("streams/aes/enc.key")))
        let mode = (try FileManager.default.attributesOfItem(atPath: out + "/enc.key")[.posixPermissions] as? Int) ?? 0
        #expect(mode == 0o600, "\(String(mode, radix: 8))")
        let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-allowed_extensions", "ALL", "-i", out + "/master.m3u8", "-f", "null", "-"])
        #expect(play.status == 0 && play.err.isEmpty, "\(play.err)")
        // Decoded, it is the stream the origin's copy decodes to.
        func frames(_ input: String, _ extra: [String] = []) throws -> String {
            String(decoding: try Tool.run("/usr/bin/ffmpeg", ["-v", "error"] + extra + ["-i", input, "-map", "0:v", "-f", "framemd5", "-"]).out, as: UTF8.self)
        }
        let exported = try frames(out + "/master.m3u8", ["-allowed_extensions", "ALL"])
        let original = try frames(dir.file("streams/aes/index.m3u8"), ["-allowed_extensions", "ALL"])
        #expect(!exported.isEmpty && exported == original)
    }
    /// `export --force` over an earlier export meets a segment whose cached bytes do not match:
    /// exit 5, "nothing was written", and the folder is as it was, byte for byte (the files
    /// before the bad segment used to be replaced already).
    @Test(.requires(.streamTools))
    func aFailedForcedExportLeavesTheFolderAsItWas() throws {
        let origin = try origin()
        let url = origin.url("/o/ts/index.m3u8")
        let cache = dir.file("cache-force")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out-force")
        #expect(try VCacheBinary.run(["export", url, out], cacheDir: cache).status == 0)
        for name in try FileManager.default.contentsOfDirectory(atPath: out) {
            let h = try FileHandle(forWritingTo: URL(fileURLWithPath: out + "/" + name))
            try h.seekToEnd()
            try h.write(contentsOf: Data("old".utf8))
            try h.close()
        }
        try Data("mine".utf8).write(to: URL(fileURLWithPath: out + "/notes.txt"))
        let before = DASHExportTests.tree(out)
        let playlist = try String(contentsOfFile: dir.file("streams/ts/index.m3u8"), encoding: .utf8)
        let last = try #require(playlist.split(separator: "\n").last { !$0.hasPrefix("#") && !$0.isEmpty })
        let bad = origin.url("/o/ts/" + last)
        try DASHExportTests.corrupt(bad, cache: cache)
        let r = try VCacheBinary.run(["export", "--force", url, out], cacheDir: cache)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr == "vcache: cannot export to '\(out)': the cached bytes of \(bad) do not match their SHA-256; nothing was written; run 'vcache verify --fix'\n", "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == before)
    }
}
