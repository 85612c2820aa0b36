#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A playlist read back from the cache: the entry, its bytes (every one claimed by the catalog),
/// and the URL its relative URIs resolve against (`CacheStore.playlistBase`: the URL that
/// answered it, after redirects). The one way anything reads a cached playlist: prefetch
/// (expanding a stream, letting a live playlist go), serve (offline answers, a member's segment
/// check, renewed URLs), `check`, `ls`/`info` and `export`.
public struct CachedPlaylist: Sendable {
    public let entry: CacheEntry
    public let bytes: [UInt8]
    public let base: String

    /// The bytes parsed against `base`.
    public func parsed() throws(HLSParseError) -> HLSPlaylist {
        try HLSPlaylist.parse(bytes, url: base)
    }

    /// `parsed()`, nil when the bytes are no playlist vcache can read.
    public var playlist: HLSPlaylist? { try? parsed() }
}

extension CacheStore {
    /// The playlist entry `e` as cached: nil when its length is unknown or past
    /// `HLSPlaylist.maxBytes`, when the catalog does not claim every byte of it, or, with
    /// `complete` (the default), when the entry is not complete. An entry listed without its
    /// ranges (`Catalog.entries` for `ls`) is read again with them. `base` stands in for
    /// `playlistBase` when the caller knows the URL that answered (this run's fetch), or when the
    /// base does not matter (whether the playlist is live).
    public func cachedPlaylist(_ e: CacheEntry, keyRules: CacheKeyRules, complete: Bool = true, base: String? = nil) -> CachedPlaylist? {
        guard !complete || e.isComplete, let length = e.length, length <= Int64(HLSPlaylist.maxBytes) else { return nil }
        let entry = e.ranges.isEmpty ? ((try? catalog.entry(key: e.key)) ?? nil) : e
        guard let entry, let bytes = cachedBytes(of: entry) else { return nil }
        return CachedPlaylist(entry: entry, bytes: bytes, base: base ?? playlistBase(of: entry, bytes: bytes, keyRules: keyRules))
    }

    /// The playlist entry `key` as cached (`cachedPlaylist(_:keyRules:complete:base:)`).
    public func cachedPlaylist(key: CacheKey, keyRules: CacheKeyRules, complete: Bool = true) -> CachedPlaylist? {
        guard let e = (try? catalog.entry(key: key)) ?? nil else { return nil }
        return cachedPlaylist(e, keyRules: keyRules, complete: complete)
    }
}

/// A DASH MPD read back from the cache, as `CachedPlaylist` is an HLS playlist: the entry, its
/// bytes (every one claimed), and the URL that answered it (its BaseURLs resolve against it).
/// The one way `ls`/`info`, `export` and prefetch read a cached MPD.
public struct CachedMPD: Sendable {
    public let entry: CacheEntry
    public let bytes: [UInt8]
    public let base: String

    public func parsed() throws(DASHError) -> MPD { try MPD.parse(bytes, url: base) }
    public var mpd: MPD? { try? parsed() }
}

extension CacheStore {
    /// The MPD entry `e` as cached: nil when its length is unknown or past `MPD.maxBytes`, when
    /// the catalog does not claim every byte of it, or, with `complete`, when it is not complete.
    public func cachedMPD(_ e: CacheEntry, complete: Bool = true) -> CachedMPD? {
        guard !complete || e.isComplete, let length = e.length, length <= Int64(MPD.maxBytes) else { return nil }
        let entry = e.ranges.isEmpty ? ((try? catalog.entry(key: e.key)) ?? nil) : e
        guard let entry, let bytes = cachedBytes(of: entry) else { return nil }
        return CachedMPD(entry: entry, bytes: bytes, base: ((try? catalog.finalURL(of: entry.key)) ?? nil) ?? entry.latestURL)
    }
}
