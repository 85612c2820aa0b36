#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// HLS through the proxy (Docs/hls.md): a playlist is answered rewritten, every URI in it (URI
/// lines, and `URI="..."` of keys, maps, renditions, I-frame streams) pointing at the proxy, so a
/// player fetches segments, init sections and keys through the cache and plays them offline.
extension Proxy {
    /// The answer for a playlist, or nil when `video` is not one (then it is served as bytes).
    /// A playlist is fetched fresh from the origin each time (a live one must never be served
    /// stale; one fetched less than half its target duration ago is answered from that fetch),
    /// resolved against the URL that answered after redirects; when the origin cannot be
    /// reached, the cached copy is used (offline playback).
    /// `cache` is nil when the answer is the origin's error, not a playlist.
    /// `peeked`: the video's first bytes as `peekHead` read them.
    func playlistAnswer(_ request: HTTPServer.Request, origin: String, video: ReadThrough.Video, peeked: [UInt8]? = nil) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String)? {
        let cached = cachedHead(video, count: 16, peeked: peeked)
        // A URL named like a playlist is asked for fresh too, whatever is cached under it (an
        // error page cached there must not hide the playlist the origin now serves); what is a
        // playlist is still decided by the answer's content.
        let named = Self.pathExtension(origin) == "m3u8"
        guard named || HLSPlaylist.looksLikePlaylist(firstBytes: cached ?? [], contentType: video.contentType) else { return nil }
        var text: String?, finalURL = origin, status: CacheStatus = .miss, parsedFresh: HLSPlaylist?, version: NewVersion?
        // One origin fetch at a time per playlist, shared by the players asking meanwhile; a live
        // one answered from its copy for half its target duration (`LivePlaylists`). The fetching
        // request alone acts on what came, before the others are woken.
        let shared = livePlaylists.answer(origin) {
            let asked = ContinuousClock.now
            let outcome = SmallGet.fetch(origin, options: readThrough.options.request, limit: HLSPlaylist.maxBytes)
            guard case .answer(let fresh) = outcome, fresh.status == 200,
                  HLSPlaylist.looksLikePlaylist(firstBytes: fresh.body.prefix(16), contentType: fresh.contentType) else { return (outcome, nil) }
            let now = try? HLSPlaylist.parse(fresh.body, url: fresh.finalURL)
            if let (master, role) = unstoredMember(video.key), role == .playlist {
                // Named by a master whose new version is not stored: what it names is passed
                // through too (until that master's is), and its cached copy (the old version's)
                // left as it is.
                if let now { passThroughLater(manifest: master, now.members.map { StreamRecord.Member(key: readThrough.options.keyRules.key(for: $0.url), role: $0.role) }) }
                return (outcome, now)
            }
            if let now {
                version = keepAnswerPlaylist(video, now: now, fresh: fresh, url: origin)
                // What the answer says of members stored before its request began (`Proxy+Confirm`).
                switch version {
                case .taken?: manifestAnswered(video.key, roots: [video.key], at: asked, taken: true)
                case nil: if case .media(let m) = now, m.isLive {} else { manifestAnswered(video.key, roots: [video.key], at: asked, taken: false) }
                case .passedThrough?: break
                }
            } else {
                // Kept for offline: the cached copy's relative URIs resolve against it too.
                try? readThrough.store.catalog.recordFinalURL(key: video.key, url: fresh.finalURL)
            }
            return (outcome, now)
        }
        var got: SmallGet.Answer?
        switch shared.outcome {
        case .answer(let a): got = a
        case .tooLarge:
            // Never held whole, never answered cut (a cut playlist reads as a shorter stream).
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil,
                    "the origin's playlist is larger than the \(Units.formatSize(Int64(HLSPlaylist.maxBytes))) vcache reads as one: not answered")
        case .failed: break
        }
        if let fresh = got {
            guard fresh.status == 200 else {
                // The origin is reachable and says no: that is the answer, never a stale copy.
                let code = Self.relayedStatus(fresh.status)
                return (HTTPServer.Response(status: code, headers: Self.inert), 0, 0, nil, "the origin answered \(fresh.status) for the playlist")
            }
            // A playlist by its bytes (`#EXTM3U` first), or one that parses: a playlist's
            // Content-Type over a body that is neither (a maintenance page under the path's type)
            // is no playlist.
            let byBytes = HLSPlaylist.looksLikePlaylist(firstBytes: fresh.body.prefix(16), contentType: nil)
            guard byBytes || shared.playlist != nil else {
                // The URL was a playlist (its cached copy is one, or the origin still calls it
                // one) and the origin now answers something else: never the cached playlist as
                // it was (its URIs would lead off the proxy), nor the other thing as a playlist.
                // The cached copy stays for offline answers.
                let wasPlaylist = HLSPlaylist.looksLikePlaylist(firstBytes: cached ?? [], contentType: nil)
                guard wasPlaylist || HLSPlaylist.isPlaylistType(fresh.contentType) else { return nil }
                return Self.notOne("the playlist", fresh)
            }
            text = String(decoding: fresh.body, as: UTF8.self)
            finalURL = fresh.finalURL
            parsedFresh = shared.playlist  // parsed once, by the fetch, against the same URL
        } else if HLSPlaylist.looksLikePlaylist(firstBytes: cached ?? [], contentType: video.contentType),
                  let copy = readThrough.store.cachedPlaylist(key: video.key, keyRules: readThrough.options.keyRules, complete: false) {
            if let refused = unconfirmedOffline(video.key, what: "playlist") { return refused }
            text = String(decoding: copy.bytes, as: UTF8.self)
            // Resolved against the URL that last answered it (after redirects), as online.
            finalURL = copy.base
            status = .hit
        }
        guard let text else { return nil }
        let parsed = parsedFresh ?? (try? HLSPlaylist.parse(text: text, url: finalURL))
        if let parsed { recordStream(parsed, key: video.key) }
        // The proxy as the player reached it (its Host: accepted names only), else its own address.
        let host = request.headers["host"].map { "http://" + $0 } ?? (serverNames?.base ?? "http://127.0.0.1")
        // Offline, a master lists only the variants that play from the cache, so a player's
        // ABR cannot pick one that does not (when none does, all stay: the player says why).
        var keep: @Sendable (String) -> Bool = { _ in true }
        if status == .hit, case .master(let master)? = parsed {
            // A variant plays when its media playlist does and, for its AUDIO group, at least one
            // rendition with its own playlist does (a group without such renditions needs none).
            func groupPlays(_ group: String?) -> Bool {
                guard let group else { return true }
                let uris = master.renditions.filter { $0.groupID == group }.compactMap(\.uri)
                return uris.isEmpty || uris.contains { self.playsFromCache($0) }
            }
            let playable = Set(master.variants.filter { self.playsFromCache($0.uri) && groupPlays($0.audio) }.map(\.uri))
            // Renditions too: one never warmed is not offered (a player picking it would stall).
            let renditions = Set(master.renditions.compactMap(\.uri).filter { self.playsFromCache($0) })
            if !playable.isEmpty { keep = { playable.contains($0) || renditions.contains($0) } }
        }
        // Each named by what it is when its URL's name does not say (`/segment/3`: ffmpeg picks
        // the demuxer by the extension and refuses a TS segment called .mp4).
        let store = readThrough.store, rules = readThrough.options.keyRules
        var rewritten = Array(HLSRewriter(url: finalURL, naming: { url, context in
            let name = Exporter.memberFileName(for: url, key: "video", context: context) {
                ((try? store.catalog.entry(key: rules.key(for: url))) ?? nil).flatMap { store.cachedBytes(of: $0, count: 512) }
            }
            return ProxyURL.make(origin: url, base: host, name: name)
        }, keep: keep).rewrite(text).utf8)
        // Offline, a live playlist's cached copy will never grow: it is answered as ended, so a
        // player plays what is cached and stops instead of reloading it forever.
        if status == .hit, case .media(let media)? = parsed, media.isLive { rewritten = Self.ended(rewritten) }
        let headers: [(String, String)] = [("Content-Type", "application/vnd.apple.mpegurl"), ("Cache-Control", "no-cache"), ("X-Cache", status.rawValue)]
        let bytes = Int64(rewritten.count)
        return (HTTPServer.Response(status: 200, headers: headers + Self.inert, body: .bytes(rewritten)),
                status == .hit ? bytes : 0, status == .hit ? 0 : bytes, status, "playlist, rewritten" + (version.map { "; " + $0.note } ?? ""))
    }

    /// A playlist the origin answered 200 (`fresh`, read as `now`) for `url`, carried out: a
    /// re-encode taken (`dropIfChanged`), the URL that answered recorded (the cached copy's
    /// relative URIs resolve against it too). What was done (nil: no new version).
    func keepAnswerPlaylist(_ video: ReadThrough.Video, now: HLSPlaylist, fresh: SmallGet.Answer, url: String) -> NewVersion? {
        let version = dropIfChanged(video, now: now, fresh: fresh, url: url)
        try? readThrough.store.catalog.recordFinalURL(key: video.key, url: fresh.finalURL)
        if case .taken? = version { recordStream(now, key: video.key) }
        return version
    }

    /// A VOD media playlist or a master the origin now answers with another stream than the
    /// cached copy names: the stream changed under the same URLs (a re-encode in place), so what
    /// the old copy names (segments, init sections, keys; a master's media playlists and all
    /// they name: its whole stream) holds the old stream's bytes, which the new playlist must
    /// never be answered with nor completed from. They go first, under the stream's lock (the
    /// root: the master naming a media playlist, else the playlist itself), then the origin's
    /// copy replaces the cached one (`takeNewVersion`, as prefetch does when it asks again);
    /// when they cannot (a prefetch holds the stream, another process writes a member), what
    /// the new one names is passed through, never cached. Other bytes naming the same stream
    /// (`ManifestRevalidation.sameEncode`, prefetch's end-check rule: a token the key rules
    /// strip, a comment, a date) are no change: nothing is dropped and the cached copy
    /// stays, so an origin that signs every answer anew does not empty the cache of a warmed
    /// stream.
    private func dropIfChanged(_ video: ReadThrough.Video, now: HLSPlaylist, fresh: SmallGet.Answer, url: String) -> NewVersion? {
        let rules = readThrough.options.keyRules, store = readThrough.store, body = Array(fresh.body)
        let master: Bool
        switch now {
        case .master: master = true
        case .media(let m): guard !m.isLive else { return nil }; master = false
        }
        guard let old = store.cachedPlaylist(key: video.key, keyRules: rules, complete: master), let was = old.playlist else { return nil }
        guard old.bytes != body else { versionKept(video.key); return nil }
        func members(_ p: HLSPlaylist) -> [StreamRecord.Member] { p.members.map { StreamRecord.Member(key: rules.key(for: $0.url), role: $0.role) } }
        let root: CacheKey, named: [CacheKey]
        var masters: [CacheKey] = []
        switch (was, now) {
        case (.media(let w), .media(let f)) where !w.isLive:
            guard !f.isLive else { versionKept(video.key); return nil }
            // Its masters' streams are marked and their other members go too (`takeNewVersion`).
            masters = ((try? store.catalog.playlistOwners(among: [video.key])) ?? [:])[video.key] ?? []
            root = masters.first ?? video.key
            named = members(was).map(\.key)
            guard !sameEncode(body, old.bytes, mpd: false) else { versionKept(video.key); return nil }
        case (.master, .master):
            root = video.key
            named = ((try? store.catalog.stream(root: root)) ?? nil)?.keys ?? members(was).map(\.key)
            guard !sameEncode(body, old.bytes, mpd: false) else { versionKept(video.key); return nil }
        default:
            return nil
        }
        let validators = Validators(length: Int64(body.count), etag: fresh.etag, lastModified: fresh.lastModified)
        let taken = takeNewVersion(root: root, manifest: video.key, old: named, new: members(now), masters: masters) {
            self.readThrough.keepWhole(body, url: url, validators: validators, contentType: fresh.contentType)
        }
        return naming(taken, tokensOf: body, old.bytes, mpd: false)
    }

    /// The stream in the catalog (Docs/hls.md): what the playlist names joins the stream of the
    /// playlist's own (a master's, once a player came through it). Best effort: the answer
    /// does not wait on it, and a catalog that says no leaves the entries each on its own.
    private func recordStream(_ playlist: HLSPlaylist, key: CacheKey) {
        let rules = readThrough.options.keyRules
        let members = playlist.members.map { StreamRecord.Member(key: rules.key(for: $0.url), role: $0.role) }
        _ = try? readThrough.store.catalog.recordStream(root: key, format: "hls", members: members)
    }

    /// Whether the media playlist at `url` and every segment, init section and key it names are
    /// cached (byte ranges held, or whole entries complete).
    func playsFromCache(_ url: String) -> Bool {
        let store = readThrough.store, rules = readThrough.options.keyRules
        func entry(_ u: String) -> CacheEntry? { (try? store.catalog.entry(key: rules.key(for: u))) ?? nil }
        func held(_ u: String, _ range: ByteRange?) -> Bool {
            guard let e = entry(u) else { return false }
            if let range { return e.ranges.contains(range) }
            return e.isComplete
        }
        guard let e = entry(url), case .media(let media)? = store.cachedPlaylist(e, keyRules: rules)?.playlist else { return false }
        for s in media.segments {
            guard held(s.uri, s.byteRange) else { return false }
            if let m = s.fetchedMap, !held(m.uri, m.byteRange) { return false }
            for k in s.keys where k.isFetchable { if let u = k.uri, !held(u, nil) { return false } }
        }
        return true
    }

    /// The answer when the origin answers a manifest's URL (`what`: "the playlist", "the MPD")
    /// 200 with something that is not one: 502, with what came in the log; the cached copy stays.
    /// The status a player gets for a manifest the origin did not answer 200 to: its error (4xx,
    /// 5xx) as it is; anything else is no answer to a plain GET (a 206 no range was asked for,
    /// a 304 to no condition, a 1xx or 3xx left over): 502, never passed on as the manifest's.
    static func relayedStatus(_ status: Int) -> Int { (400...599).contains(status) ? status : 502 }

    static func notOne(_ what: String, _ fresh: SmallGet.Answer) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String) {
        let first = LogText.escaped(String(decoding: fresh.body.prefix(16), as: UTF8.self))
        return (HTTPServer.Response(status: 502, headers: inert), 0, 0, nil,
                "the origin's answer for \(what) is not one (Content-Type \(LogText.escaped(fresh.contentType ?? "none")), first bytes '\(first)'): not answered, the cached copy kept")
    }

    /// A media playlist's text with `#EXT-X-ENDLIST` as its last line, in its own line endings.
    static func ended(_ text: [UInt8]) -> [UInt8] {
        let crlf = text.count >= 2 && text[text.count - 2] == 13 && text.last == 10
        let newline: [UInt8] = text.contains(13) && (crlf || text.last != 10) ? [13, 10] : [10]
        var out = text
        if let last = out.last, last != 10 { out += newline }
        return out + Array("#EXT-X-ENDLIST".utf8) + newline
    }

    /// The entry's first `count` bytes when the cache holds them all, else nil. Read from the
    /// file the request holds, under the claims justified for that very file (its snapshot), so
    /// telling a video from a playlist costs neither a catalog read nor a second open (it cost
    /// three of each per request); the catalog is read only for a video opened without them.
    /// `peeked` (`peekHead`), when it holds them, gives them without a read.
    func cachedHead(_ video: ReadThrough.Video, count: Int, peeked: [UInt8]? = nil) -> [UInt8]? {
        let span = ByteRange(0, min(video.length, Int64(count)))
        if let peeked, !span.isEmpty, Int64(peeked.count) >= span.count { return Array(peeked.prefix(Int(span.count))) }
        if let held = heldHead(video, span) { return held }
        let store = readThrough.store
        guard let e = (try? store.catalog.entry(key: video.key)) ?? nil else { return nil }
        return store.cachedBytes(of: e, count: Int64(count))
    }

    /// The most of a video's first bytes the playlist, MPD and remote element checks look at.
    static let peekBytes = 4096

    /// The video's first `peekBytes` (fewer for a shorter one), read once for the three checks
    /// (each read them itself: 16 bytes, then 4,096 twice) from the file the request holds, when
    /// its snapshot's claims cover them; nil otherwise (each check then reads as `cachedHead` does).
    func peekHead(_ video: ReadThrough.Video) -> [UInt8]? {
        heldHead(video, ByteRange(0, min(video.length, Int64(Self.peekBytes))))
    }

    /// The bytes `span` (from 0) of the file the request holds, when its snapshot's claims cover
    /// them; nil otherwise.
    private func heldHead(_ video: ReadThrough.Video, _ span: ByteRange) -> [UInt8]? {
        guard let file = video.snapshot.file, !span.isEmpty, video.snapshot.claims.contains(span) else { return nil }
        return try? file.bytes(Int(span.count), at: 0)
    }
}
