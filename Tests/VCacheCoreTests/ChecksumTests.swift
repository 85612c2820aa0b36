import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// Expected checksums: the `ALGO=VALUE` token, the origin's digest headers, the rules that merge
/// and judge them, the digests themselves and where the catalog keeps them.
@Suite struct ChecksumTests {
    let dir = TempDirectory("vcache-checksum")

    static let md5abc = "900150983cd24fb0d6963f7d28e17f72"
    static let sha256abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    /// base64 of the MD5 and SHA-256 of "abc", as the headers write them.
    static let md5abc64 = "kAFQmDzST7DWlj99KOF/cg=="
    static let sha256abc64 = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="

    // RFC 1321 appendix A.5, FIPS 180-4 examples.
    @Test(arguments: [
        (DigestAlgorithm.md5, "", "d41d8cd98f00b204e9800998ecf8427e"),
        (.md5, "abc", md5abc),
        (.sha1, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (.sha256, "abc", sha256abc),
        (.sha512, "abc", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    ])
    func eachAlgorithmMatchesItsReferenceVector(algorithm: DigestAlgorithm, input: String, expected: String) {
        let d = AlgorithmDigest(algorithm)
        Data(input.utf8).withUnsafeBytes { d.update($0) }
        #expect(d.finalize() == expected)
    }

    @Test(arguments: [
        ("md5=\(md5abc)", DigestAlgorithm.md5, md5abc),
        ("MD5=\(md5abc.uppercased())", .md5, md5abc),
        ("md5=\(md5abc64)", .md5, md5abc),
        ("sha256=\(sha256abc)", .sha256, sha256abc),
        ("sha-256=:\(sha256abc64):", .sha256, sha256abc),
        ("SHA-256=\(sha256abc64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))", .sha256, sha256abc),
        ("sha1=a9993e364706816aba3e25717850c26c9cd0d89d", .sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
    ])
    func aTokenIsHexOrBase64OfTheAlgorithmsSize(token: String, algorithm: DigestAlgorithm, hex: String) throws {
        let e = try ExpectedDigest.parse(token, source: .option)
        #expect(e == ExpectedDigest(algorithm: algorithm, hex: hex, source: .option))
    }

    @Test func aBadTokenIsRefusedNamingIt() {
        #expect(throws: ChecksumTokenError.unknownAlgorithm("crc32=abcd", name: "crc32")) { try ExpectedDigest.parse("crc32=abcd", source: .option) }
        #expect(throws: ChecksumTokenError.wrongLength("md5=abc", algorithm: .md5, length: 3)) { try ExpectedDigest.parse("md5=abc", source: .option) }
        #expect(throws: ChecksumTokenError.notHex("md5=" + String(repeating: "g", count: 32), algorithm: .md5)) {
            try ExpectedDigest.parse("md5=" + String(repeating: "g", count: 32), source: .option)
        }
        #expect(throws: ChecksumTokenError.notAChecksum("=abc")) { try ExpectedDigest.parse("=abc", source: .option) }
        #expect(ChecksumTokenError.wrongLength("md5=abc", algorithm: .md5, length: 3).description
                == "checksum 'md5=abc' has 3 characters after '='; md5 takes 32 hex digits (or 24 base64)")
        // A hostile list line: shown printable and short.
        let long = "md5=" + String(repeating: "\u{1b}", count: 500)
        #expect(ChecksumTokenError.wrongLength(long, algorithm: .md5, length: 500).description.count < 260)
    }

    func head(_ status: Int = 200, _ headers: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, reason: "", headers: headers, effectiveURL: "http://h/v.mp4")
    }

    func digests(_ headers: [(String, String)]) -> [String] { digests(200, headers) }

    func digests(_ status: Int, _ headers: [(String, String)]) -> [String] {
        OriginDigests.parse(head(status, headers)).map { "\($0.algorithm.rawValue)=\($0.hex) \($0.source.description)" }
    }

