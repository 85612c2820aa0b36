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
        #expect(r.status == 1)
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
}
