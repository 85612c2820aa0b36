#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CacheStore {
    /// What a cached playlist's relative URIs resolve against (RFC 8216 §4.1: the URL that
    /// answered it, after redirects). Since migration 4 the catalog records that URL
    /// (`final_urls`); a playlist cached before has none, and for one that was redirected the
    /// URL asked for (`latest_url`) resolves its segments to URLs never fetched: a stream warmed
    /// by the earlier vcache would not play offline, export or check after the upgrade.
    ///
    /// Then the base is found from what is stored: the stream's recorded members are what this
    /// very playlist named, resolved against its final URL. A URI the playlist names relative to
    /// the URL asked for (`http://o/abr/180p/index.m3u8`) and a member whose URL ends the same way
    /// (`http://o/moved/abr/180p/index.m3u8`) give the folder it was answered from; the candidate
    /// under which the most of what it names are members wins, the URL asked for on a tie. The
    /// base found (or the URL asked for, once it explains every member) is recorded, best effort,
    /// so this runs once per playlist.
    /// `bytes`: the cached playlist.
    public func playlistBase(of e: CacheEntry, bytes: [UInt8], keyRules: CacheKeyRules) -> String {
        if let recorded = (try? catalog.finalURL(of: e.key)) ?? nil { return recorded }
        let asked = e.latestURL
        guard let members = try? catalog.streamKeys(containing: e.key), members.count > 1 else { return asked }
        let stream = Set(members)
        func named(_ base: String) -> [String] {
            guard let p = try? HLSPlaylist.parse(bytes, url: base) else { return [] }
            var seen = Set<String>()
            return p.members.map(\.url).filter { seen.insert($0).inserted }
        }
        func score(_ base: String) -> Int { named(base).filter { stream.contains(keyRules.key(for: $0)) }.count }
        let urls = named(asked)
        let best = score(asked)
        guard !urls.isEmpty else { return asked }
        guard best < urls.count else {
            // Everything it names is the stream's: it was not redirected. Said once for all.
            try? catalog.recordFinalURL(key: e.key, url: asked)
            return asked
        }
        // Relative URIs, as resolved against the URL asked for: what follows its folder.
        func withoutQuery(_ u: String) -> String { String(u.prefix { $0 != "?" && $0 != "#" }) }
        let folder = withoutQuery(asked).split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/"
        let leaf = String(withoutQuery(asked).dropFirst(folder.count))
        let suffixes = urls.map(withoutQuery).filter { $0.hasPrefix(folder) && $0.count > folder.count }.map { String($0.dropFirst(folder.count)) }.prefix(8)
        guard !suffixes.isEmpty else { return asked }
        var found = (url: asked, score: best)
        var tried = Set<String>()
        let explained = Set(urls.map { keyRules.key(for: $0) } + [e.key])
        let others = members.filter { !explained.contains($0) }
        var start = 0
        while start < others.count, found.score < urls.count, tried.count < 32 {
            let chunk = Array(others[start..<min(others.count, start + 32)])
            start += chunk.count
            guard let entries = try? catalog.entries(keys: chunk) else { break }
            for key in chunk {
                guard let m = entries[key].map({ withoutQuery($0.latestURL) }) else { continue }
                for suffix in suffixes where m.hasSuffix("/" + suffix) {
                    let candidate = String(m.dropLast(suffix.count)) + leaf
                    guard candidate != asked, tried.insert(candidate).inserted else { continue }
                    let s = score(candidate)
                    if s > found.score { found = (candidate, s) }
                }
            }
        }
        if found.url != asked { try? catalog.recordFinalURL(key: e.key, url: found.url) }
        return found.url
    }

    /// `playlistBase` of a playlist entry whose bytes are to be read from the cache.
    public func playlistBase(of e: CacheEntry, keyRules: CacheKeyRules) -> String {
        if let recorded = (try? catalog.finalURL(of: e.key)) ?? nil { return recorded }
        return cachedPlaylist(e, keyRules: keyRules, complete: false)?.base ?? e.latestURL
    }
}
