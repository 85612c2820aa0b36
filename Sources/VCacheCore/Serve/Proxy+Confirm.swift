#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Serve's counterpart of prefetch's end check (`Prefetcher+EndCheck.swift`; Docs/dash.md,
/// "Changed while serve stores members"): a player holding a manifest asks for members not
/// cached; if the origin re-encoded in place meanwhile, serve fetches the new encode's bytes
/// and would store them under the cached old manifest. So once serve has stored a member fetched
/// from the origin, the manifest naming it (a static MPD, an HLS VOD media playlist) is asked
/// for again, conditionally, unless an answer of it whose request began after that member's
/// fetch began confirmed it already. One request in flight per manifest, made `confirmDelay`
/// after the first member stored, covering every member whose fetch began before it (a burst of
/// members a player fetches to fill its buffer costs one request, not one each); a stream
/// served from the cache asks nothing. Judged as the end check judges (`sameEncode`): the same
/// encode confirms; another is taken as a player's answer takes it (`takeNewVersion`: the old
/// copy's members go, what was just stored included); no answer leaves the stream's root marked
/// `manifest-unconfirmed` (set while the question is open) until an answer confirms it, so
/// `check`, `export` and serve offline do not take it as playable.
extension Proxy {
    /// What serve knows of one manifest's confirmation, for this process.
    struct Confirmation: Sendable {
        /// When the request of the last answer found the same encode began.
        var confirmed: ContinuousClock.Instant?
        /// When the request of the last answer that took a new version began: a member whose
        /// fetch began before it may be of either version.
        var taken: ContinuousClock.Instant?
        /// The earliest beginning of a member stored since and not yet confirmed.
        var pending: ContinuousClock.Instant?
        /// The latest beginning of a member registered: an answer whose request began before it
        /// does not cover it (hostile probe h10b, F3: members begun while a question was in
        /// flight were taken as confirmed by its answer, made before the re-encode).
        var latest: ContinuousClock.Instant?
        /// Seconds from the first member of a window to its question: `confirmDelay`, doubled by
        /// each answer finding the same encode up to `confirmDelayMost` (a player fetching one
        /// segment per segment duration asked the manifest once per segment: h10b F2), back to
        /// `confirmDelay` after a new version is taken or a minute without questions.
        var delay = Proxy.confirmDelay
        /// When the last question was asked.
        var lastAsked: ContinuousClock.Instant?
        /// A confirming request in flight.
        var asking = false
        /// The roots serve marked `manifest-unconfirmed` for it (one a prefetch marked stays its own).
        var marked: Set<CacheKey> = []
        /// When it was last asked before a member was answered from the cache (`askIfMarked`).
        var askedForMember: ContinuousClock.Instant?
    }

    /// A manifest to ask again for a stored member: its key, URL and kind, and the roots of the
    /// streams it stands for (an MPD: itself; a media playlist: itself and its masters).
    struct ConfirmTarget: Sendable {
        let key: CacheKey
        let url: String
        let mpd: Bool
        let roots: [CacheKey]
    }

    /// A stream member answered (at least in part) from the origin by a request that began at
    /// `began`: registered at once, on the request's path (before the player has its bytes, so
    /// `/status` counts it as soon as it is asked: `unconfirmedCount`), its manifests asked for
    /// again off it. Returns the manifests it was registered with (`memberEnded`).
    func memberBegins(key: CacheKey, began: ContinuousClock.Instant) -> [ConfirmTarget] {
        let targets = confirmTargets(naming: key)
        for target in targets where noteStored(target, began: began) {
            DetachedThread.start(name: "vcache-confirm") { [self] in confirmLoop(target) }
        }
        return targets
    }

    /// The member registered by `memberBegins` is answered: when serve took a new version of one
    /// of its manifests after its fetch began, what it stored may be of either version: dropped.
    func memberEnded(key: CacheKey, url: String, began: ContinuousClock.Instant, targets: [ConfirmTarget]) {
        let across = confirmations.withLock { all in targets.contains { t in all[t.key]?.taken.map { began < $0 } ?? false } }
        guard across else { return }
        DetachedThread.start(name: "vcache-confirm") { [self] in
            guard readThrough.dropCachedBytes(key: key) else { return }
            backgroundLog(url, status: 200, note: "stored from a fetch that began before its manifest was found re-encoded on the origin: dropped (it may be the old encode's)")
        }
    }

