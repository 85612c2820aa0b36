#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Serve's care of a stream's members (Docs/hls.md), known from the stream tables prefetch and
/// serve record: a segment, init section or key is stored only when it passes the check prefetch
/// makes of it (`HLSMemberCheck`: a segment's first bytes, an AES-128 key's or segment's
/// length), and a member whose signed URL the origin refuses (401/403) is fetched under the URL
/// its media playlist names now.
extension Proxy {
    /// How the entry `key` is checked before it is stored: a member of role segment, init section
    /// or key, as the first cached media playlist naming it says (`HLSMediaPlaylist.memberCheck`,
    /// as prefetch decides it). Nil for an entry of no stream, and for a member no playlist
    /// cached whole names (its encryption is unknown). A segment or init segment of a DASH
    /// stream (an MPD prefetch or serve recorded) is checked as prefetch checks it
    /// (`.dashSegment`: fMP4, MPEG-TS, packed audio, WebVTT or TTML).
    func memberCheck(_ key: CacheKey) -> HLSMemberCheck? {
        let rules = readThrough.options.keyRules, store = readThrough.store
        guard let (role, playlists) = (try? store.catalog.playlists(naming: key)) ?? nil,
              role == .segment || role == .initSection || role == .key else { return nil }
        if role != .key, playlists.contains(where: { ((try? store.catalog.streamFormat(root: $0)) ?? nil) == "dash" }) { return .dashSegment }
        for p in playlists {
            if case .media(let media)? = store.cachedPlaylist(key: p, keyRules: rules)?.playlist,
               let check = media.memberCheck(where: { rules.key(for: $0) == key }) {
                return check
            }
        }
        return nil
    }

    /// Whether the entry `key` is a stream's segment, init section or key (a playlist named it).
    func isMember(_ key: CacheKey) -> Bool {
        guard let (role, _) = (try? readThrough.store.catalog.playlists(naming: key)) ?? nil else { return false }
        return role != .playlist
    }

    /// The URL the stream member at `url` has now, when the origin refused it (an expired signed
    /// URL): the media playlists of its stream that name it are fetched again, fresh, and the
    /// member they name under the same key (the key rules strip the token) is the answer. Nil
    /// when `url` is no stream member, or no playlist names it under another URL now.
    func renewedURL(for url: String) -> String? {
        let rules = readThrough.options.keyRules, catalog = readThrough.store.catalog
        let key = rules.key(for: url)
        guard let (role, playlists) = (try? catalog.playlists(naming: key)) ?? nil, role != .playlist else { return nil }
        let named = { (u: String) in rules.key(for: u) == key }
        // Those whose cached copy names it first; a master's copy names no segment: never asked.
        var naming: [CacheKey] = [], unknown: [CacheKey] = []
        for p in playlists {
            switch readThrough.store.cachedPlaylist(key: p, keyRules: rules)?.playlist {
            case .media(let m)?: if HLSPlaylist.media(m).members.contains(where: { named($0.url) }) { naming.append(p) }
            case .master?: break
            case nil: unknown.append(p)
            }
        }
        for p in (naming + unknown).prefix(8) {
            // Only origins serve may ask (--allow-host): prefetch may have recorded any.
            guard let e = (try? catalog.entry(key: p)) ?? nil, mayAsk(e.latestURL),
                  let fresh = SmallGet.get(e.latestURL, options: readThrough.options.request, limit: HLSPlaylist.maxBytes), fresh.status == 200,
                  case .media(let media)? = try? HLSPlaylist.parse(fresh.body, url: fresh.finalURL) else { continue }
            try? catalog.recordFinalURL(key: p, url: fresh.finalURL)
            if let m = HLSPlaylist.media(media).members.first(where: { named($0.url) }), m.url != url, mayAsk(m.url) { return m.url }
        }
        return nil
    }

    /// Whether serve may ask `url` of its own accord: what a player's URL must pass in `handle`
    /// (an http(s) URL libcurl takes, an origin `--allow-host` allows).
    func mayAsk(_ url: String) -> Bool {
        guard PrefetchItem.urlProblem(url) == nil else { return false }
        guard let allowed = allowedOrigins else { return true }
        return OriginTarget.of(url).map { allowed.allows($0) } ?? false
    }

    /// `readThrough.open`, a segment's first bytes checked; a stream member the origin refuses
    /// (401, 403) is opened under its renewed URL (`renewedURL`) when there is one.
    func openMember(_ url: String) throws(ReadThrough.OpenError) -> ReadThrough.Video {
        let key = readThrough.options.keyRules.key(for: url)
        lazyMember(url, key: key)
        do {
            return try readThrough.open(url, memberCheck: { self.memberCheck(key) }, isMember: { self.isMember(key) })
        } catch {
            guard case .origin(let status, _) = error, status == 401 || status == 403, let renewed = renewedURL(for: url) else { throw error }
            return try readThrough.open(renewed, memberCheck: { self.memberCheck(key) }, isMember: { self.isMember(key) })
        }
    }

    /// A reader of `range` of `video` under its renewed URL, its first bytes ready, after the
    /// origin refused its URL with `status` (401, 403); nil when there is none, it names another
    /// version, or it fails too.
    func renewedReader(_ video: ReadThrough.Video, range: ByteRange, refused status: Int) -> RangeReader? {
        guard status == 401 || status == 403, let url = renewedURL(for: video.url),
              let renewed = try? readThrough.open(url, memberCheck: { self.memberCheck(video.key) }) else { return nil }
        guard renewed.length == video.length, renewed.validators == video.validators else { return nil }
        let reader = readThrough.reader(renewed, range: range)
        guard reader.prepare() == nil else {
            reader.finished(completed: false)
            return nil
        }
        return reader
    }
}

extension Proxy {
    /// A playlist serve did not answer as one leaves no entry cached in part: a playlist is
    /// answered only from a copy cached whole, so a head is of no use, and an error page or a
    /// playlist too big to read must not stay a plain entry (Docs/hls.md). A copy cached whole
    /// stays (the offline answer), as does a pinned entry or a stream's root.
    func forgetPartialPlaylist(_ video: ReadThrough.Video) {
        let store = readThrough.store
        // This request's own hold on `data` (its snapshot, of no use to a playlist answer) goes
        // first (RawFile closes once).
        video.snapshot.file?.close()
        guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, !e.isComplete, !e.pinned,
              ((try? store.catalog.stream(root: video.key)) ?? nil) == nil else { return }
        var c = Evictor.Criteria()
        c.keys = [video.key]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
    }
}
