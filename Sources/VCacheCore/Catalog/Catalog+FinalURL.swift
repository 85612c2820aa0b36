#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The URL that last answered a playlist, after redirects (migration 4): RFC 8216 §4.1 resolves
/// its relative URIs against it, so a cached copy read offline resolves to the same keys its
/// segments were stored under. `latest_url` is the URL asked for, before redirects.
extension Catalog {
    /// Records that `url` answered the entry `key` (after redirects). Nothing is written when the
    /// catalog already says so, or when the entry is gone (the row would go with it).
    public func recordFinalURL(key: CacheKey, url: String) throws {
        guard schema >= Self.finalURLsSchema, try finalURL(of: key) != url else { return }
        try database.write { c in
            try c.run("""
                INSERT INTO final_urls (key, url) SELECT key, ? FROM entries WHERE key = ?
                ON CONFLICT(key) DO UPDATE SET url = excluded.url
                """, .text(url), .key(key))
        }
    }

    /// The URL that last answered `key` after redirects, when one was recorded.
    public func finalURL(of key: CacheKey) throws -> String? {
        guard schema >= Self.finalURLsSchema else { return nil }
        return try database.read { c in
            var url: String?
            try c.query("SELECT url FROM final_urls WHERE key = ?", .key(key)) { url = $0.text(0) }
            return url
        }
    }

    /// What a cached playlist's relative URIs resolve against as far as the catalog says: its
    /// final URL, else the URL it was last fetched by. (A playlist cached before migration 4 has
    /// no final URL: `CacheStore.playlistBase` finds it from the stream's members.)
    public func baseURL(of entry: CacheEntry) -> String {
        ((try? finalURL(of: entry.key)) ?? nil) ?? entry.latestURL
    }

    /// The keys of the streams `key` belongs to (several when streams share it): each root's and
    /// every member's, each once; empty when it belongs to none (or the catalog is older than streams).
    public func streamKeys(containing key: CacheKey) throws -> [CacheKey] {
        guard schema >= Self.streamsSchema else { return [] }
        return try database.read(snapshot: true) { c in
            var roots: [CacheKey] = []
            try c.query("SELECT root FROM stream_members WHERE key = ? ORDER BY root", .key(key)) { roots.append($0.key(0)) }
            if roots.isEmpty { try c.query("SELECT root FROM streams WHERE root = ?", .key(key)) { roots.append($0.key(0)) } }
            var keys = roots
            for root in roots {
                try c.query("SELECT key FROM stream_members WHERE root = ? AND key != root", .key(root)) { k in
                    if !keys.contains(k.key(0)) { keys.append(k.key(0)) }
                }
            }
            return keys
        }
    }
}
