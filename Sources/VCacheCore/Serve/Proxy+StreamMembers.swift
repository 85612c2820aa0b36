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

/// A stream's manifest the origin answers as another version than the copy cached whole (a
/// re-encode in place): serve keeps the invariant prefetch keeps (Docs/dash.md, "Invariant"): a
/// stream is never served or completed from members of two manifest versions.
extension Proxy {
    /// Takes the new version of the stream `root`'s manifest: under the stream's lock (never
    /// waiting: a prefetch holding it is completing the stream), every entry among `old` (what
    /// the cached version named) that holds bytes is dropped and released from the stream BEFORE
    /// `keep` stores the new manifest over the old, as `Prefetcher.revalidated` does, so a kill at
    /// any point leaves the old manifest with some of its members or the new one with none of
    /// them. When the lock is busy, an entry cannot be dropped (another process writes it), or the
    /// new manifest cannot be kept (the old one is then dropped too, so nothing names the new
    /// members as old), `new` (what the player reads from the new manifest) is passed through
    /// from the origin, never read from nor stored in the cache (`passThrough`), until a later
    /// answer finds the cached copy the version the origin serves. Returns whether it was kept.
    /// `manifest`: the manifest answered (the root, or a media playlist of the master `root`).
    @discardableResult
    func takeNewVersion(root: CacheKey, manifest: CacheKey? = nil, old: [CacheKey], new: [StreamRecord.Member], keep: () -> Bool) -> Bool {
        let store = readThrough.store, manifest = manifest ?? root
        guard let lock = (try? store.tryLockStream(root: root)) ?? nil else {
            passThroughLater(manifest: manifest, new)
            return false
        }
        defer { store.releaseStreamLock(lock, root: root) }
        let members = old.filter { $0 != root && $0 != manifest }
        let held = ((try? store.catalog.entries(keys: members)) ?? [:]).filter { !$0.value.ranges.isEmpty }
        for k in held.keys.sorted(by: { $0.hex < $1.hex }) where !readThrough.dropCachedBytes(key: k) {
            passThroughLater(manifest: manifest, new)
            return false
        }
        try? store.catalog.releaseMembers(members, root: root)
        guard keep() else {
            // The old manifest must not stay over members the player fetches from the new one.
            if !readThrough.dropCachedBytes(key: manifest) { passThroughLater(manifest: manifest, new) }
            return false
        }
        versionKept(manifest)
        return true
    }

    /// The cached copy of `manifest` is the version the origin serves: what its answers named
    /// is no longer passed through.
    func versionKept(_ manifest: CacheKey) {
        unstored.withLock { if $0[manifest] != nil { $0[manifest] = nil } }
    }

    /// What `manifest`'s answer named, passed through from now on (`unstoredMember`).
    func passThroughLater(manifest: CacheKey, _ members: [StreamRecord.Member]) {
        unstored.withLock { u in
            var roles = u[manifest] ?? [:]
            for m in members where m.key != manifest { roles[m.key] = m.role }
            u[manifest] = roles
        }
    }

    /// The role of `key` in a manifest a player read in a version not cached (`takeNewVersion`),
    /// and that manifest; nil when it is none.
    func unstoredMember(_ key: CacheKey) -> (manifest: CacheKey, role: StreamRole)? {
        unstored.withLock { u in
            for (manifest, roles) in u { if let role = roles[key] { return (manifest, role) } }
            return nil
        }
    }

    /// The answer for a member of a stream whose new manifest could not be stored: the origin's
    /// answer as it is, never read from nor stored in the cache (a segment of the new encode
    /// must not be kept under the old manifest, nor an old one served under the new), whole or
    /// the span asked (held in memory: up to `passThroughLimit`).
    func passThrough(_ request: HTTPServer.Request, origin: String) -> (response: HTTPServer.Response, fromOrigin: Int64, note: String) {
        let why = "a member of a stream whose manifest changed on the origin while another vcache process holds the stream: passed through, not stored"
        let a: SmallGet.Answer
        switch SmallGet.fetch(origin, options: readThrough.options.request, limit: Self.passThroughLimit) {
        case .answer(let x): a = x
        case .tooLarge:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0,
                    "\(why); larger than the \(Units.formatSize(Int64(Self.passThroughLimit))) passed through whole")
        case .failed:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, "\(why); the origin could not be reached")
        }
        guard a.status == 200 else {
            return (HTTPServer.Response(status: Self.relayedStatus(a.status), headers: Self.inert), 0, "\(why); the origin answered \(a.status)")
        }
        let body = Array(a.body), length = Int64(body.count)
        let name = PercentCoding.decode(PathText.lastPathComponent(request.path)) ?? ""
        var headers: [(String, String)] = [("Accept-Ranges", "bytes"), ("X-Cache", CacheStatus.miss.rawValue),
                                           ("Content-Type", ProxyURL.safeContentType(ProxyURL.contentType(origin: a.contentType, name: name)))]
        var status = 200, span = ByteRange(0, length)
        switch RangeHeader(request.headers["range"], length: length) {
        case .whole: break
        case .span(let r):
            (status, span) = (206, r)
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(length)"))
        case .unsatisfiable:
            return (HTTPServer.Response(status: 416, headers: headers + [("Content-Range", "bytes */\(length)")] + Self.inert), 0, why)
        }
        let out = Array(body[Int(span.lowerBound)..<Int(span.upperBound)])
        return (HTTPServer.Response(status: status, headers: headers + Self.inert, body: .bytes(out)), Int64(out.count), why)
    }

    /// The most of a passed-through member held in memory.
    static let passThroughLimit = 256 << 20
}
