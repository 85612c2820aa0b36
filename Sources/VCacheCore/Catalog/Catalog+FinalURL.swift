import Foundation

/// The URL that last answered a playlist, after redirects (migration 4): RFC 8216 §4.1 resolves
/// its relative URIs against it, so a cached copy read offline resolves to the same keys its
/// segments were stored under. `latest_url` is the URL asked for, before redirects.
extension Catalog {
    /// Records that `url` answered the entry `key` (after redirects). Nothing is written when the
    /// catalog already says so, or when the entry is gone (the row would go with it).
    public func recordFinalURL(key: String, url: String) throws {
        guard schema >= Self.finalURLsSchema, try finalURL(of: key) != url else { return }
        try database.write { c in
            try c.run("""
                INSERT INTO final_urls (key, url) SELECT key, ? FROM entries WHERE key = ?
                ON CONFLICT(key) DO UPDATE SET url = excluded.url
                """, .text(url), .text(key))
        }
    }

    /// The URL that last answered `key` after redirects, when one was recorded.
    public func finalURL(of key: String) throws -> String? {
        guard schema >= Self.finalURLsSchema else { return nil }
        return try database.read { c in
            var url: String?
            try c.query("SELECT url FROM final_urls WHERE key = ?", .text(key)) { url = $0.text(0) }
            return url
        }
    }

    /// What a cached playlist's relative URIs resolve against: its final URL, else the URL it
    /// was last fetched by.
    public func baseURL(of entry: CacheEntry) -> String {
        ((try? finalURL(of: entry.key)) ?? nil) ?? entry.latestURL
    }
}
