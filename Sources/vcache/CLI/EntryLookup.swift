#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `URL|KEY` arguments: a 64-hex-digit key of an existing entry, else a URL keyed by the config's rules.
enum EntryLookup {
    static func key(for arg: String, store: CacheStore) -> CacheKey? {
        if let key = CacheKey(arg), (try? store.catalog.entry(key: key)) ?? nil != nil { return key }
        guard let url = URL(string: arg), url.scheme != nil else { return nil }
        let key = Settings.keyRules(store: store).key(for: url)
        return ((try? store.catalog.entry(key: key)) ?? nil) != nil ? key : nil
    }

    /// An argument that names no cached entry (exit 1, error kind `not_found`).
    struct NotCached: Error, CustomStringConvertible {
        var argument: String
        var description: String { "not in the cache: \(argument); see 'vcache ls'" }
    }

    /// Keys for all arguments, or the error naming the first that is not cached.
    static func keys(for args: [String], store: CacheStore) -> Result<[CacheKey], NotCached> {
        var keys: [CacheKey] = []
        for a in args {
            guard let k = key(for: a, store: store) else {
                return .failure(NotCached(argument: a))
            }
            keys.append(k)
        }
        return .success(keys)
    }
}
