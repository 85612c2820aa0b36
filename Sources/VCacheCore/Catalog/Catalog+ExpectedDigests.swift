#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An expected digest as the catalog keeps it: what was expected, and what the complete entry's
/// bytes gave (`matched` nil: not checked yet, since it was given or since the version changed).
public struct DigestCheck: Equatable, Sendable {
    public var expected: ExpectedDigest
    public var matched: Bool?
    /// The digest computed when it was checked (lowercase hex).
    public var computed: String?

    public init(expected: ExpectedDigest, matched: Bool? = nil, computed: String? = nil) {
        self.expected = expected
        self.matched = matched
        self.computed = computed
    }
}

/// The `expected_digests` table (schema migration "Expected digests"): given digests are kept
/// across versions (the operator's word about the file), the origin's only for the version they
/// came with (`invalidate` drops them); both lose their outcome when the version changes.
extension Catalog {
    /// The entry's expected digests, given ones first, by algorithm. A row that does not read as
    /// one (an unknown algorithm, a value of the wrong size: a hand-edited catalog) is skipped.
    public func expectedDigests(key: CacheKey) throws -> [DigestCheck] {
        try database.read { c in
            guard try Self.hasExpectedDigests(c) else { return [] }
            var out: [DigestCheck] = []
            try c.query("""
                SELECT algorithm, value, source, matched, computed, given FROM expected_digests WHERE key = ?
                ORDER BY given DESC, algorithm
                """, .key(key)) { r in
                if let check = Self.digestCheck(r) { out.append(check) }
            }
            return out
        }
    }

    /// Every entry's expected digests, by key (for `ls`).
    public func allExpectedDigests() throws -> [CacheKey: [DigestCheck]] {
        try database.read { c in
            guard try Self.hasExpectedDigests(c) else { return [:] }
            var out: [CacheKey: [DigestCheck]] = [:]
            try c.query("""
                SELECT algorithm, value, source, matched, computed, given, key FROM expected_digests ORDER BY key, given DESC, algorithm
                """) { r in
                if let check = Self.digestCheck(r) { out[r.key(6), default: []].append(check) }
            }
            return out
        }
    }

    /// Records the outcome of checks on the entry's bytes (upserting the rows), when the entry
    /// still has a row (a first fetch that failed before its first commit has none).
    public func recordDigestChecks(key: CacheKey, _ checks: [DigestCheck]) throws {
        try database.write { c in
            var exists = false
            try c.query("SELECT 1 FROM entries WHERE key = ?", .key(key)) { _ in exists = true }
            guard exists else { return }
            for check in checks { try Self.insertExpectation(c, key: key, check) }
        }
    }

    /// Replaces every expected digest of the entry with `checks` (inside a commit).
    static func replaceExpectations(_ c: Connection, key: CacheKey, _ checks: [DigestCheck]) throws {
        try c.run("DELETE FROM expected_digests WHERE key = ?", .key(key))
        for check in checks { try insertExpectation(c, key: key, check) }
    }

    private static func insertExpectation(_ c: Connection, key: CacheKey, _ check: DigestCheck) throws {
        let e = check.expected
        try c.run("""
            INSERT OR REPLACE INTO expected_digests (key, given, algorithm, value, source, matched, computed)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, .key(key), .int(e.source.isGiven ? 1 : 0), .text(e.algorithm.rawValue), .text(e.hex), .text(e.source.description),
            .optional(check.matched.map { $0 ? Int64(1) : 0 }), .optional(check.computed))
    }

    /// The version changed: the origin's digests were of the old one, and no outcome stands.
    static func forgetVersionDigests(_ c: Connection, key: CacheKey) throws {
        try c.run("DELETE FROM expected_digests WHERE key = ? AND given = 0", .key(key))
        try c.run("UPDATE expected_digests SET matched = NULL, computed = NULL WHERE key = ?", .key(key))
    }

    /// A catalog opened read-only may predate the table.
    private static func hasExpectedDigests(_ c: Connection) throws -> Bool {
        var found = false
        try c.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'expected_digests'") { _ in found = true }
        return found
    }

    /// A row selected as algorithm, value, source, matched, computed, given; nil when it is not one.
    private static func digestCheck(_ r: Row) -> DigestCheck? {
        guard let algorithm = DigestAlgorithm(rawValue: r.text(0)) else { return nil }
        let value = r.text(1)
        guard value.utf8.count == algorithm.byteCount * 2, let hex = ExpectedDigest.hex(value) else { return nil }
        var source = ExpectedDigest.Source(description: r.text(2))
        let given = r.int(5) != 0
        // The column decides which kind it is, whatever the text says.
        if given != source.isGiven { source = given ? .option : .origin(header: r.text(2)) }
        let computed = r.optionalText(4).flatMap { $0.utf8.count == algorithm.byteCount * 2 ? ExpectedDigest.hex($0) : nil }
        return DigestCheck(expected: ExpectedDigest(algorithm: algorithm, hex: hex, source: source),
                           matched: r.optionalInt(3).map { $0 != 0 }, computed: computed)
    }
}
