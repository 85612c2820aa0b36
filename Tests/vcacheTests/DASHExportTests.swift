import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A warmed DASH stream: `info` lists its Representations and what of each is cached, `verify`
/// checks every member, and `export STREAM DIR` writes a folder whose manifest.mpd ffmpeg plays
/// from disk with the origin stopped: every frame of what was warmed, nothing from the network.
@Suite struct DASHExportTests {
    let dir = TempDirectory("vcache-dashexport")

    func origin() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        return nginx
    }

    /// Frames ffmpeg decodes of `map` (DASH-NOTES: count framecrc lines; the exit status lies).
    static func frames(_ mpd: String, _ map: String) throws -> Int {
        let r = try Tool.run("/usr/bin/ffmpeg", ["-v", "quiet", "-i", mpd, "-map", map, "-f", "framecrc", "-"])
        return String(decoding: r.out, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("0,") }.count
    }

    @Test(.requires(.nginx, .dashTools))
    func everyKindExportsAFolderFFmpegPlaysOffline() throws {
        let nginx = try origin()
        var exported: [(String, String)] = []
        for stream in ["num", "tl", "list", "sb", "multi"] {
            let cache = dir.file("cache-\(stream)")
            let url = nginx.url("/\(stream)/manifest.mpd")
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            let verify = try VCacheBinary.run(["verify", url], cacheDir: cache)
            #expect(verify.status == 0 && verify.stdout.contains(" 0 with problems"), "\(stream): \(verify.stdout) \(verify.stderr)")
            let out = dir.file("out-\(stream)")
            let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
            #expect(r.status == 0, "\(stream): \(r.stderr)")
            #expect(r.stdout.hasPrefix("exported \(out)/manifest.mpd"), "\(r.stdout)")
            let text = try String(contentsOfFile: out + "/manifest.mpd", encoding: .utf8)
            #expect(!text.replacingOccurrences(of: "<!-- exported by vcache from \(url) -->", with: "").contains("http"), "\(text)")
            exported.append((stream, out))
        }
        nginx.stop()
        for (stream, out) in exported {
            // 6 s at 25 fps; the audio plays too (never video without audio).
            #expect(try Self.frames(out + "/manifest.mpd", "0:v:0") == 150, "\(stream)")
            #expect(try Self.frames(out + "/manifest.mpd", "0:a:0") > 270, "\(stream)")
        }
    }

    @Test(.requires(.nginx, .dashTools))
    func aPartlyWarmedStreamExportsWhatPlaysAndSaysWhatIsLeftOut() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/multi/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "3", url], cacheDir: cache).status == 0)
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        #expect(info.status == 0)
        #expect(info.stdout.contains("variant        Period 1, 300 kbit/s, 320x180, id 0; 2/3 segments, 4.0 of 6.0 s"), "\(info.stdout)")
        #expect(info.stdout.contains("audio          Period 1, 64 kbit/s, fra, id 3; not cached"), "\(info.stdout)")
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        // Counted over what the run chose (video id 0, the eng audio), not the fra audio nor the 90p.
        #expect(ls.stdout.contains("(DASH, 2 variants (1 cached), 2 renditions, 4/7 segments, 4.0 of 6.0 s, 7 entries)"), "\(ls.stdout)")
        let out = dir.file("out")
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("left out Representation '1' (video) of \(url): it does not play from the cache"), "\(r.stderr)")
        #expect(r.stderr.contains("left out Representation '3' (audio) of \(url): it does not play from the cache"), "\(r.stderr)")
        nginx.stop()
        // Two video segments: 4 s, 100 frames.
        #expect(try Self.frames(out + "/manifest.mpd", "0:v:0") == 100)
        #expect(try Self.frames(out + "/manifest.mpd", "0:a:0") > 180)
    }

    /// A folder below the export folder that is a symlink (planted by another user who may write
    /// the export folder) is refused: no segment is written through it, with or without --force.
    /// The export folder itself may be reached through a symlink (it is the user's).
    @Test(.requires(.nginx, .dashTools))
    func aSymlinkedFolderInsideTheExportFolderIsRefused() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/num/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out"), victim = dir.file("victim")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: out + "/r1", withDestinationPath: victim)
        for force in [false, true] {
            let r = try VCacheBinary.run(["export", url, out] + (force ? ["--force"] : []), cacheDir: cache)
            #expect(r.status == 1, "\(r.stderr)")
            #expect(r.stderr == "vcache: cannot export to '\(out)': '\(out)/r1' is a symbolic link: vcache writes no file through one inside an export folder; remove it, or export into another folder\n", "\(r.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: victim).isEmpty)
        }
        // Through a symlink to the export folder itself: exported.
        let linked = dir.file("linked")
        try FileManager.default.removeItem(atPath: out + "/r1")
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: out)
        let r = try VCacheBinary.run(["export", url, linked], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: out + "/manifest.mpd"))
    }

    /// A member whose cached bytes no longer match their SHA-256: the export fails with exit 5
    /// and leaves nothing of itself (it used to say "nothing was written" and leave the files it
    /// had written, so the retry after `verify --fix` needed --force: probe D4).
    @Test(.requires(.nginx, .dashTools))
    func aFailedExportLeavesNothingAndTheRetryNeedsNoForce() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/tl/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let member = nginx.url("/tl/chunk-stream0-00003.m4s")
        let key = SHA256Digest.hash(member)
        let data = "\(cache)/entries/\(key.prefix(2))/\(key)/data"  // CacheStore.dataPath
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: data))
        try file.seek(toOffset: 500)
        let old = try file.read(upToCount: 1)![0]
        try file.seek(toOffset: 500)
        try file.write(contentsOf: [old ^ 0xFF])
        try file.close()
        let out = dir.file("out")
        let failed = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(failed.status == 5, "\(failed.stderr)")
        #expect(failed.stderr.contains("do not match their SHA-256; nothing was written"), "\(failed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out), "\((try? FileManager.default.subpathsOfDirectory(atPath: out)) ?? [])")
        #expect(try VCacheBinary.run(["verify", "--fix"], cacheDir: cache).status != 5)
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let retry = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(retry.status == 0, "\(retry.stderr)")
    }
}