    /// Manifests whose members serve stored are not confirmed yet (a question open, or
    /// unanswered): `/status` `manifests_unconfirmed`.
    var unconfirmedCount: Int { confirmations.withLock { $0.values.filter { $0.asking || $0.pending != nil }.count } }

    /// Registers a member of `t` whose fetch began at `began`; true when no request for `t` is
    /// in flight (the caller starts `confirmLoop`).
    private func noteStored(_ t: ConfirmTarget, began: ContinuousClock.Instant) -> Bool {
        confirmations.withLock { all in
            if all.count >= 1024, all[t.key] == nil { all = all.filter { $0.value.asking || $0.value.pending != nil } }
            var c = all[t.key] ?? Confirmation()
            defer { all[t.key] = c }
            c.pending = min(c.pending ?? began, began)
            c.latest = max(c.latest ?? began, began)
            if c.asking { return false }
            c.asking = true
            return true
        }
    }

    /// Seconds from a member stored to the request confirming its manifest, the first time.
    static let confirmDelay = 0.5
    /// The longest wait between questions of one manifest while a player goes on fetching members.
    static let confirmDelayMost = 30.0

    /// Settles the members an answer covers: those whose fetch began before its request did
    /// (`asked`). A member begun after it stays pending, as from `asked` (the next question,
    /// asked later, covers it).
    static func settle(_ c: inout Confirmation, asked: ContinuousClock.Instant) {
        guard let p = c.pending, p < asked else { return }
        c.pending = (c.latest.map { $0 >= asked } ?? false) ? asked : nil
    }

    /// Seconds before an unanswered question is asked again, the first time (then twice as long
    /// each time, up to `retryDelayMost`): the origin unreachable as a player stopped left the
    /// stream marked, unplayable offline, until a player happened to ask its manifest online
    /// (hostile probe h10b, F6); serve asks again by itself while it runs.
    static let retryDelay = 10.0
    static let retryDelayMost = 300.0

    /// Asks for `t` until no member whose fetch began before a request did is left unconfirmed
    /// (a player's answer of the manifest meanwhile counts). An answer that fails leaves the mark
    /// and is asked again after `retryDelay`, backing off, while serve runs.
    private func confirmLoop(_ t: ConfirmTarget) {
        let catalog = readThrough.store.catalog
        while true {
            for r in t.roots where ((try? catalog.rootRole(r)) ?? nil) == .manifest {
                if (try? catalog.markRootUnconfirmed(r, true)) != nil { confirmations.withLock { _ = $0[t.key]?.marked.insert(r) } }
            }
            // The members a player fetches with this one join it meanwhile.
            let delay = confirmations.withLock { all -> Double in
                guard var c = all[t.key] else { return Self.confirmDelay }
                if let last = c.lastAsked, ContinuousClock.now - last > .seconds(60) { c.delay = Self.confirmDelay }
                all[t.key] = c
                return c.delay
            }
            // In steps, so a player's answer meanwhile ends a long wait (a retry's).
            let until = ContinuousClock.now + .milliseconds(Int64(delay * 1000))
            repeat {
                usleep(useconds_t(min(0.5, max(0, (until - ContinuousClock.now).inSeconds)) * 1_000_000))
            } while ContinuousClock.now < until && confirmations.withLock({ $0[t.key]?.pending != nil })
            let asked = ContinuousClock.now
            let open = confirmations.withLock { $0[t.key]?.pending != nil }
            let said: Said = open ? ask(t) : .confirmed
            let settled = confirmations.withLock { all -> Bool in
                var c = all[t.key] ?? Confirmation()
                defer { all[t.key] = c }
                switch said {
                case .gone:
                    // Nothing left to ask about: the question ends (no retry every few minutes).
                    c.pending = nil
                    c.asking = false
                    c.marked = []
                    return true
                case .failed:
                    c.lastAsked = asked
                    c.delay = c.delay < Self.retryDelay ? Self.retryDelay : min(c.delay * 2, Self.retryDelayMost)
                    return c.pending == nil
                case .confirmed:
                    if open {
                        c.confirmed = max(c.confirmed ?? asked, asked)
                        c.delay = min(c.delay * 2, Self.confirmDelayMost)
                    }
                case .taken:
                    c.taken = max(c.taken ?? asked, asked)
                    c.delay = Self.confirmDelay
                }
                if open {
                    c.lastAsked = asked
                    Self.settle(&c, asked: asked)
                }
                return c.pending == nil
            }
            guard settled else { continue }
            // Cleared before the question counts as closed (`unconfirmedCount`).
            clearMarks(confirmations.withLock { all in all[t.key].map { Array($0.marked) } ?? [] })
            let closed = confirmations.withLock { all -> Bool in
                guard all[t.key]?.pending == nil else { return false }
                all[t.key]?.asking = false
                all[t.key]?.marked = []
                return true
            }
            if closed { return }
        }
    }

