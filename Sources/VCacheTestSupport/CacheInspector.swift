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

    /// SHA-256 of the entry's `data` file, or nil when there is none.
    public func dataSHA256(_ url: String) throws -> String? {
        guard let e = try entry(url) else { return nil }
        return TestBytes.sha256(file: store.dataPath(e.key))
    }
}
