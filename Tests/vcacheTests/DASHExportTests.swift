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
        #expect(ls.stdout.contains("(DASH, 2 variants (1 cached), 2 renditions, 4/14 segments, 4.0 of 6.0 s, 7 entries)"), "\(ls.stdout)")
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