    /// A player's answer of the manifest `key` (its request began at `asked`) found the cached
    /// copy the same encode (`taken` false) or took a new version: members whose fetch began
    /// before it are confirmed, or (taken) of either version; a mark goes when nothing is left
    /// unconfirmed (one a prefetch left too: `clearMarks`, not while one holds the stream).
    func manifestAnswered(_ key: CacheKey, roots: [CacheKey], at asked: ContinuousClock.Instant, taken: Bool) {
        let clear = confirmations.withLock { all -> [CacheKey] in
            // Kept for every manifest answered (`askIfMarked`: this process has an answer of it).
            if all.count >= 1024, all[key] == nil { all = all.filter { $0.value.asking || $0.value.pending != nil } }
            var c = all[key] ?? Confirmation()
            defer { all[key] = c }
            if taken { c.taken = max(c.taken ?? asked, asked) } else { c.confirmed = max(c.confirmed ?? asked, asked) }
            Self.settle(&c, asked: asked)
            // A request in flight clears what it marked itself.
            guard c.pending == nil, !c.asking else { return [] }
            defer { c.marked = [] }
            return roots + c.marked
        }
        clearMarks(clear)
    }

    /// Clears the `manifest-unconfirmed` mark of `roots`, each only while no other process holds
    /// its stream (a prefetch fetching members marks it for its own end check).
    private func clearMarks(_ roots: [CacheKey]) {
        let store = readThrough.store
        for r in roots where ((try? store.catalog.rootRole(r)) ?? nil) == .manifestUnconfirmed {
            guard let lock = (try? store.tryLockStream(root: r)) ?? nil else { continue }
            try? store.catalog.markRootUnconfirmed(r, false)
            store.releaseStreamLock(lock, root: r)
        }
    }

    /// Before a stream member is answered from the cache (hostile probe h9d, F3): the state
    /// "this manifest changed on the origin, pass its members through" (`passThroughLater`) lives
    /// in the memory of the serve that saw the change; the catalog keeps a mark of it
    /// (`manifest-unconfirmed` on the stream's root: set by a prefetch fetching members, by serve
    /// storing members, and by serve finding a new version it could not store, `takeNewVersion`).
    /// So when a manifest naming `key` has its stream marked and this serve has had no answer of
    /// it (it restarted; another serve saw the change), it is asked now, conditionally, and
    /// judged as a player's answer is (`ask`): the same encode lets the member be answered from
    /// the cache; a new version is taken, or, while another process holds the stream, its members
    /// are passed through (the caller's `unstoredMember` finds `key`). No answer (offline): true,
    /// the member is not answered from the cache, as its manifest is not (`unconfirmedOffline`:
    /// a player holding the manifest from before got the members of maybe two encodes, hostile
    /// probes h10b, h10c F7); asked again after `markedRetry` seconds at the soonest. A stream this
    /// serve marked itself (its own question open) is answered as before.
    func askIfMarked(member key: CacheKey) -> Bool {
        let catalog = readThrough.store.catalog
        guard let (role, playlists) = (try? catalog.playlists(naming: key)) ?? nil, role != .playlist,
              playlists.contains(where: { ((try? catalog.rootRole($0)) ?? nil) == .manifestUnconfirmed }) else { return false }
        let marked = { (r: CacheKey) in ((try? catalog.rootRole(r)) ?? nil) == .manifestUnconfirmed }
        for t in confirmTargets(naming: key) where t.roots.contains(where: marked) {
            let now = ContinuousClock.now
            let due = confirmations.withLock { all -> Bool in
                var c = all[t.key] ?? Confirmation()
                // Known to this serve (answered, or its own question open or asked): not asked.
                guard c.confirmed == nil, c.taken == nil, !c.asking, c.pending == nil, c.marked.isEmpty, c.askedForMember.map({ now - $0 > .seconds(Self.markedRetry) }) ?? true else { return false }
                c.askedForMember = now
                all[t.key] = c
                return true
            }
            guard due else { continue }
            let what = "its manifest asked before a member is answered from the cache (its stream is marked manifest-unconfirmed and this serve has no answer of it)"
            // A marked master first: a re-encode keeping a media playlist's text shows only in it.
            for m in t.roots.dropFirst() where marked(m) {
                guard let e = (try? catalog.entry(key: m)) ?? nil, mayAsk(e.latestURL) else { continue }
                let master = ConfirmTarget(key: m, url: e.latestURL, mpd: false, roots: [m])
                switch ask(master, what: what) {
                case .confirmed: manifestAnswered(m, roots: [m], at: now, taken: false)
                case .taken: manifestAnswered(m, roots: [m], at: now, taken: true)
                case .failed, .gone: break
                }
            }
            if let (master, role) = unstoredMember(t.key), role == .playlist {
                // Named by a master whose new version is not stored: what the playlist names now
                // is passed through too, as a player's answer of it has it (`playlistAnswer`).
                if case .answer(let a) = SmallGet.fetch(t.url, options: readThrough.options.request, limit: HLSPlaylist.maxBytes), a.status == 200,
                   let now = try? HLSPlaylist.parse(Array(a.body), url: a.finalURL) {
                    passThroughLater(manifest: master, now.members.map { StreamRecord.Member(key: readThrough.options.keyRules.key(for: $0.url), role: $0.role) })
                }
                continue
            }
            switch ask(t, what: what) {
            case .confirmed: manifestAnswered(t.key, roots: t.roots, at: now, taken: false)
            case .taken: manifestAnswered(t.key, roots: t.roots, at: now, taken: true)
            case .failed, .gone: break
            }
        }
        // Still marked, and this serve has no answer of the manifest nor a question of its own.
        return confirmTargets(naming: key).contains { t in
            t.roots.contains(where: marked) && confirmations.withLock { all in
                let c = all[t.key] ?? Confirmation()
                return c.confirmed == nil && c.taken == nil && !c.asking && c.pending == nil && c.marked.isEmpty
            }
        }
    }

