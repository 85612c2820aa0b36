import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Expected checksums end to end: `--checksum`, a list line's `md5=HEX`, the origin's digest
/// headers (from a test origin that lies), checked when the entry completes.
@Suite struct ChecksumCommandTests {
    let dir = TempDirectory("vcache-checksum-e2e")
    var cache: String { dir.file("cache") }

    static func digest(_ algorithm: DigestAlgorithm, _ data: Data) -> String {
        let d = AlgorithmDigest(algorithm)
        data.withUnsafeBytes { d.update($0) }
        return d.finalize() ?? ""
    }

    static func base64(_ hex: String) -> String {
        var bytes: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            bytes.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return Data(bytes).base64EncodedString()
    }

    let wrongMD5 = String(repeating: "0", count: 32)

    func ls(_ url: String) throws -> [String: Any] {
        let r = try VCacheBinary.run(["ls", "--json"], cacheDir: cache)
        for line in r.stdout.split(separator: "\n") {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            if o["url"] as? String == url { return o }
        }
        return [:]
    }

    @Test func aRightChecksumCompletes() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 71)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        let url = origin.url("/v.mp4")
        let md5 = Self.digest(.md5, body), sha512 = Self.digest(.sha512, body)
        let r = try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(md5)", "--checksum", "sha512=\(sha512)"], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(origin.servedBytes("/v.mp4") == body.count)
        let entry = try ls(url)
        #expect(entry["state"] as? String == "complete")
        let expected = try #require(entry["expected_digests"] as? [[String: Any]])
        #expect(expected.map { "\($0["algorithm"]!) \($0["value"]!) \($0["source"]!) \($0["matched"]!) \($0["computed"]!)" }
                == ["md5 \(md5) --checksum 1 \(md5)", "sha512 \(sha512) --checksum 1 \(sha512)"])
        let info = try VCacheBinary.run(["info", url], cacheDir: cache)
        #expect(info.stdout.contains("\nexpected md5     \(md5) (--checksum): matched\n"), "\(info.stdout)")
        // verify reads it once for all its digests; export hands it on.
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["export", url, dir.file("out.mp4")], cacheDir: cache).status == 0)
        #expect(TestBytes.sha256(file: dir.file("out.mp4")) == TestBytes.sha256(body))
    }

    /// A complete entry whose stored expectation it does not match (a catalog written by hand,
    /// or by another tool): verify finds it, export refuses it, verify --fix drops it.
    @Test func verifyAndExportHoldACompleteEntryToItsExpectedDigests() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(200_000, seed: 80)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        let url = origin.url("/v.mp4")
        #expect(try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(Self.digest(.md5, body))"], cacheDir: cache).status == 0)
        let key = try #require(try CacheInspector(directory: cache).entry(url)).key
        do {
            let catalog = try Catalog(path: cache + "/catalog.db")
            try catalog.recordDigestChecks(key: key, [DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: wrongMD5, source: .listLine(4)))])
        }
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("its md5 is \(Self.digest(.md5, body)), not \(wrongMD5) (expected by list line 4)"), "\(verify.stdout)")
        let export = try VCacheBinary.run(["export", url, dir.file("out.mp4")], cacheDir: cache)
        #expect(export.status == 1)
        #expect(export.stderrLines == ["vcache: cannot export to '\(dir.file("out.mp4"))': the cached bytes of \(url) are not the file expected: its md5 was never checked against \(wrongMD5) (expected by list line 4); nothing was written; run 'vcache prefetch \(url)' to check or fetch it again"], "\(export.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.mp4")))
        #expect(try VCacheBinary.run(["verify", "--fix"], cacheDir: cache).status == 1)
        #expect(try ls(url)["cached_bytes"] as? Int == 0)
    }

    @Test func aWrongChecksumFailsWithExit4AfterExactlyOneRefetchAndNothingIsKept() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 72)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        let url = origin.url("/v.mp4")
        let md5 = Self.digest(.md5, body)
        let r = try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(wrongMD5)"], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderrLines.contains("vcache: cannot prefetch \(url): its md5 is \(md5), not \(wrongMD5) (expected by --checksum); its bytes were dropped, also after fetching it whole once more: check the checksum, or what the origin serves"), "\(r.stderr)")
        // Fetched whole twice, no more, and said so.
        #expect(origin.servedBytes("/v.mp4") == 2 * body.count)
        #expect(r.stderrLines.last?.hasPrefix("0 done, 1 failed; fetched 586 KiB, 0 B already cached") == true, "\(r.stderr)")
        #expect(origin.requests("/v.mp4").count == 2)
        let entry = try ls(url)
        #expect(entry["state"] as? String != "complete" && entry["cached_bytes"] as? Int == 0)
        let export = try VCacheBinary.run(["export", url, dir.file("out.mp4")], cacheDir: cache)
        #expect(export.status != 0)
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.mp4")))
        // With --json: a `failed` event whose error is of kind checksum_mismatch, exit code 4.
        let json = try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(wrongMD5)", "--json"], cacheDir: cache)
        #expect(json.status == 4)
        let failed = try json.stdout.split(separator: "\n").compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "failed" }
        let error = try #require(failed?["error"] as? [String: Any])
        #expect(error["kind"] as? String == "checksum_mismatch" && error["exit_code"] as? Int == 4)
    }

    @Test func anOriginWhoseDigestHeaderDisagreesWithItsBytesIsRefusedAndOneThatAgreesCompletes() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(200_000, seed: 73)
        let md5 = Self.digest(.md5, body), sha256 = TestBytes.sha256(body)
        let otherMD5 = Self.digest(.md5, Data("another file".utf8)), otherSHA = TestBytes.sha256(Data("another file".utf8))
        origin.setResource("/goog-bad.mp4", .init(body: body, etag: "\"g\"", extraHeaders: ["x-goog-hash": "crc32c=n03x6A==,md5=\(Self.base64(otherMD5))"]))
        origin.setResource("/goog-ok.mp4", .init(body: body, etag: "\"g\"", extraHeaders: ["x-goog-hash": "crc32c=n03x6A==,md5=\(Self.base64(md5))"]))
        origin.setResource("/repr-bad.mp4", .init(body: body, etag: "\"r\"", extraHeaders: ["Repr-Digest": "sha-256=:\(Self.base64(otherSHA)):"]))
        origin.setResource("/repr-ok.mp4", .init(body: body, etag: "\"r\"", extraHeaders: ["Repr-Digest": "sha-256=:\(Self.base64(sha256)):"]))
        // Two x-goog-hash lines that disagree: neither is trusted, so nothing is expected.
        origin.setResource("/goog-twice.mp4", .init(body: body, etag: "\"t\"", headerLines: [("x-goog-hash", "md5=\(Self.base64(md5))"), ("x-goog-hash", "md5=\(Self.base64(otherMD5))")]))
        // gzip's digest says nothing of identity bytes (and vcache refuses an encoded body anyway).
        for (path, status, source, expected) in [("/goog-bad.mp4", Int32(4), "the origin's x-goog-hash", otherMD5), ("/repr-bad.mp4", 4, "the origin's Repr-Digest", otherSHA),
                                                 ("/goog-ok.mp4", 0, "", ""), ("/repr-ok.mp4", 0, "", ""), ("/goog-twice.mp4", 0, "", "")] {
            let url = origin.url(path)
            let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(r.status == status, "\(path): \(r.stderr)")
            if status == 4 {
                let algorithm = path.hasPrefix("/goog") ? "md5" : "sha256"
                let computed = algorithm == "md5" ? md5 : sha256
                #expect(r.stderrLines.contains("vcache: cannot prefetch \(url): its \(algorithm) is \(computed), not \(expected) (expected by \(source)); its bytes were dropped, also after fetching it whole once more: check the checksum, or what the origin serves"), "\(r.stderr)")
                #expect(try ls(url)["cached_bytes"] as? Int == 0)
                #expect(origin.servedBytes(path) == 2 * body.count)
            } else {
                #expect(try ls(url)["state"] as? String == "complete", "\(path)")
                #expect(try CacheInspector(directory: cache).dataSHA256(url) == sha256)
            }
        }
    }

    @Test func anOriginDigestThatChangesUnderTheSameETagIsAChangedVideo() throws {
        let origin = try TestOrigin()
        let old = TestBytes.make(300_000, seed: 74), new = TestBytes.make(300_000, seed: 75)
        origin.setResource("/v.mp4", .init(body: old, etag: "\"same\"", extraHeaders: ["x-goog-hash": "md5=\(Self.base64(Self.digest(.md5, old)))"]))
        let url = origin.url("/v.mp4")
        #expect(try VCacheBinary.run(["prefetch", url, "--bytes", "64K", "--no-moov"], cacheDir: cache).status == 0)
        // The object is replaced; a broken CDN keeps the ETag, but its hash says it changed.
        origin.setResource("/v.mp4", .init(body: new, etag: "\"same\"", extraHeaders: ["x-goog-hash": "md5=\(Self.base64(Self.digest(.md5, new)))"]))
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("its md5 changed from \(Self.digest(.md5, old)) to \(Self.digest(.md5, new))"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(new))
        #expect(try ls(url)["state"] as? String == "complete")
    }

    @Test func aListLineWithMD5IsCheckedAndNamedByItsLine() throws {
        let origin = try TestOrigin()
        let a = TestBytes.make(100_000, seed: 76), b = TestBytes.make(100_000, seed: 77)
        origin.setResource("/a.mp4", .init(body: a, etag: "\"a\""))
        origin.setResource("/b.mp4", .init(body: b, etag: "\"b\""))
        let list = dir.file("list.txt")
        try "\(origin.url("/a.mp4")) md5=\(Self.digest(.md5, a))\n# b's checksum is a's\n\(origin.url("/b.mp4")) 1M md5=\(Self.digest(.md5, a))\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.run(["prefetch", "-i", list], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderrLines.contains("vcache: cannot prefetch \(origin.url("/b.mp4")): its md5 is \(Self.digest(.md5, b)), not \(Self.digest(.md5, a)) (expected by list line 3); its bytes were dropped, also after fetching it whole once more: check the checksum, or what the origin serves"), "\(r.stderr)")
        #expect(try ls(origin.url("/a.mp4"))["state"] as? String == "complete")
        #expect(try ls(origin.url("/b.mp4"))["cached_bytes"] as? Int == 0)

        // check: a line whose checksum the cached copy was not checked against is not ready.
        let ok = dir.file("ok.txt"), other = dir.file("other.txt")
        try "\(origin.url("/a.mp4")) md5=\(Self.digest(.md5, a))\n".write(toFile: ok, atomically: true, encoding: .utf8)
        try "\(origin.url("/a.mp4")) md5=\(wrongMD5)\n".write(toFile: other, atomically: true, encoding: .utf8)
        #expect(try VCacheBinary.run(["check", "-i", ok], cacheDir: cache).status == 0)
        let c = try VCacheBinary.run(["check", "-i", other], cacheDir: cache)
        #expect(c.status == 1)
        #expect(c.stdout.contains("missing  \(origin.url("/a.mp4"))  its cached copy is expected to have another md5 (\(Self.digest(.md5, a)), from list line 1)"), "\(c.stdout)")
    }

    /// Two lines naming one video with two md5s: one file cannot have both; the later line is
    /// skipped by its number (exit 1), never dropped without a word while the run says all is well.
    @Test func twoLinesGivingOneVideoTwoChecksumsSkipTheLaterByItsNumber() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(100_000, seed: 81)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v\""))
        let url = origin.url("/v.mp4"), md5 = Self.digest(.md5, body)
        let list = dir.file("list.txt")
        try "\(url) md5=\(md5)\n\(url)?x=1 sha256=\(TestBytes.sha256(body))\n\(url) 10s md5=\(wrongMD5)\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.run(["prefetch", "-i", list, "--key-ignore-query"], cacheDir: cache)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderrLines.contains("vcache: \(list):3: \(url) is given md5 \(wrongMD5), but list line 1 gives the same video \(md5); one file cannot have both; line skipped"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).dataSHA256(url) == TestBytes.sha256(body))
        #expect(try ls(url)["state"] as? String == "complete")
    }

    /// A list line's md5 that the origin's x-goog-hash gave too, and the cached bytes matched:
    /// `check` says ready (it said "never checked against this md5", exit 1).
    @Test func aListChecksumTheOriginsDigestAlreadyMatchedIsReady() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(150_000, seed: 83)
        let md5 = Self.digest(.md5, body)
        origin.setResource("/g.mp4", .init(body: body, etag: "\"g\"", extraHeaders: ["x-goog-hash": "crc32c=n03x6A==,md5=\(Self.base64(md5))"]))
        let url = origin.url("/g.mp4")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        let list = dir.file("list.txt")
        try "\(url) md5=\(md5)\n".write(toFile: list, atomically: true, encoding: .utf8)
        let c = try VCacheBinary.run(["check", "-i", list], cacheDir: cache)
        #expect(c.status == 0, "\(c.stdout)")
        #expect(c.stdout.contains("\nready  \(url)  "), "\(c.stdout)")
    }

    @Test func aBytesPrefetchWithAChecksumIsCheckedWhenALaterRunCompletesIt() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 78)
        origin.setResource("/right.mp4", .init(body: body, etag: "\"r\""))
        origin.setResource("/wrong.mp4", .init(body: body, etag: "\"w\""))
        let right = origin.url("/right.mp4"), wrong = origin.url("/wrong.mp4")
        #expect(try VCacheBinary.run(["prefetch", right, "--bytes", "64K", "--checksum", "md5=\(Self.digest(.md5, body))"], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", wrong, "--bytes", "64K", "--checksum", "md5=\(wrongMD5)"], cacheDir: cache).status == 0)
        #expect(try ls(wrong)["state"] as? String == "partial")
        #expect(try VCacheBinary.run(["prefetch", right], cacheDir: cache).status == 0)
        #expect(try ls(right)["state"] as? String == "complete")
        let r = try VCacheBinary.run(["prefetch", wrong], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderrLines.contains { $0.hasPrefix("vcache: cannot prefetch \(wrong): its md5 is \(Self.digest(.md5, body)), not \(wrongMD5) (expected by --checksum); its bytes were dropped") }, "\(r.stderr)")
        #expect(try ls(wrong)["cached_bytes"] as? Int == 0)
    }

    @Test func anotherExpectedValueForACompleteEntryIsAChangedExpectation() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 79)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v\""))
        let url = origin.url("/v.mp4")
        let md5 = Self.digest(.md5, body)
        #expect(try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(md5)"], cacheDir: cache).status == 0)
        // The same value again, or a new algorithm the cached copy has: checked, nothing fetched.
        #expect(try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(md5)"], cacheDir: cache).status == 0)
        let sha1 = try VCacheBinary.run(["prefetch", url, "--checksum", "sha1=\(Self.digest(.sha1, body))"], cacheDir: cache)
        #expect(sha1.status == 0, "\(sha1.stderr)")
        #expect(origin.servedBytes("/v.mp4") == body.count)
        // Another md5: the cached copy does not have it, so the whole is fetched once more.
        let r = try VCacheBinary.run(["prefetch", url, "--checksum", "md5=\(wrongMD5)"], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderrLines.contains { $0.hasPrefix("vcache: cannot prefetch \(url): its md5 is \(md5), not \(wrongMD5) (expected by --checksum)") }, "\(r.stderr)")
        #expect(origin.servedBytes("/v.mp4") == 2 * body.count)
        #expect(try ls(url)["state"] as? String != "complete")
    }

    @Test func aBadChecksumIsAUsageErrorNamingIt() throws {
        let url = "http://127.0.0.1:9/v.mp4"
        for (token, message) in [
            ("crc32=abcd", "vcache: invalid --checksum: unknown checksum algorithm 'crc32' in 'crc32=abcd'; use md5, sha1, sha256 or sha512"),
            ("md5=abc", "vcache: invalid --checksum: checksum 'md5=abc' has 3 characters after '='; md5 takes 32 hex digits (or 24 base64)"),
            ("sha256=" + String(repeating: "x", count: 64),
             "vcache: invalid --checksum: checksum 'sha256=\(String(repeating: "x", count: 64))' is not hex (nor base64); sha256 takes 64 hex digits, 0-9 and a-f"),
        ] {
            let r = try VCacheBinary.run(["prefetch", url, "--checksum", token], cacheDir: cache)
            #expect(r.status == 2)
            #expect(r.stderrLines == [message], "\(r.stderr)")
        }
        let two = try VCacheBinary.run(["prefetch", url, url + "?2", "--checksum", "md5=\(wrongMD5)"], cacheDir: cache)
        #expect(two.status == 2 && two.stderr.contains("--checksum is the digest of one video"))
        // In a list: the line is named and skipped, the rest runs.
        let list = dir.file("list.txt")
        try "\(url) md5=abc\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try VCacheBinary.run(["prefetch", "-i", list], cacheDir: cache)
        #expect(r.stderrLines.contains("vcache: \(list):1: checksum 'md5=abc' has 3 characters after '='; md5 takes 32 hex digits (or 24 base64); line skipped"), "\(r.stderr)")
        #expect(r.status == 1)
    }
}