/// All or nothing, and timing kept (probe item 5, findings D8, M4, M6, M7).
extension DASHExportTests {
    /// Each file under `folder` (relative path) with its SHA-256; hidden ones too.
    static func tree(_ folder: String) -> [String: String] {
        var out: [String: String] = [:]
        for name in FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? [] {
            var isDir: ObjCBool = false
            let path = folder + "/" + name
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue { out[name] = "folder"; continue }
            out[name] = TestBytes.sha256(file: path) ?? "unreadable"
        }
        return out
    }

    /// Flips one byte of the cached data of `url`.
    static func corrupt(_ url: String, cache: String) throws {
        let key = SHA256Digest.hash(url)
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: "\(cache)/entries/\(key.prefix(2))/\(key)/data"))  // CacheStore.dataPath
        try file.seek(toOffset: 500)
        let old = try file.read(upToCount: 1)![0]
        try file.seek(toOffset: 500)
        try file.write(contentsOf: [old ^ 0xFF])
        try file.close()
    }

    /// `export --force` over an earlier export (and a file of the user's) meets a member whose
    /// bytes do not match: exit 5, "nothing was written", and every file of the folder keeps its
    /// bytes (the files before the bad member were replaced, those after kept: a mixed folder).
    @Test(.requires(.nginx, .dashTools))
    func aFailedForcedExportLeavesTheFolderAsItWas() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/tl/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let out = dir.file("out")
        #expect(try VCacheBinary.run(["export", url, out], cacheDir: cache).status == 0)
        // The earlier export differs from what this one would write, and the user keeps a file there.
        for name in ["manifest.mpd", "r1/init.m4s", "r1/1.m4s", "r1/3.m4s"] {
            let h = try FileHandle(forWritingTo: URL(fileURLWithPath: out + "/" + name))
            try h.seekToEnd()
            try h.write(contentsOf: Data("old".utf8))
            try h.close()
        }
        try Data("mine".utf8).write(to: URL(fileURLWithPath: out + "/notes.txt"))
        let before = Self.tree(out)
        try Self.corrupt(nginx.url("/tl/chunk-stream0-00002.m4s"), cache: cache)
        let r = try VCacheBinary.run(["export", "--force", url, out], cacheDir: cache)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr == "vcache: cannot export to '\(out)': the cached bytes of \(nginx.url("/tl/chunk-stream0-00002.m4s")) do not match their SHA-256; nothing was written; run 'vcache verify --fix'\n", "\(r.stderr)")
        #expect(Self.tree(out) == before)
    }

    /// The big-endian time of the first `tfdt` box in `file`, and its version.
    static func tfdt(_ file: String) throws -> Int64 {
        let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let type = Array("tfdt".utf8)
        var found: Int?
        for at in 4..<max(4, b.count - 16) where Array(b[at..<(at + 4)]) == type {
            found = at
            break
        }
        let i = try #require(found, "no tfdt in \(file)")
        let n = b[i + 4] == 1 ? 8 : 4
        return b[(i + 8)..<(i + 8 + n)].reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }

    /// A video AdaptationSet over the `tl` fixture's segments from number `start`: a SegmentTimeline
    /// of `r` + 1 two-second segments from `t`, with `pto` as its presentationTimeOffset.
    static func rep(_ start: Int, _ pto: Int, _ t: Int, _ r: Int) -> String {
        """
        <AdaptationSet contentType="video" mimeType="video/mp4"><Representation id="0" bandwidth="300000" codecs="avc1.42c00d" width="320" height="180">
        <SegmentTemplate timescale="12800" initialization="init-stream0.m4s" media="chunk-stream0-$Number%05d$.m4s" startNumber="\(start)" presentationTimeOffset="\(pto)"><SegmentTimeline><S t="\(t)" d="25600" r="\(r)"/></SegmentTimeline></SegmentTemplate>
        </Representation></AdaptationSet>
        """
    }

    /// A static MPD in `h/` over the `tl` fixture, lasting `duration`, of `periods`.
    static func mpd(_ duration: String, _ periods: String) -> Data {
        Data("""
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" profiles="urn:mpeg:dash:profile:isoff-live:2011" minBufferTime="PT2S" mediaPresentationDuration="\(duration)"><BaseURL>../tl/</BaseURL>
        \(periods)</MPD>
        """.utf8)
    }

    /// The `tl` fixture's 6 s in two Periods: 0-2 s (segment 1) and 2-6 s (segments 2 and 3,
    /// presentationTimeOffset 2 s: S@t is the media's own time).
    static let twoPeriods = mpd("PT6S", "<Period start=\"PT0S\" duration=\"PT2S\">\(rep(1, 0, 0, 0))</Period><Period start=\"PT2S\" duration=\"PT4S\">\(rep(2, 25600, 25600, 1))</Period>")

    /// An ended live stream (presentationTimeOffset, S@t at 2 s) and a second Period (its own
    /// offset): the exported MPD places each segment where its tfdt says, per ISO/IEC 23009-1
    /// (Period start + (S@t - @presentationTimeOffset) / @timescale; S@t / @timescale = tfdt /
    /// the media's 12800). It wrote S@t from 0 with no offset, so players put the media late.
    /// ls counts every Period, a Representation repeated in two Periods once.
    @Test(.requires(.nginx, .dashTools))
    func exportedTimingMatchesTheMediaAndLsCountsEveryPeriod() throws {
        let nginx = try origin()
        try FileManager.default.createDirectory(atPath: nginx.root + "/h", withIntermediateDirectories: true)
        let two = try nginx.publish("h/twoper.mpd", Self.twoPeriods)
        let live = try nginx.publish("h/pto.mpd", Self.mpd("PT4S", "<Period start=\"PT0S\">\(Self.rep(2, 25600, 25600, 1))</Period>"))
        for (url, segments) in [(two, 3), (live, 2)] {
            let cache = dir.file("cache-\(segments)")
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            let out = dir.file("out-\(segments)")
            let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
            #expect(r.status == 0, "\(r.stderr)")
            let text = try String(contentsOfFile: out + "/manifest.mpd", encoding: .utf8)
            var checked = 0
            for period in text.components(separatedBy: "<Period ").dropFirst() {
                func attr(_ name: String) -> String? {
                    guard let r = period.range(of: " \(name)=\"") else { return nil }
                    return String(period[r.upperBound...].prefix { $0 != "\"" })
                }
                let start = Double(try #require(attr("start")).dropFirst(2).dropLast()) ?? -1
                let ts = Double(try #require(attr("timescale"))) ?? 0
                let pto = Double(attr("presentationTimeOffset") ?? "0") ?? -1
                let folder = try #require(attr("media")).components(separatedBy: "/")[0]
                let times = period.components(separatedBy: "<S t=\"").dropFirst().map { Double($0.prefix { $0 != "\"" }) ?? -1 }
                for (k, t) in times.enumerated() {
                    let media = Double(try Self.tfdt("\(out)/\(folder)/\(k + 1).m4s")) / 12800
                    #expect(t / ts == media, "\(url) \(folder)/\(k + 1): S@t \(t) at \(ts), tfdt \(media) s\n\(text)")
                    // It plays where the origin's MPD put it: segment n (from 0) at 2n s.
                    #expect(abs(start + (t - pto) / ts - Double(2 * checked)) < 0.001, "\(url) \(folder)/\(k + 1)\n\(text)")
                    checked += 1
                }
            }
            #expect(checked == segments, "\(text)")
        }
        let cache = dir.file("cache-part")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "3", two], cacheDir: cache).status == 0)
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.stdout.contains("66  just now   \(two) (DASH, 1 variant (1 cached), 2/3 segments, 4.0 of 6.0 s, 4 entries)"), "\(ls.stdout)")
        #expect(try VCacheBinary.run(["prefetch", "-q", two], cacheDir: cache).status == 0)
        let info = try VCacheBinary.run(["info", two], cacheDir: cache)
        #expect(info.stdout.contains("plays offline  6.0 of 6.0 s"), "\(info.stdout)")
        #expect(info.stdout.contains("variant        Periods 1, 2, 300 kbit/s, 320x180, id 0; 3/3 segments, 6.0 of 6.0 s"), "\(info.stdout)")
    }

    /// `ls` counts what the stream chose: complete is 100% with --variant all (the audio not chosen
    /// is no part of it), and a failed audio init makes its segments count as not playing (they
    /// did count as cached: "partial, 7/7 segments, 6.0 of 6.0 s").
    @Test(.requires(.nginx, .dashTools))
    func lsCountsTheChosenRepresentationsAndWhatPlays() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let multi = nginx.url("/multi/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--variant", "all", multi], cacheDir: cache).status == 0)
        var ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.stdout.contains("complete") && ls.stdout.contains("-  100  just now   \(multi) (DASH, 2 variants (2 cached), 2 renditions, 10/10 segments, 6.0 of 6.0 s, "), "\(ls.stdout)")
        // The audio init gone from the origin: prefetch fails (exit 4), and ls says what plays.
        try FileManager.default.copyItem(atPath: nginx.root + "/tl", toPath: nginx.root + "/noinit")
        try FileManager.default.removeItem(atPath: nginx.root + "/noinit/init-stream1.m4s")
        let url = nginx.url("/noinit/manifest.mpd")
        let cache2 = dir.file("cache2")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache2).status == 4)
        ls = try VCacheBinary.run(["ls"], cacheDir: cache2)
        #expect(ls.stdout.contains("partial") && ls.stdout.contains("  42  just now   \(url) (DASH, 1 variant (1 cached), 1 rendition, 3/7 segments, 0.0 of 6.0 s, "), "\(ls.stdout)")
    }

    /// A SegmentBase stream cached with --seconds: export says the file is exported only whole,
    /// not that its init and first segment are missing (they are cached).
    @Test(.requires(.nginx, .dashTools))
    func aSegmentBaseFileCachedInPartIsRefusedForWhatItIs() throws {
        let nginx = try origin()
        let cache = dir.file("cache")
        let url = nginx.url("/sb/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        let out = dir.file("out")
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 1)
        #expect(r.stderr == "vcache: cannot export to '\(out)': \(url) does not play from the cache: its video is a single file per Representation (SegmentBase) cached only in part, and export writes such a file whole; run 'vcache prefetch \(url)' to complete it\n", "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}