    /// Seconds before a marked manifest that gave no answer is asked again for a member.
    static let markedRetry = 10

    /// `gone`: the manifest is no longer cached whole (evicted, dropped): nothing to confirm it
    /// against, and no retry (its stream keeps whatever mark it has).
    private enum Said { case confirmed, taken, failed, gone }

    /// One conditional request for `t`, judged and carried out; its log line says what came.
    private func ask(_ t: ConfirmTarget, what: String = "its manifest asked again after members were stored from the origin") -> Said {
        let store = readThrough.store, rules = readThrough.options.keyRules
        guard let e = (try? store.catalog.entry(key: t.key)) ?? nil, let bytes = store.cachedBytes(of: e), Int64(bytes.count) == e.length else {
            backgroundLog(t.url, status: 0, note: "\(what): its copy is no longer cached whole, so its stream stays marked unconfirmed")
            return .gone
        }
        var o = readThrough.options.request
        let conditional = e.validators.conditionalHeader != nil
        if let header = e.validators.conditionalHeader { o.headers.append(header) }
        let outcome = SmallGet.fetch(t.url, options: o, limit: t.mpd ? MPD.maxBytes : HLSPlaylist.maxBytes)
        func failed(_ why: String, status: Int = 0) -> Said {
            backgroundLog(t.url, status: status, note: "\(what): no answer to judge by (\(why)): its stream stays marked unconfirmed (not answered from the cache offline, not exported) until an answer confirms it")
            return .failed
        }
        guard case .answer(let a) = outcome else { return failed(outcome.isTooLarge ? "larger than vcache reads as one" : "the origin could not be reached") }
        let body = Array(a.body)
        if a.status == 304, conditional || body == bytes {
            backgroundLog(t.url, status: 304, note: "\(what): unchanged, the members confirmed")
            return .confirmed
        }
        guard a.status == 200, !body.isEmpty else { return failed("origin answered \(a.status)", status: a.status) }
        let moved = ManifestRevalidation.folder(of: a.finalURL) != ManifestRevalidation.folder(of: ((try? store.catalog.finalURL(of: t.key)) ?? nil) ?? e.latestURL)
        // A query-only difference is judged below (`keepCopy`, `dropIfChanged`: members asked at
        // their new URLs), once.
        if !moved, body == bytes || sameEncode(body, bytes, mpd: t.mpd) {
            backgroundLog(t.url, status: 200, note: "\(what): the same encode, the members confirmed")
            return .confirmed
        }
        let video = ReadThrough.Video(key: t.key, url: t.url, length: 0, validators: Validators(length: nil, etag: nil, lastModified: nil),
                                      contentType: nil, fromCatalog: false, snapshot: ReadThrough.Snapshot())
        let version: NewVersion?
        if t.mpd {
            guard MPD.looksLikeMPD(firstBytes: Array(body.prefix(4096)), contentType: a.contentType) else { return failed("its answer is not an MPD", status: 200) }
            switch keepAnswerMPD(video, a, origin: t.url).kept {
            case .taken(let v)?: version = v
            case .notKept(let v)?: version = v
            case .same?: version = nil
            case .new?, nil: return failed("its answer could not be read or kept", status: 200)
            }
        } else {
            guard let now = try? HLSPlaylist.parse(body, url: a.finalURL) else { return failed("its answer is not a playlist", status: 200) }
            version = keepAnswerPlaylist(video, now: now, fresh: a, url: t.url)
        }
        switch version {
        case nil:
            backgroundLog(t.url, status: 200, note: "\(what): the same encode, the members confirmed")
            return .confirmed
        case .taken?:
            backgroundLog(t.url, status: 200, note: "\(what): \(version!.note)")
            return .taken
        case .passedThrough?:
            backgroundLog(t.url, status: 200, note: "\(what): \(version!.note); its stream stays marked unconfirmed")
            return .failed
        }
    }

