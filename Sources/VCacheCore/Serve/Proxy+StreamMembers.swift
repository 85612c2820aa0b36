import Foundation

/// Serve's care of a stream's members (Docs/hls.md), known from the stream tables prefetch and
/// serve record: a segment or init section is stored only when its first bytes are one (as
/// prefetch checks them).
extension Proxy {
    /// Whether the entry `key` must look like a segment to be stored: a member of role segment or
    /// init section, judged as the cached media playlist naming it says (`checksSegment`: not a
    /// segment under AES-128, whose ciphertext looks like nothing). False for an entry of no
    /// stream, and for a segment no playlist cached whole names (its encryption is unknown).
    func isSegment(_ key: String) -> Bool {
        let rules = readThrough.options.keyRules
        guard let (role, playlists) = (try? readThrough.store.catalog.playlists(naming: key)) ?? nil,
              role == .segment || role == .initSection else { return false }
        for p in playlists {
            if case .media(let media)? = cachedPlaylist(p), let check = media.checksSegment(where: { rules.key(for: $0) == key }) {
                return check
            }
        }
        return false
    }

    /// The playlist `key` as cached whole, parsed against the URL that answered it; nil when it
    /// is not cached whole or does not parse.
    func cachedPlaylist(_ key: String) -> HLSPlaylist? {
        let store = readThrough.store
        guard let e = (try? store.catalog.entry(key: key)) ?? nil, e.isComplete, let length = e.length,
              length <= Int64(HLSPlaylist.maxBytes), let bytes = store.cachedBytes(of: e) else { return nil }
        return try? HLSPlaylist.parse(bytes, url: store.catalog.baseURL(of: e))
    }

    /// `readThrough.open`, a segment's first bytes checked when they are fetched.
    func openMember(_ url: String) throws(ReadThrough.OpenError) -> ReadThrough.Video {
        let key = readThrough.options.keyRules.key(for: url)
        return try readThrough.open(url, isSegment: { self.isSegment(key) })
    }
}
