#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
    /// answer finds the cached copy the version the origin serves. Returns what was done, said
    /// on the answer's log line (`note`).
    /// `manifest`: the manifest answered (the root, or a media playlist of the master `root`).
    /// `masters`: for a media playlist, the masters naming it (`root` the first), as prefetch has
    /// a media playlist given by its own URL (Docs/dash.md, "HLS: a master's media playlist";
    /// hostile probe h9d, F11): each master's stream is marked to be asked for again
    /// (`StreamRole.manifestToAsk`) before anything goes, and every other member of those streams
    /// (the other variants' and renditions' playlists and all they name: they may be of the old
    /// encode) goes with what the old copy named; the playlists' rows stay (their masters still
    /// name them, now not cached).
    @discardableResult
    func takeNewVersion(root: CacheKey, manifest: CacheKey? = nil, old: [CacheKey], new: [StreamRecord.Member], masters: [CacheKey] = [],
                        keep: () -> Bool) -> NewVersion {
        let store = readThrough.store, manifest = manifest ?? root
        guard let lock = (try? store.tryLockStream(root: root)) ?? nil else {
            // Kept in the catalog too, for any serve (a restarted one: `askIfMarked`, h9d F3).
            try? store.catalog.markRootUnconfirmed(root, true)
            passThroughLater(manifest: manifest, new)
            return .passedThrough
        }
        defer { store.releaseStreamLock(lock, root: root) }
        var old = old
        for master in masters {
            try? store.catalog.markRootToAsk(master, true)
            old += ((try? store.catalog.stream(root: master)) ?? nil)?.keys.filter { !masters.contains($0) } ?? []
        }
        let members = Array(Set(old.filter { $0 != root && $0 != manifest && !masters.contains($0) }))
        // Another stream's manifest naming members of the old version (two MPDs naming the same
        // segment URLs) may be of the old version too: its copy goes first, as prefetch has it
        // (Docs/dash.md, "Two MPDs naming the same segment URLs"; hostile probe h9d, F10).
        let others = Prefetcher.dropOtherManifests(store, naming: members, root: root, besides: Set([manifest] + masters))
        guard others.busy == nil, others.error == nil else {
            passThroughLater(manifest: manifest, new)
            return .passedThrough
        }
        let held = ((try? store.catalog.entries(keys: members)) ?? [:]).filter { !$0.value.ranges.isEmpty }
        for k in held.keys.sorted(by: { $0.hex < $1.hex }) where !readThrough.dropCachedBytes(key: k) {
            passThroughLater(manifest: manifest, new)
            return .passedThrough
        }
        if masters.isEmpty {
            try? store.catalog.releaseMembers(members, root: root)
        } else {
            let playlists = Set(((try? store.catalog.playlistOwners(among: members)) ?? [:]).keys)
            for master in masters { try? store.catalog.releaseMembers(members.filter { !playlists.contains($0) }, root: master) }
        }
        guard keep() else {
            // The old manifest must not stay over members the player fetches from the new one.
            if !readThrough.dropCachedBytes(key: manifest) { passThroughLater(manifest: manifest, new) }
            return .passedThrough
        }
        versionKept(manifest)
        let named = masters.map { ((try? store.catalog.entry(key: $0)) ?? nil)?.latestURL ?? $0.hex }
        return .taken(dropped: held.count, others: others.dropped, masters: named)
    }

    /// Serve's "same encode" rule, the one prefetch's end check applies
    /// (`ManifestRevalidation.sameEncode`): `new`, the origin's answer of a static manifest, and
    /// `old`, its copy cached whole, name the same members under the key rules (a query parameter
    /// they keep counts: a cache-busting `?v=2` is a re-encode, hostile probe h9d F4), once what
    /// names no member and the answer's own time (an MPD's `publishTime`) are put aside.
    func sameEncode(_ new: [UInt8], _ old: [UInt8], mpd: Bool) -> Bool {
        ManifestRevalidation.sameEncode(new, old, mpd: mpd, rules: readThrough.options.keyRules)
    }

    /// What `takeNewVersion` did.
    enum NewVersion {
        /// The new version stored, after `dropped` entries cached from the old one were dropped,
        /// and the cached copies of `others` (manifests naming members of the old one); `masters`:
        /// the masters of a media playlist taken, marked and their other members dropped.
        /// `hint`: the key rule that would have made it the same encode, when token-like query
        /// parameters the key rules keep were all that differed (`ManifestRevalidation.tokenHint`): the
        /// note names them and the key rule, as prefetch's error does (hostile probe h10c, F1).
        case taken(dropped: Int, others: [String], masters: [String] = [], hint: String? = nil)
        /// Not stored: what the new version names is passed through.
        case passedThrough

        /// Said on the log line of the answer that took it.
        var note: String {
            switch self {
            case .taken(let n, let others, let masters, let hint):
                return "re-encoded on the origin: the \(n) \(n == 1 ? "entry" : "entries") cached from the old copy were dropped, the new copy stored"
                    + (hint.map { "; " + $0 } ?? "")
                    + others.map { "; \($0) names members of its old version too: that manifest's cached copy was dropped, so it is fetched again and what it named dropped" }.joined()
                    + masters.map { "; it is a member of the stream of \($0): what that stream's other playlists named went too (it may be of the old encode), and its master is asked for again by the next prefetch" }.joined()
            case .passedThrough:
                return "re-encoded on the origin while another vcache process holds the stream: the new copy is answered without being stored, and what it names comes from the origin, not the cache"
            }
        }
    }

    /// `version` with the token-like query parameters that were all `new` differed from `old`
    /// in, under the key rules (for its note).
    func naming(_ version: NewVersion, tokensOf new: [UInt8], _ old: [UInt8], mpd: Bool) -> NewVersion {
        guard case .taken(let n, let others, let masters, _) = version else { return version }
        let hint = ManifestRevalidation.tokenHint(new, old, mpd: mpd, rules: readThrough.options.keyRules)
        return .taken(dropped: n, others: others, masters: masters, hint: hint)
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
    /// the span asked (held in memory: up to `passThroughLimit`, and all such answers together
    /// up to `passThroughTotal`: past it 503). Checked as the normal path checks a member before
    /// it is stored (`memberCheck`; an error page answered 200 is 502), and answered with the
    /// origin's validators (an ETag of the bytes when the origin sends none), a Range under an
    /// If-Range naming another version answered 200 whole, so a player resuming an old download
    /// never gets the new encode's bytes spliced onto it.
    func passThrough(_ request: HTTPServer.Request, origin: String, manifest: CacheKey, role: StreamRole) -> (response: HTTPServer.Response, fromOrigin: Int64, note: String) {
        var why = "a member of a stream whose manifest changed on the origin while another vcache process holds the stream: passed through, not stored"
        var refused: String?
        if let streamed = passThroughStreamed(request, origin: origin, manifest: manifest, role: role, why: why, refused: &refused) { return streamed }
        // The span refused as another version than its first bytes (an origin whose ETag differs
        // per answer, h9d F5): the member is fetched whole and checked as one (below).
        if let refused { why += "; its span was not answered as the version of its first bytes (\(refused)), so it was fetched whole" }
        let budget = PassThroughBudget()
        defer { budget.release() }
        let a: SmallGet.Answer
        switch SmallGet.fetch(origin, options: readThrough.options.request, limit: Self.passThroughLimit, reserve: budget.take) {
        case .answer(let x): a = x
        case .tooLarge where budget.refused:
            return (HTTPServer.Response(status: 503, headers: [("Retry-After", "1")] + Self.inert), 0,
                    "\(why); members passed through already hold the \(Units.formatSize(Int64(Self.passThroughTotal))) they may: asked again later")
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
        let key = readThrough.options.keyRules.key(for: origin)
        if let problem = ResponseJudge.notMedia(contentType: a.contentType, url: a.finalURL)
            ?? passThroughCheck(key, manifest: manifest, role: role)?.problem(length: length, firstBytes: body.prefix(376)) {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, "\(problem); \(why), not passed on")
        }
        let etag = a.etag ?? "\"vcache-\(SHA256Digest.hash(a.body).prefix(16))\""
        let headers: [(String, String)], status: Int, span: ByteRange
        switch passThroughHead(request, length: length, etag: etag, lastModified: a.lastModified, contentType: a.contentType) {
        case .span(let h, let st, let sp): (headers, status, span) = (h, st, sp)
        case .unsatisfiable(let refused): return (refused, 0, why)
        }
        let out = Array(body[Int(span.lowerBound)..<Int(span.upperBound)])
        // What came from the origin: the whole member, whatever part of it is answered.
        let fetched = status == 206 ? "; the whole member fetched for it: \(length) B" : ""
        return (HTTPServer.Response(status: status, headers: headers + Self.inert, body: .bytes(out)), Int64(out.count), why + fetched)
    }

    /// `passThrough` without holding the member: its first bytes asked of the origin (a Range:
    /// its length, validators and the member check from them), then the span the player asks
    /// streamed from the origin under If-Range of those validators (`DirectStream`: only a 206 of
    /// exactly those bytes of that version is passed on; another version cuts the answer, never
    /// splices). Nil when the origin does not answer ranges with a validator (a strong ETag or a
    /// Last-Modified): the member is then fetched whole.
    /// The span's answer is judged before the player's head is made (`DirectStream.awaitHead`):
    /// one the stream would not pass on (another version: an origin whose ETag differs per
    /// answer) gives nil and `refused` says why, so the member is fetched whole instead; no head
    /// is sent that the bytes cannot honour (hostile probe h9d, F5).
    private func passThroughStreamed(_ request: HTTPServer.Request, origin: String, manifest: CacheKey, role: StreamRole, why: String,
                                     refused: inout String?) -> (response: HTTPServer.Response, fromOrigin: Int64, note: String)? {
        guard case .answer(let probe) = SmallGet.fetch(origin, options: readThrough.options.request, limit: 4096, range: "0-375"), probe.status == 206,
              let total = probe.contentRange.flatMap({ $0.split(separator: "/").last.flatMap { Int64($0.trimming(.whitespaces)) } }),
              probe.contentRange?.hasPrefix("bytes 0-") == true, total > 0,
              probe.etag.map({ !$0.hasPrefix("W/") }) ?? (probe.lastModified != nil) else { return nil }
        let key = readThrough.options.keyRules.key(for: origin)
        if let problem = ResponseJudge.notMedia(contentType: probe.contentType, url: probe.finalURL)
            ?? passThroughCheck(key, manifest: manifest, role: role)?.problem(length: total, firstBytes: probe.body) {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, "\(problem); \(why), not passed on")
        }
        let validators = Validators(length: total, etag: probe.etag, lastModified: probe.lastModified)
        let etag = probe.etag ?? "\"vcache-\(SHA256Digest.hash("\(key) \(total) \(probe.lastModified ?? "")").prefix(16))\""
        let headers: [(String, String)], status: Int, span: ByteRange
        switch passThroughHead(request, length: total, etag: etag, lastModified: probe.lastModified, contentType: probe.contentType) {
        case .span(let h, let st, let sp): (headers, status, span) = (h, st, sp)
        case .unsatisfiable(let refused): return (refused, 0, why)
        }
        let options = readThrough.options.request
        let stream: PassThroughStream
        if request.method == "HEAD" {
            stream = PassThroughStream { DirectStream(url: origin, span: span, validators: validators, options: options) }
        } else {
            let direct = DirectStream(url: origin, span: span, validators: validators, options: options)
            guard direct.awaitHead() else {
                refused = direct.error ?? "no answer"
                return nil
            }
            stream = PassThroughStream { direct }
        }
        let sent = request.method == "HEAD" ? 0 : span.count
        return (HTTPServer.Response(status: status, headers: headers + Self.inert, body: .stream(length: span.count, stream)), sent,
                why + "; streamed from the origin")
    }

    /// The head of a passed-through answer of a member of `length` bytes (`passThrough`,
    /// `passThroughStreamed`): the origin's validators (`etag` standing for its ETag), and the
    /// span the player's Range asks, unless an If-Range names another version (RFC 9110 §13.1.5:
    /// the whole then); an unsatisfiable Range gets its 416.
    private func passThroughHead(_ request: HTTPServer.Request, length: Int64, etag: String, lastModified: String?, contentType: String?) -> PassThroughHead {
        let name = PercentCoding.decode(PathText.lastPathComponent(request.path)) ?? ""
        var headers: [(String, String)] = [("Accept-Ranges", "bytes"), ("X-Cache", CacheStatus.miss.rawValue), ("ETag", etag),
                                           ("Content-Type", ProxyURL.safeContentType(ProxyURL.contentType(origin: contentType, name: name)))]
        if let lm = lastModified { headers.append(("Last-Modified", lm)) }
        var rangeHeader = request.headers["range"]
        if let ifRange = request.headers["if-range"], !IfRange.matches(ifRange, etag: etag, lastModified: lastModified) { rangeHeader = nil }
        switch RangeHeader(rangeHeader, length: length) {
        case .whole: return .span(headers: headers, status: 200, span: ByteRange(0, length))
        case .span(let r):
            return .span(headers: headers + [("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(length)")], status: 206, span: r)
        case .unsatisfiable:
            return .unsatisfiable(HTTPServer.Response(status: 416, headers: headers + [("Content-Range", "bytes */\(length)")] + Self.inert))
        }
    }

    private enum PassThroughHead {
        case span(headers: [(String, String)], status: Int, span: ByteRange)
        case unsatisfiable(HTTPServer.Response)
    }

    /// How a passed-through member is checked: as the normal path checks it (`memberCheck`) when
    /// the catalog knows it; else by its role in the new manifest: a key's length, a DASH
    /// segment's or init segment's first bytes. An HLS segment the catalog does not know may be
    /// AES-128 ciphertext: only the web-page check applies to it.
    private func passThroughCheck(_ key: CacheKey, manifest: CacheKey, role: StreamRole) -> HLSMemberCheck? {
        if let check = memberCheck(key) { return check }
        switch role {
        case .key: return .key
        case .segment, .initSection:
            return ((try? readThrough.store.catalog.streamFormat(root: manifest)) ?? nil) == "dash" ? .dashSegment : nil
        default: return nil
        }
    }

    /// The most of a passed-through member held in memory.
    static let passThroughLimit = 256 << 20
    /// The most held in memory by all passed-through answers together (`PassThroughBudget`).
    static let passThroughTotal = 512 << 20
}