    /// The manifests naming the stream member `key` that serve confirms: each static MPD root of
    /// a stream it is a member of, and each cached VOD media playlist naming it (a master names no
    /// segment: a re-encode keeping it byte for byte shows in its media playlists).
    func confirmTargets(naming key: CacheKey) -> [ConfirmTarget] {
        let store = readThrough.store, rules = readThrough.options.keyRules
        guard let (role, playlists) = (try? store.catalog.playlists(naming: key)) ?? nil, role != .playlist else { return [] }
        var out: [ConfirmTarget] = []
        for p in playlists.prefix(8) {
            guard let e = (try? store.catalog.entry(key: p)) ?? nil, e.isComplete, mayAsk(e.latestURL) else { continue }
            if ((try? store.catalog.streamFormat(root: p)) ?? nil) == "dash" {
                guard let mpd = store.cachedMPD(e)?.mpd, !mpd.isDynamic else { continue }
                out.append(ConfirmTarget(key: p, url: e.latestURL, mpd: true, roots: [p]))
            } else if case .media(let m)? = store.cachedPlaylist(e, keyRules: rules)?.playlist, !m.isLive,
                      HLSPlaylist.media(m).members.contains(where: { rules.key(for: $0.url) == key }) {
                let masters = ((try? store.catalog.playlistOwners(among: [p])) ?? [:])[p] ?? []
                out.append(ConfirmTarget(key: p, url: e.latestURL, mpd: false, roots: [p] + masters))
            }
        }
        return out
    }

    /// Offline, the answer for the manifest `key` (`what`: "MPD", "playlist") when its stream,
    /// or a master's naming it, is marked `manifest-unconfirmed` (members fetched and its
    /// manifest not confirmed since, by a run or by serve: they may be of two encodes): 502, not
    /// the cached copy, as `export` refuses it (hostile probe h9d, F16). Nil: not marked.
    func unconfirmedOffline(_ key: CacheKey, what: String) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String)? {
        let catalog = readThrough.store.catalog
        let roots = [key] + (((try? catalog.playlistOwners(among: [key])) ?? [:])[key] ?? [])
        guard roots.contains(where: { ((try? catalog.rootRole($0)) ?? nil) == .manifestUnconfirmed }) else { return nil }
        return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil,
                "the origin could not be reached, and the cached \(what)'s stream is not confirmed unchanged on the origin since members were fetched for it (manifest-unconfirmed: they may be of two encodes): not answered from the cache")
    }

    /// A line in serve's log for what serve asked of its own accord (no player's request).
    func backgroundLog(_ url: String, status: Int, note: String) {
        log(LogLine(time: Date(), client: "serve", method: "GET", url: url, range: nil, status: status, fromCache: 0, fromOrigin: 0, seconds: 0, note: note))
    }
}

private extension SmallGet.Outcome {
    var isTooLarge: Bool { if case .tooLarge = self { true } else { false } }
}