    @Test func theOriginsDigestHeadersAreReadAsTheirRFCsWriteThem() {
        let sha512 = String(repeating: "A", count: 86) + "=="
        // RFC 9530 §2: a dictionary of byte sequences.
        #expect(digests([("Repr-Digest", "sha-256=:\(Self.sha256abc64):, sha-512=:\(sha512):")])
                == ["sha256=\(Self.sha256abc) the origin's Repr-Digest", "sha512=\(String(repeating: "0", count: 128)) the origin's Repr-Digest"])
        // RFC 3230 §4.3.2: `Digest: SHA-256=..., MD5=...`; unknown algorithms are skipped.
        #expect(digests(200, [("Digest", "UNIXsum=30637, MD5=\(Self.md5abc64)")]) == ["md5=\(Self.md5abc) the origin's Digest"])
        // ... but servers disagree whether a 206's is of the part sent (RFC 9530 §1.3): read only
        // when the part is the whole; Repr-Digest is the representation's by definition.
        #expect(digests(206, [("Digest", "MD5=\(Self.md5abc64)"), ("Content-Range", "bytes 0-99/1000")]) == [])
        #expect(digests(206, [("Digest", "MD5=\(Self.md5abc64)")]) == [])
        #expect(digests(206, [("Digest", "MD5=\(Self.md5abc64)"), ("Content-Range", "bytes 0-999/1000")]) == ["md5=\(Self.md5abc) the origin's Digest"])
        #expect(digests(206, [("Repr-Digest", "md5=:\(Self.md5abc64):"), ("Content-Range", "bytes 100-199/1000")]) == ["md5=\(Self.md5abc) the origin's Repr-Digest"])
        // Content-MD5 is the body's: only a full response's is the whole video's.
        #expect(digests(200, [("Content-MD5", Self.md5abc64)]) == ["md5=\(Self.md5abc) the origin's Content-MD5"])
        #expect(digests(206, [("Content-MD5", Self.md5abc64)]) == [])
        // GCS: crc32c and md5, in one header or two; a range response's is the object's.
        #expect(digests(206, [("x-goog-hash", "crc32c=n03x6A=="), ("X-Goog-Hash", "md5=\(Self.md5abc64)")]) == ["md5=\(Self.md5abc) the origin's x-goog-hash"])
        #expect(digests([("x-goog-hash", "crc32c=n03x6A==,md5=\(Self.md5abc64)")]) == ["md5=\(Self.md5abc) the origin's x-goog-hash"])
        // The same value in two headers is one digest, named by the first.
        #expect(digests([("Content-MD5", Self.md5abc64), ("x-goog-hash", "md5=\(Self.md5abc64)")]) == ["md5=\(Self.md5abc) the origin's Content-MD5"])
    }

    @Test func digestsOfAnotherCodingAreIgnored() {
        #expect(digests([("Content-Encoding", "gzip"), ("Repr-Digest", "sha-256=:\(Self.sha256abc64):"), ("Content-MD5", Self.md5abc64)]) == [])
        #expect(digests([("Content-Encoding", "identity"), ("Content-MD5", Self.md5abc64)]) == ["md5=\(Self.md5abc) the origin's Content-MD5"])
        // GCS decompressive transcoding: the stored object (and its hash) is gzip.
        #expect(digests([("x-goog-stored-content-encoding", "gzip"), ("x-goog-hash", "md5=\(Self.md5abc64)")]) == [])
    }

    @Test(arguments: [
        [("Repr-Digest", "sha-256=\(sha256abc64)")],                       // not a byte sequence (no colons)
        [("Repr-Digest", "sha-256=:\(md5abc64):")],                        // the wrong size for its algorithm
        [("Repr-Digest", "sha-256=:!!!!:")],                                // not base64
        [("Digest", "MD5")], [("Digest", "=,=,,;;=")], [("Digest", "")],   // garbage
        [("x-goog-hash", "md5=" + String(repeating: "A", count: 9000))],   // huge
        [("Content-MD5", md5abc64), ("Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA==")],  // repeated, disagreeing
        [("Repr-Digest", "sha-256=:\(sha256abc64):"), ("Digest", "SHA-256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")],  // two headers disagree
        [("x-goog-hash", "sha256=\(sha256abc64)")],                        // GCS gives md5 and crc32c only
    ])
    func aMalformedOrContradictoryDigestIsNeverTrusted(headers: [(String, String)]) {
        #expect(digests(headers) == [])
    }

    @Test func manyMembersAndHugeHeadersAreCheapAndNeverCrash() {
        let many = Array(repeating: "md5=\(Self.md5abc64)", count: 100_000).joined(separator: ",")
        #expect(digests([("Digest", many)]) == [])  // past 8 KiB: ignored whole
        let someMore = Array(repeating: "x=1", count: 1000).joined(separator: ",") + ",MD5=\(Self.md5abc64)"
        #expect(digests([("Digest", String(someMore.suffix(8000)))]) == [])  // only the first 32 members are read
    }

    @Test func givenDigestsOverrideOnlyTheirAlgorithmAndKeepAnOutcomeForTheSameValue() {
        let md5 = ExpectedDigest(algorithm: .md5, hex: Self.md5abc, source: .listLine(3))
        let origin = ExpectedDigest(algorithm: .md5, hex: String(repeating: "1", count: 32), source: .origin(header: "x-goog-hash"))
        let stored = [DigestCheck(expected: md5, matched: true, computed: Self.md5abc), DigestCheck(expected: origin, matched: true)]
        // The same value again, from --checksum: still matched, its source the new one.
        let same = DigestCheck.merged(stored: stored, given: [ExpectedDigest(algorithm: .md5, hex: Self.md5abc, source: .option)])
        #expect(same[0] == DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: Self.md5abc, source: .option), matched: true, computed: Self.md5abc))
        #expect(same[1] == stored[1])
        // Another value: unchecked (a changed expectation); the origin's stays as it was.
        let other = ExpectedDigest(algorithm: .md5, hex: String(repeating: "2", count: 32), source: .option)
        #expect(DigestCheck.merged(stored: stored, given: [other]) == [DigestCheck(expected: other), stored[1]])
        // A given value the origin's digest already gave, and the bytes matched: matched too (no
        // read again); the origin's outcome is the same bytes' outcome.
        let googMatched = DigestCheck(expected: origin, matched: true, computed: origin.hex)
        let asOrigin = ExpectedDigest(algorithm: .md5, hex: origin.hex, source: .listLine(5))
        #expect(DigestCheck.merged(stored: [googMatched], given: [asOrigin]) == [DigestCheck(expected: asOrigin, matched: true, computed: origin.hex), googMatched])
        #expect(DigestCheck.merged(stored: [stored[0], googMatched], given: [asOrigin])[0] == DigestCheck(expected: asOrigin, matched: true, computed: origin.hex))
        #expect(DigestCheck.merged(stored: [DigestCheck(expected: origin)], given: [asOrigin])[0] == DigestCheck(expected: asOrigin))
        // The origin's changed value is a contradiction; the same one is not.
        let changed = ExpectedDigest(algorithm: .md5, hex: String(repeating: "3", count: 32), source: .origin(header: "Content-MD5"))
        #expect(DigestCheck.contradiction(in: stored, origin: [changed])?.before == origin)
        #expect(DigestCheck.contradiction(in: stored, origin: [origin]) == nil)
        // Judged: the first mismatch (given first) is the one said.
        let (judged, mismatch) = DigestCheck.judged(stored.map { DigestCheck(expected: $0.expected) }, computed: [.md5: Self.md5abc])
        #expect(judged.map(\.matched) == [true, false] && mismatch?.expected == origin && mismatch?.computed == Self.md5abc)
    }

    /// Migration "Expected digests" on a catalog made by today's schema (the one before it):
    /// it upgrades in place, keeps its entries, and each expects nothing until told.
    @Test func aCatalogOfTheSchemaBeforeUpgradesAndItsEntriesExpectNothing() throws {
        let path = dir.file("v5.db")
        do {
            let c = try Catalog(path: path)
            var u = Catalog.Update(key: "k", url: "http://h/k", validators: Validators(length: 1000, etag: "\"e\"", lastModified: nil))
            u.added = RangeSet([ByteRange(0, 1000)])
            u.sha256 = "abc"
            try c.commit(u)
            try c.database.write { db in
                try db.execute("DROP TABLE expected_digests")
                try db.execute("PRAGMA user_version = \(Catalog.schemaVersion - 1)")
            }
        }
        let old = try Catalog(readOnlyPath: path)
        #expect(try old.expectedDigests(key: "k") == [] && old.allExpectedDigests().isEmpty)
        let c = try Catalog(path: path)
        #expect(try c.database.read { try $0.userVersion } == Catalog.schemaVersion)
        let e = try #require(try c.entry(key: "k"))
        #expect(e.isComplete && e.sha256 == "abc")
        #expect(try c.expectedDigests(key: "k") == [])
        // Now told: kept with the entry, the origin's gone with its version, all gone with the entry.
        let given = DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: Self.md5abc, source: .listLine(2)), matched: true, computed: Self.md5abc)
        let origin = DigestCheck(expected: ExpectedDigest(algorithm: .sha256, hex: Self.sha256abc, source: .origin(header: "Repr-Digest")))
        try c.recordDigestChecks(key: "k", [given, origin])
        #expect(try c.expectedDigests(key: "k") == [given, origin])
        #expect(try c.allExpectedDigests() == ["k": [given, origin]])
        try c.invalidate(key: "k", validators: Validators(length: 1000, etag: "\"f\"", lastModified: nil))
        #expect(try c.expectedDigests(key: "k") == [DigestCheck(expected: given.expected)])
        #expect(try c.removeEntries([(key: "k", lastUsed: e.lastUsed)], evenIfPinned: false) == ["k"])
        #expect(try c.database.read { c in var n: Int64 = -1; try c.query("SELECT count(*) FROM expected_digests") { n = $0.int(0) }; return n } == 0)
        // No row for an entry that is not there.
        try c.recordDigestChecks(key: "gone", [given])
        #expect(try c.expectedDigests(key: "gone") == [])
    }

    /// A damaged catalog's salvage keeps what each kept entry is expected to be.
    @Test func salvageKeepsTheExpectedDigestsOfTheEntriesItKeeps() throws {
        let old = try Catalog(path: dir.file("old.db"))
        var u = Catalog.Update(key: "k", url: "http://h/k", validators: Validators(length: 3, etag: "\"e\"", lastModified: nil))
        u.added = RangeSet([ByteRange(0, 3)])
        try old.commit(u)
        let check = DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: Self.md5abc, source: .option), matched: true, computed: Self.md5abc)
        try old.recordDigestChecks(key: "k", [check])
        let fresh = try Catalog(path: dir.file("new.db"))
        #expect(try fresh.salvage(from: dir.file("old.db")).kept == 1)
        #expect(try fresh.expectedDigests(key: "k") == [check])
    }

    /// Blocks written in order are hashed as they arrive, for every expected algorithm: the
    /// digests at completion are those of the bytes fed, even when `data` no longer holds them
    /// (so nothing was read back).
    @Test func expectedDigestsComeFromTheArrivingBlocksNotASecondRead() throws {
        let catalog = try Catalog(path: dir.file("c.db"))
        let data = try RawFile.open(dir.file("data"), flags: O_RDWR | O_CREAT)
        defer { data.close() }
        let body = TestBytes.make(1 << 20, seed: 81)
        let checkpointer = Checkpointer(catalog: catalog, key: "k", url: "http://h/k", data: data, committed: RangeSet())
        checkpointer.streamDigest(true, others: [.md5, .sha512])
        let validators = Validators(length: Int64(body.count), etag: "\"e\"", lastModified: nil)
        let block = Checkpointer.feedBufferSize
        for offset in stride(from: 0, to: body.count, by: block) {
            try body[offset..<offset + block].withUnsafeBytes { bytes in
                try data.write(bytes, toAbsoluteOffset: Int64(offset))
                checkpointer.feedDigest(bytes, at: Int64(offset))
            }
            checkpointer.submit(RangeSet([ByteRange(Int64(offset), Int64(offset + block))]), validators: validators, contentType: nil)
            checkpointer.drain()  // one block at a time: the hasher is never behind
        }
        // What a second read would see now is other bytes.
        try Data(count: body.count).withUnsafeBytes { try data.write($0, toAbsoluteOffset: 0) }
        let (states, others) = try checkpointer.queue.sync { try checkpointer.finalDigest(length: Int64(body.count), others: [.md5, .sha512]) }
        #expect(states.sha256 == TestBytes.sha256(body))
        #expect(others[.md5] == ChecksumTests.digest(.md5, body) && others[.sha512] == ChecksumTests.digest(.sha512, body))
        #expect(others[.md5] != ChecksumTests.digest(.md5, Data(count: body.count)))
    }

    /// A copy the hasher skipped (all its buffers were busy) costs a read of that gap only: the
    /// copies after it are still used. (It never caught up: every later byte was read back.)
    @Test func aHasherBehindReadsBackOnlyTheGapAndGoesOnWithTheCopies() throws {
        let catalog = try Catalog(path: dir.file("c.db"))
        let data = try RawFile.open(dir.file("data"), flags: O_RDWR | O_CREAT)
        defer { data.close() }
        let body = TestBytes.make(1 << 20, seed: 82)
        let checkpointer = Checkpointer(catalog: catalog, key: "k", url: "http://h/k", data: data, committed: RangeSet())
        checkpointer.streamDigest(true, others: [.md5])
        let block = Checkpointer.feedBufferSize
        var written = RangeSet()
        for offset in stride(from: 0, to: body.count, by: block) {
            try body[offset..<offset + block].withUnsafeBytes { bytes in
                try data.write(bytes, toAbsoluteOffset: Int64(offset))
                written.insert(ByteRange(Int64(offset), Int64(offset + block)))
                // The second block's copy is skipped, as when the hasher was busy.
                if offset != block { checkpointer.feedDigest(bytes, at: Int64(offset), written: written) }
            }
            checkpointer.drain()
        }
        // A read of the blocks after the gap would now see other bytes.
        try Data(count: 2 * block).withUnsafeBytes { try data.write($0, toAbsoluteOffset: Int64(2 * block)) }
        let (states, others) = try checkpointer.queue.sync { try checkpointer.finalDigest(length: Int64(body.count), others: [.md5]) }
        #expect(states.sha256 == TestBytes.sha256(body))
        #expect(others[.md5] == ChecksumTests.digest(.md5, body))
    }

    static func digest(_ algorithm: DigestAlgorithm, _ data: Data) -> String {
        let d = AlgorithmDigest(algorithm)
        data.withUnsafeBytes { d.update($0) }
        return d.finalize() ?? ""
    }
}