/// One pass-through answer's share of `Proxy.passThroughTotal`, taken as its body arrives and
/// given back once it is answered: however many players ask at once, serve holds no more.
final class PassThroughBudget: @unchecked Sendable {
    private static let held = Locked<Int>(0)
    private var mine = 0
    /// Whether the total refused a part of this answer's body.
    private(set) var refused = false

    /// Takes `count` more bytes of the total; false (the answer stops) when that would pass it.
    func take(_ count: Int) -> Bool {
        let ok = Self.held.withLock { h in
            guard h + count <= Proxy.passThroughTotal else { return false }
            h += count
            return true
        }
        if ok { mine += count } else { refused = true }
        return ok
    }

    func release() {
        let n = mine
        mine = 0
        Self.held.withLock { $0 -= n }
    }
}

/// A passed-through span as it comes from the origin (`DirectStream`, started at the first
/// read, so a HEAD asks nothing): at most one loop turn of it held.
final class PassThroughStream: HTTPServer.Producer, @unchecked Sendable {
    private let start: () -> DirectStream
    private var stream: DirectStream?
    private var sent: Int64 = 0

    init(_ start: @escaping () -> DirectStream) { self.start = start }

    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset == sent else { return nil }
        let s = stream ?? start()
        stream = s
        guard let n = s.read(into: buffer), n > 0 else { return nil }
        sent += Int64(n)
        return n
    }

    func finished(completed: Bool) { stream = nil }
}
