import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Export under disk faults: a full destination, and a `data` that cannot be read (EIO injected
/// with strace). Each is one line naming the cause and exit 5 (fix this machine), as its JSON
/// `failed` event says; the destination folder is left as it was (no file, no temp file).
@Suite struct ExportFaultTests {
    let dir = TempDirectory("vcache-export-faults")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    func cached(_ origin: TestOrigin, _ path: String, _ body: Data) throws -> String {
        origin.setResource(path, .init(body: body, etag: "\"x\""))
        let url = origin.url(path)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        return url
    }

    @Test(.requires(.tmpfsMount))
    func aFullDestinationExits5AndLeavesNothing() throws {
        let disk = try SmallDisk(size: "1m", in: dir)
        defer { disk.unmount() }
        let origin = try TestOrigin()
        let url = try cached(origin, "/full.mp4", TestBytes.make(3 << 20, seed: 71))
        let dest = disk.path + "/full.mp4"
        let r = try vcache(["export", url, dest])
        #expect(r.status == 5, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("vcache: cannot export to '\(dest)': ") && lines[0].hasSuffix("No space left on device"), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path).isEmpty)
        let json = try vcache(["export", "--json", url, dest])
        #expect(json.status == 5)
        #expect(json.stdout.contains("\"kind\":\"disk_full\"") && json.stdout.contains("\"exit_code\":5,\"exported\":0,\"failed\":1"), "\(json.stdout)")
    }

    @Test(.requires(.strace), arguments: ["file", "-"])
    func anUnreadableDataExits5AndWritesNothing(dest: String) throws {
        let origin = try TestOrigin()
        let url = try cached(origin, "/eio.mp4", TestBytes.make(3 << 20, seed: 72))
        let inspector = try CacheInspector(directory: cache)
        let data = inspector.store.dataPath(try #require(try inspector.entry(url)).key)
        let out = dir.file("out-\(dest == "-" ? "stdout" : "file")")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let target = dest == "-" ? "-" : out + "/eio.mp4"
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null",
                                              "-e", "trace=pread64", "-e", "inject=pread64:error=EIO:when=2", "-P", data,
                                              VCacheBinary.path, "export", url, target])
        #expect(r.status == 5, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.hasPrefix("vcache: ") }
        #expect(lines.count == 1 && lines[0] == "vcache: cannot export to '\(target)': cannot read '\(data)': Input/output error", "\(r.err)")
        #expect(r.out.isEmpty)  // checked before the first byte goes out
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }

    /// The destination folder's fsync failing (EIO) after the rename: the export's name may not
    /// survive a power cut, so it is no success: one line, exit 5 (it was ignored, exit 0). The
    /// file itself is whole. For a stream export the same: its folders are synced before and after
    /// the master is written.
    @Test(.requires(.strace))
    func aDestinationFolderThatCannotSyncExits5() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(1 << 20, seed: 73)
        let url = try cached(origin, "/sync.mp4", body)
        let out = dir.file("out-sync")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let target = out + "/sync.mp4"
        let r = try Tool.run("/usr/bin/env", ["VCACHE_DIR=\(cache)", FaultInjectionTests.strace, "-f", "-qq", "-o", "/dev/null",
                                              "-e", "trace=fsync", "-e", "inject=fsync:error=EIO", "-P", out,
                                              VCacheBinary.path, "export", url, target])
        #expect(r.status == 5, "\(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.hasPrefix("vcache: ") }
        #expect(lines.count == 1 && lines[0].hasPrefix("vcache: cannot export to '\(target)': ") && lines[0].hasSuffix("'\(out)': Input/output error"), "\(r.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == body)
    }
}
