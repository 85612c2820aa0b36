import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 9 end to end: verify, export, evict, pin, info, ls.
@Suite struct ManageTests {
    let dir = TempDirectory("vcache-manage")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    /// A complete real MP4 from nginx; returns (nginx, url, body).
    func cachedVideo(_ name: String = "moov-at-end.mp4") throws -> (Nginx, String, Data) {
        let nginx = try Nginx()
        let body = try Fixtures.data(name)
        let url = try nginx.publish(name, body)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        return (nginx, url, body)
    }

    func dataPath(_ url: String) throws -> String {
        let inspector = try CacheInspector(directory: cache)
        return inspector.store.dataPath(try #require(try inspector.entry(url)).key)
    }

    @Test func verifyFindsAFlippedByteAndFixDropsItThenAllIsClean() throws {
        let (_, url, _) = try cachedVideo()
        #expect(try vcache(["verify"]).status == 0)
        let fh = try #require(FileHandle(forUpdatingAtPath: try dataPath(url)))
        try fh.seek(toOffset: 5000)
        let b = try #require(try fh.read(upToCount: 1)).first!
        try fh.seek(toOffset: 5000)
        try fh.write(contentsOf: Data([b ^ 0x40]))
        try fh.close()
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("problem  \(url)  its bytes no longer match the SHA-256 stored at completion"))
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1)
        #expect(fixed.stdout.contains("fixed  \(url)"))
        #expect(fixed.stdout.contains("dropped every cached byte"))
        let again = try vcache(["verify"])
        #expect(again.status == 0, "\(again.stdout)")
        #expect(try CacheInspector(directory: cache).entry(url)?.cachedBytes == 0)
    }

    /// Two flipped bytes in a 5.2 MiB video: verify names the two damaged 1 MiB chunks (from the
    /// digest's states kept at completion), --fix drops those two and keeps the rest, and the
    /// next prefetch fetches only them and ends byte-exact.
    @Test func verifyFixDropsOnlyTheDamagedChunks() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(5_500_000, seed: 11)
        let url = try nginx.publish("chunks.bin", body)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let fh = try #require(FileHandle(forUpdatingAtPath: try dataPath(url)))
        for offset: UInt64 in [1_600_000, 5_300_000] {
            try fh.seek(toOffset: offset)
            let b = try #require(try fh.read(upToCount: 1)).first!
            try fh.seek(toOffset: offset)
            try fh.write(contentsOf: Data([b ^ 0x01]))
        }
        try fh.close()
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("its bytes no longer match the SHA-256 stored at completion: damaged 1.0 MiB at byte 1048576, 251 KiB at byte 5242880"), "\(found.stdout)")
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1)
        #expect(fixed.stdout.contains("kept the 4.0 MiB that still hash as at completion, dropped the other 1.2 MiB"), "\(fixed.stdout)")
        #expect(try vcache(["verify"]).status == 0)
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == 5_500_000 - 1_048_576 - 257_120)
        let before = nginx.accessLog().count
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let refetched = nginx.accessLog().dropFirst(before).reduce(Int64(0)) { $0 + $1.bytes }
        #expect(refetched == 1_048_576 + 257_120)
        let e = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(e.isComplete && e.sha256 == SHA256Digest.hash(body))
    }

    /// After a partial fix, the bytes fetched again must lead to the digest the version had:
    /// damage since the fix in a kept chunk (or an origin that changed its bytes under the same
    /// validators) is caught when the video is whole again, every claim is dropped, and the next
    /// run fetches it whole and byte-exact.
    @Test func aVideoWholeAgainAfterAFixMustHashAsItDidFirst() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(5_500_000, seed: 13)
        let url = try nginx.publish("again.bin", body)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        func flip(_ offset: UInt64) throws {
            let fh = try #require(FileHandle(forUpdatingAtPath: try dataPath(url)))
            try fh.seek(toOffset: offset)
            try fh.write(contentsOf: Data([body[Int(offset)] ^ 0x01]))
            try fh.close()
        }
        try flip(1_048_581)
        #expect(try vcache(["verify", "--fix"]).status == 1)
        try flip(3_145_733)  // in a chunk the fix kept
        let again = try vcache(["prefetch", "-q", url])
        #expect(again.status == 3 && again.stderr.contains("do not hash to the SHA-256 this version had when first completed"), "\(again.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.cachedBytes == 0)
        #expect(try vcache(["verify"]).status == 0)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let out = dir.file("again.out")
        #expect(try vcache(["export", url, out]).status == 0)
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
    }

    /// A complete video cut short: what is left is kept only where the digest's states prove
    /// it. A flipped byte before the cut is not kept (the same damage may have done both), the
    /// whole chunks after it are, the chunk the cut falls in is not; the next prefetch ends
    /// byte-exact and its export equals the origin's file.
    @Test func verifyFindsATruncatedDataFileAndFixKeepsOnlyWhatTheDigestProves() throws {
        let nginx = try Nginx()
        let body = TestBytes.make(5_500_000, seed: 12)
        let url = try nginx.publish("cut.bin", body)
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let fh = try #require(FileHandle(forUpdatingAtPath: try dataPath(url)))
        try fh.seek(toOffset: 10)
        try fh.write(contentsOf: Data([body[10] ^ 0xff]))
        try fh.close()
        #expect(truncate(try dataPath(url), 3_000_000) == 0)
        let found = try vcache(["verify"])
        #expect(found.status == 1)
        #expect(found.stdout.contains("data is 3000000 bytes but the catalog claims bytes up to \(body.count)"), "\(found.stdout)")
        #expect(found.stdout.contains("no longer hashes as at completion"), "\(found.stdout)")
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed == 1_048_576)  // chunk 1 alone: chunk 0 is damaged, chunk 2 cut
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        let out = dir.file("cut.out")
        #expect(try vcache(["export", url, out]).status == 0)
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
    }

    /// A small complete video cut short has no whole chunk to prove anything: nothing is kept.
    @Test func aSmallVideoCutShortKeepsNothingUnproven() throws {
        let (_, url, body) = try cachedVideo()
        #expect(truncate(try dataPath(url), 100_000) == 0)
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        let claims = try CacheInspector(directory: cache).verifyClaims(url, origin: body)
        #expect(claims.mismatch == nil && claims.claimed == 0)
    }

    @Test func verifyFindsOverlappingRangesWrittenWithTheSQLiteCLI() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("o.mp4", TestBytes.make(400_000, seed: 3))
        #expect(try vcache(["prefetch", "-q", url, "--bytes", "100000"]).status == 0)
        let key = try #require(try CacheInspector(directory: cache).entry(url)).key
        try sqlite(cache + "/catalog.db", "INSERT INTO ranges (key, start, end) VALUES ('\(key)', 50000, 150000);")
        let found = try vcache(["verify", url])
        #expect(found.status == 1)
        #expect(found.stdout.contains("ranges overlap at byte 50000"))
        #expect(try vcache(["verify", "--fix"]).status == 1)
        #expect(try vcache(["verify"]).status == 0)
        #expect(try CacheInspector(directory: cache).store.catalog.storedRanges(key: key).count <= 1)
    }

    @Test func aCatalogOverwrittenWithGarbageIsReportedThenSetAside() throws {
        _ = try cachedVideo()
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: cache + "/catalog.db"))
        try? FileManager.default.removeItem(atPath: cache + "/catalog.db-wal")
        try? FileManager.default.removeItem(atPath: cache + "/catalog.db-shm")
        let ls = try vcache(["ls"])
        #expect(ls.status == 5)
        #expect(ls.stderr.hasPrefix("vcache: the catalog '\(cache)/catalog.db' is corrupt (file is not a database); run 'vcache verify --fix'"))
        let found = try vcache(["verify"])
        #expect(found.status == 5)
        #expect(found.stderr.contains("is corrupt"))
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1)
        #expect(fixed.stdout.contains("the catalog was corrupt (file is not a database): moved it to '\(cache)/catalog.db.corrupt-"))
        let files = try FileManager.default.contentsOfDirectory(atPath: cache)
        #expect(files.contains { $0.hasPrefix("catalog.db.corrupt-") })
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache + "/entries").isEmpty)
        #expect(try vcache(["verify"]).status == 0)
        #expect(try vcache(["ls"]).stdout.contains("is empty"))
    }

    @Test func aTruncatedCatalogIsReportedAndSetAsideNotACrash() throws {
        let origin = try TestOrigin()
        for i in 0..<40 {
            origin.setResource("/t\(i).mp4", .init(body: TestBytes.make(2000, seed: UInt64(i))))
        }
        let list = try dir.write("t.txt", Data((0..<40).map { origin.url("/t\($0).mp4") }.joined(separator: "\n").utf8))
        #expect(try vcache(["prefetch", "-q", "-i", list]).status == 0)
        #expect(try vcache(["verify"]).status == 0)  // also checkpoints the WAL into catalog.db
        let db = cache + "/catalog.db"
        try? FileManager.default.removeItem(atPath: db + "-wal")
        try? FileManager.default.removeItem(atPath: db + "-shm")
        let size = try #require(FileSystem.status(db)).st_size
        #expect(truncate(db, size / 2) == 0)
        let found = try vcache(["verify"])
        #expect(found.status == 5)
        #expect(found.stderr.contains("is corrupt"))
        #expect(!found.signalledOrCrashed)
        let fixed = try vcache(["verify", "--fix"])
        #expect(fixed.status == 1)
        #expect(fixed.stdout.contains("moved it to"))
        #expect(try vcache(["verify"]).status == 0)
    }

    @Test func verifyOriginDetectsAChangedETagOnTheInProcessOrigin() throws {
        let origin = try TestOrigin()
        origin.setResource("/c.mp4", .init(body: TestBytes.make(50_000, seed: 1), etag: "\"one\""))
        #expect(try vcache(["prefetch", "-q", origin.url("/c.mp4")]).status == 0)
        let clean = try vcache(["verify", "--origin"])
        #expect(clean.status == 0, "\(clean.stdout)\(clean.stderr)")
        origin.setResource("/c.mp4", .init(body: TestBytes.make(50_000, seed: 2), etag: "\"two\""))
        let r = try vcache(["verify", "--origin"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("changed on the origin (ETag \"one\" -> \"two\")"))
        #expect(origin.headers("/c.mp4").contains { $0["if-none-match"] == "\"one\"" })
        #expect(try vcache(["verify", "--origin", "--fix"]).status == 1)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/c.mp4"))?.cachedBytes == 0)
    }

    @Test func verifyOriginDetectsAReplacedFileOnNginx() throws {
        let (nginx, url, body) = try cachedVideo()
        #expect(try vcache(["verify", "--origin"]).status == 0)
        try nginx.publish("moov-at-end.mp4", body + Data("more".utf8))
        let r = try vcache(["verify", "--origin"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("changed on the origin"))
        #expect(r.stdout.contains("length \(body.count) -> \(body.count + 4)"))
        _ = url
    }

    @Test func exportOfACompleteMP4IsByteIdenticalAndDecodes() throws {
        let (_, url, body) = try cachedVideo("moov-at-front.mp4")
        let out = dir.file("out.mp4")
        let r = try vcache(["export", url, out])
        #expect(r.status == 0)
        #expect(r.stdout == "exported \(out) (289 KiB)\n")
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
        let ffmpeg = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", out, "-f", "null", "-"])
        #expect(ffmpeg.status == 0)
        #expect(ffmpeg.err.isEmpty)
        // No temp files left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".vcache-") }.isEmpty)
    }

    @Test func exportRefusesPartialEntriesExistingFilesAndMissingFolders() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("p.mp4", TestBytes.make(1 << 20, seed: 4))
        #expect(try vcache(["prefetch", "-q", url, "--bytes", "256K"]).status == 0)
        let partial = try vcache(["export", url, dir.file("p.mp4")])
        #expect(partial.status == 1)
        #expect(partial.stderr == "vcache: cannot export to '\(dir.file("p.mp4"))': \(url) is not complete: 256 KiB of 1.0 MiB cached (768 KiB missing); run 'vcache prefetch \(url)' to complete it\n")
        #expect(!FileManager.default.fileExists(atPath: dir.file("p.mp4")))

        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        try dir.write("exists.mp4", Data("mine".utf8))
        let exists = try vcache(["-q", "export", url, dir.file("exists.mp4")])  // -q: the error still said (h4 F4)
        #expect(exists.status == 1)
        #expect(exists.stderr == "vcache: cannot export to '\(dir.file("exists.mp4"))': '\(dir.file("exists.mp4"))' already exists; use --force to overwrite it\n")
        #expect(try String(contentsOfFile: dir.file("exists.mp4"), encoding: .utf8) == "mine")
        #expect(try vcache(["export", url, dir.file("exists.mp4"), "--force"]).status == 0)

        let missing = try vcache(["export", url, dir.file("no/such/out.mp4")])
        #expect(missing.status == 1)
        #expect(missing.stderr == "vcache: cannot export to '\(dir.file("no/such/out.mp4"))': folder '\(dir.file("no/such"))' does not exist; create it first\n")
    }

    @Test func exportLinkSharesTheInode() throws {
        let (_, url, body) = try cachedVideo()
        let out = dir.file("linked.mp4")
        let r = try vcache(["export", url, out, "--link"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("shares the cache's inode"))
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))
        #expect(FileSystem.status(out)?.st_ino == FileSystem.status(try dataPath(url))?.st_ino)
    }

    @Test func aLinkedExportKeepsItsVideoWhenTheCacheDropsThatVersion() throws {
        let (nginx, url, body) = try cachedVideo()
        let out = dir.file("kept.mp4")
        #expect(try vcache(["export", url, out, "--link"]).status == 0)
        // A different length, so nginx's validators change even within the same second.
        let newBody = try Fixtures.data("moov-at-front.mp4") + Data("v2".utf8)
        try nginx.publish("moov-at-end.mp4", newBody)
        #expect(try vcache(["verify", "--origin", "--fix"]).status == 1)  // changed: the cached bytes are dropped
        #expect(try vcache(["prefetch", "-q", url]).status == 0)
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(newBody))
        #expect(TestBytes.sha256(file: out) == TestBytes.sha256(body))  // never truncated in place
    }

    @Test func exportAllNamesHostileURLsInsideTheFolder() throws {
        let origin = try TestOrigin()
        let paths = ["/..%2F..%2Fetc%2Fpasswd", "/" + String(repeating: "n", count: 300) + ".mp4", "/bad%01%0Aname.mp4", "/dir/", "/ok.mp4"]
        for (i, p) in paths.enumerated() {
            origin.setResource(p, .init(body: TestBytes.make(1000 + i, seed: UInt64(i))))
            #expect(try vcache(["prefetch", "-q", origin.url(p)]).status == 0, "\(p)")
        }
        let out = dir.file("export")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let r = try vcache(["export", "--all", out])
        #expect(r.status == 0, "\(r.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: out)
        #expect(files.count == paths.count)
        #expect(files.allSatisfy { !$0.hasPrefix(".") && $0.utf8.count <= 200 && !$0.unicodeScalars.contains { $0.value < 0x20 } })
        #expect(files.contains("ok.mp4"))
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/etc/passwd"))
        var total = 0
        for f in files { total += (try? Data(contentsOf: URL(fileURLWithPath: out + "/" + f)).count) ?? 0 }
        #expect(total == (0..<paths.count).reduce(0) { $0 + 1000 + $1 })
    }

    @Test func evictFromTheCommandLineSkipsPinnedAndDryRunChangesNothing() throws {
        let origin = try TestOrigin()
        for i in 0..<3 {
            origin.setResource("/v\(i).mp4", .init(body: TestBytes.make(200_000, seed: UInt64(i))))
            #expect(try vcache(["prefetch", "-q", origin.url("/v\(i).mp4")]).status == 0)
        }
        #expect(try vcache(["pin", origin.url("/v0.mp4")]).status == 0)
        let ls = try vcache(["ls"])
        #expect(ls.stdout.split(separator: "\n")[0] == "STATE      CACHED    TOTAL    %  LAST USED  PIN  URL")
        let dry = try vcache(["evict", "--all", "--dry-run"])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("would evict 2 entries"))
        #expect(dry.stderr == "skipped \(origin.url("/v0.mp4")): pinned\n")
        #expect(try vcache(["ls", "--json"]).stdout.split(separator: "\n").count == 4)
        let real = try vcache(["evict", "--all"])
        #expect(real.stdout.contains("evicted 2 entries"))
        // Named but kept by another filter: said, and the run fails.
        let kept = try vcache(["evict", origin.url("/v0.mp4"), "--older-than", "1h"])
        #expect(kept.status == 1 && kept.stderr == "kept \(origin.url("/v0.mp4")): it does not match the other filters given\n", "\(kept.stderr)")
        #expect(try vcache(["evict", origin.url("/v0.mp4")]).stdout.contains("evicted 1 entry"))
        #expect(try vcache(["ls"]).stdout.contains("is empty"))
        let nothing = try vcache(["evict"])
        #expect(nothing.status == 2)
        #expect(nothing.stderr == "vcache: nothing selected: give --max-size, --older-than, --partial, --all, or URLs or keys\n")
    }

    @Test func lsInfoAndVerifyDoNotCountAsUseButExportDoes() throws {
        let (_, url, _) = try cachedVideo()
        let key = try #require(try CacheInspector(directory: cache).entry(url)).key
        try sqlite(cache + "/catalog.db", "UPDATE entries SET last_used = 1600000000 WHERE key = '\(key)';")
        _ = try vcache(["ls"])
        _ = try vcache(["info", url])
        #expect(try CacheInspector(directory: cache).entry(url)?.lastUsed == Date(timeIntervalSince1970: 1_600_000_000))
        // A nightly verify must not make every entry "just used" and flatten the LRU order.
        #expect(try vcache(["verify", url]).status == 0)
        #expect(try vcache(["verify", "--fix"]).status == 0)
        #expect(try CacheInspector(directory: cache).entry(url)?.lastUsed == Date(timeIntervalSince1970: 1_600_000_000))
        #expect(try vcache(["export", url, dir.file("e.mp4")]).status == 0)
        #expect(try #require(try CacheInspector(directory: cache).entry(url)).lastUsed > Date(timeIntervalSince1970: 1_700_000_000))
    }

    @Test func infoTellsWhereMoovIsEvenForAPartialEntry() throws {
        let nginx = try Nginx()
        let end = try nginx.publish("end.mp4", try Fixtures.data("moov-at-end.mp4"))
        let front = try nginx.publish("front.mp4", try Fixtures.data("moov-at-front.mp4"))
        #expect(try vcache(["prefetch", "-q", end, "--bytes", "64K"]).status == 0)
        #expect(try vcache(["prefetch", "-q", front, "--bytes", "64K"]).status == 0)
        #expect(try vcache(["info", end]).stdout.contains("mp4 layout     moov after mdat"))
        #expect(try vcache(["info", front]).stdout.contains("mp4 layout     moov before mdat"))
        let json = try vcache(["info", front, "--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(o["ranges"] as? [[Int]] == [[0, 65535]])
        #expect(o["state"] as? String == "partial")
    }

    @Test func lsFiltersSortsAndShowsRanges() throws {
        let origin = try TestOrigin()
        origin.setResource("/a.mp4", .init(body: TestBytes.make(300_000, seed: 1)))
        origin.setResource("/b.mp4", .init(body: TestBytes.make(100_000, seed: 2)))
        #expect(try vcache(["prefetch", "-q", origin.url("/a.mp4"), "--range", "0-999", "--range", "200000-200999"]).status == 0)
        #expect(try vcache(["prefetch", "-q", origin.url("/b.mp4")]).status == 0)
        let partial = try vcache(["ls", "--partial", "--ranges"])
        let lines = partial.stdout.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[1].contains("0-999,200000-200999"))
        let bySize = try vcache(["ls", "--sort", "size", "--max-size", "10M"])
        #expect(bySize.stdout.split(separator: "\n")[1].hasSuffix(origin.url("/b.mp4")))
        #expect(bySize.stdout.split(separator: "\n").last?.contains("of a 10.0 MiB cap") == true)
        #expect(try vcache(["ls", "--sort", "age"]).stderr == "vcache: invalid order 'age' for --sort; use lru, size or url\n")
    }

    func sqlite(_ db: String, _ sql: String) throws {
        let r = try Tool.run("/usr/bin/sqlite3", [db, sql])
        #expect(r.status == 0, "\(r.err)")
    }
}
