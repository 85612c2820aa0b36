import Foundation
import VCacheCore

/// Reads a cache the way a test checks it: what the catalog claims, against the origin's bytes.
public struct CacheInspector {
    public let store: CacheStore

    public init(directory: String) throws { store = try CacheStore(directory: directory) }
    public init(store: CacheStore) { self.store = store }

    public func entry(_ url: String) throws -> CacheEntry? {
        try store.catalog.entry(key: CacheKeyRules().key(for: URL(string: url)!))
    }

    /// Every range the catalog claims holds exactly the origin's bytes at those offsets.
    /// Returns the claimed byte count, or nil (with the first mismatch) when a claim is false.
    public func verifyClaims(_ url: String, origin: Data) throws -> (claimed: Int64, mismatch: ByteRange?) {
        guard let e = try entry(url) else { return (0, nil) }
        let data = (try? Data(contentsOf: URL(fileURLWithPath: store.dataPath(e.key)))) ?? Data()
        for r in e.ranges.ranges {
            guard r.upperBound <= Int64(data.count), r.upperBound <= Int64(origin.count),
                  data[Int(r.lowerBound)..<Int(r.upperBound)] == origin[Int(r.lowerBound)..<Int(r.upperBound)] else {
                return (e.ranges.count, r)
            }
        }
        return (e.ranges.count, nil)
    }

    /// What is inconsistent between the stream tables, the entries and the entry folders (none
    /// expected once every process is done): a stream whose root entry is gone, a member row of
    /// no stream, an entry folder with no row.
    public func consistencyProblems() throws -> [String] {
        var problems: [String] = []
        try store.catalog.database.read { c in
            try c.query("SELECT root FROM streams WHERE root NOT IN (SELECT key FROM entries)") { problems.append("stream \($0.text(0)) without its root entry") }
            try c.query("SELECT key, root FROM stream_members WHERE root NOT IN (SELECT root FROM streams)") {
                problems.append("member \($0.text(0)) of no stream (\($0.text(1)))")
            }
        }
        let known = Set(try store.catalog.allEntries().map(\.key.hex))
        let root = store.directory + "/entries"
        for shard in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for key in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + shard)) ?? [] where !known.contains(key) {
                problems.append("folder \(key) without a row")
            }
        }
        return problems
    }

    /// SHA-256 of the entry's `data` file, or nil when there is none.
    public func dataSHA256(_ url: String) throws -> String? {
        guard let e = try entry(url) else { return nil }
        return TestBytes.sha256(file: store.dataPath(e.key))
    }
}
