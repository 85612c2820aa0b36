#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which of a manifest's URLs name a cached entry, for `ls`, `info` and `check` of a stream whose
/// manifest names a million segments of which a few are cached: a URL's key (URL parsing,
/// normalising, SHA-256) and its catalog row cost microseconds each, so a URL is keyed only
/// when the last segment of its path (percent-decoded) is that of some cached entry's URL,
/// read once for the whole cache (keys only ever change a URL's scheme, host, port, query and
/// fragment, never its path). What passes is read as before: the stream's members from
/// `byKey`, any other entry from the catalog, each key once.
struct CachedURLIndex {
    let keyRules: CacheKeyRules
    let catalog: Catalog
    let byKey: [CacheKey: CacheEntry]
    /// Nil: the names could not be read, so every URL is keyed (slower, same answers).
    let names: Set<String>?
    private var found: [String: CacheEntry?] = [:]

    init(keyRules: CacheKeyRules, catalog: Catalog, byKey: [CacheKey: CacheEntry], names: Set<String>?) {
        self.keyRules = keyRules
        self.catalog = catalog
        self.byKey = byKey
        self.names = names
    }

    /// The last names of every entry's URLs (as first asked and as last asked): one query.
    static func names(in catalog: Catalog) -> Set<String>? {
        guard let urls = try? catalog.allURLs() else { return nil }
        var out = Set<String>()
        for u in urls { out.insert(lastName(u)) }
        return out
    }

    /// The cached entry `url` names, or nil.
    mutating func entry(_ url: String) -> CacheEntry? {
        if let names, !names.contains(Self.lastName(url)) { return nil }
        if let known = found[url] { return known }
        let key = keyRules.key(for: url)
        let e = byKey[key] ?? ((try? catalog.entry(key: key)) ?? nil)
        found[url] = e
        return e
    }

    /// The cached entry `url` names holds `range` (nil: the whole file, complete).
    mutating func holds(_ url: String, _ range: MPD.ByteSpan?) -> Bool {
        guard let e = entry(url) else { return false }
        if let range { return e.ranges.contains(ByteRange(range.first, range.last + 1)) }
        return e.isComplete
    }

    /// The text after the path's last `/`, before any `?` or `#`, percent-decoded.
    static func lastName(_ url: String) -> String {
        var end = url.utf8.endIndex
        if let cut = url.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { end = cut }
        var path = url.utf8[..<end]
        if let scheme = Substring(path).firstRange(of: "://") {
            // Past the authority: a URL with no path has the name "" (its key's path is "/").
            let rest = path[scheme.upperBound...]
            guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return "" }
            path = path[slash...]
        }
        let start = path.lastIndex(of: UInt8(ascii: "/")).map { path.index(after: $0) } ?? path.startIndex
        let name = Substring(url.utf8[start..<end])
        guard name.utf8.contains(UInt8(ascii: "%")) else { return String(name) }
        return PercentCoding.decode(String(name)) ?? String(name)
    }
}
