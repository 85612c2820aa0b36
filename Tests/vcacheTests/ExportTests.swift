import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Export's checks, end to end: never a byte that does not verify, never a file it did not hash.
@Suite struct ExportTests {
    let dir = TempDirectory("vcache-export")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    func cached(_ origin: TestOrigin, _ path: String, _ body: Data) throws -> (url: String, data: String) {
        origin.setResource(path, .init(body: body, etag: "\"x\""))
        let url = origin.url(path)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let inspector = try CacheInspector(directory: cache)
        return (url, inspector.store.dataPath(try #require(try inspector.entry(url)).key))
    }

    @Test(arguments: [false, true])
    func aFlippedByteIsRefusedAndNothingIsLeftAtTheDestination(link: Bool) throws {
        let origin = try TestOrigin()
        let (url, data) = try cached(origin, "/f.mp4", TestBytes.make(300_000, seed: 61))
        let fh = try #require(FileHandle(forUpdatingAtPath: data))
        try fh.seek(toOffset: 123_456)
        let b = try #require(try fh.read(upToCount: 1)).first!
        try fh.seek(toOffset: 123_456)
        try fh.write(contentsOf: Data([b ^ 1]))
        try fh.close()
        let out = dir.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let r = try vcache(["export", url, out + "/f.mp4"] + (link ? ["--link"] : []))
        #expect(r.status == 5)  // damaged bytes: fix this machine (verify --fix)
        #expect(r.stderr == "vcache: cannot export to '\(out)/f.mp4': the cached bytes of \(url) do not match their SHA-256; nothing was written; run 'vcache verify --fix'\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)  // no temp file either
    }

    @Test func aFolderReachedThroughASymlinkIsWrittenInto() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(200_000, seed: 62)
        let (url, _) = try cached(origin, "/s.mp4", body)
        try FileManager.default.createDirectory(atPath: dir.file("real"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir.file("linkdir"), withDestinationPath: dir.file("real"))
        for args in [["export", url, dir.file("linkdir")], ["export", url, dir.file("linkdir"), "--force"]] {
            let r = try vcache(args)
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect((FileSystem.status(dir.file("linkdir"))?.st_mode ?? 0) & S_IFMT == S_IFLNK)  // the symlink itself is untouched
        #expect(TestBytes.sha256(file: dir.file("real/s.mp4")) == TestBytes.sha256(body))
    }

    func run(_ tool: String, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        let r = try Tool.run(tool, args)
        return (r.status, String(decoding: r.out, as: UTF8.self), r.err)
    }

    @Test func faststartPutsTheMoovFirstAndTheMediaIsUntouched() throws {
        let nginx = try Nginx()
        let source = Fixtures.path("moov-at-end.mp4")
        let url = try nginx.publish("end.mp4", try Fixtures.data("moov-at-end.mp4"))
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let out = dir.file("fast.mp4")
        let r = try vcache(["export", url, out, "--faststart"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "exported \(out) (289 KiB, moov moved to the front)\n")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: out))
        let walker = MP4Walker(bytes: [UInt8](bytes))
        #expect(try walker.topLevel().map(\.type) == ["ftyp", "free", "moov", "mdat"])
        let decode = try run("/usr/bin/ffmpeg", ["-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.err.isEmpty, "\(decode.err)")
        let md5 = { (file: String) in try self.run("/usr/bin/ffmpeg", ["-v", "error", "-i", file, "-map", "0", "-c", "copy", "-f", "framemd5", "-"]).out }
        #expect(try md5(out) == md5(source))
        #expect(try !md5(out).isEmpty)

        // Already fast start: exported as it is, and said so; --link cannot rewrite.
        let front = try nginx.publish("front.mp4", try Fixtures.data("moov-at-front.mp4"))
        #expect(try vcache(["prefetch", "-q", front]).status == 0)
        let same = try vcache(["export", front, dir.file("same.mp4"), "--faststart"])
        #expect(same.stdout == "exported \(dir.file("same.mp4")) (289 KiB, moov already in front)\n")
        #expect(TestBytes.sha256(file: dir.file("same.mp4")) == TestBytes.sha256(try Fixtures.data("moov-at-front.mp4")))
        let both = try vcache(["export", front, dir.file("x.mp4"), "--faststart", "--link"])
        #expect(both.status == 2)
        #expect(both.stderr == "vcache: --link and --faststart exclude each other: a rewritten file cannot share the cache's inode\n")
    }
}
