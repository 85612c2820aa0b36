#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A partly cached stream is completed from the manifest the origin serves now, not from the
/// one cached when it was begun (Docs/dash.md, Docs/hls.md, "A partly cached stream"): before the
/// run reads a cached static MPD or VOD playlist whose stream is partial, it asks the origin once
/// (`ManifestRevalidation`). Unchanged (304, or the same bytes), the run goes on as before;
/// changed (a re-encode in place, rotated tokens), the new manifest replaces the cached one and
/// every member the old one named is dropped and released from the stream, so no member of the
/// old version is ever completed into the new one. No answer to judge by (an error status, the
/// network, an error page): the item fails and nothing of the stream is fetched. A complete stream is not asked again: a run
/// that has nothing to fetch makes no request; one whose choice needs members it does not hold is
/// (`Prefetcher+Choice.swift`), and a run that fetched members asks again at their end
/// (`Prefetcher+EndCheck.swift`).
///
/// Invariant (Docs/dash.md, Docs/hls.md): a stream is never completed from members of two
/// manifest versions. The old members go before the new manifest's bytes replace the old (a kill
/// between leaves the old manifest and fewer of its members), a member that cannot go fails the
/// item, and a run holds its stream's lock (`CacheStore.tryLockStream`) from before the manifest
/// is asked for again to the end of its members, so a second run waits instead of interleaving.
extension Prefetcher {
    /// A cached manifest to ask the origin about before the run reads it.
    struct StaleManifest {
        let url: String
        let key: CacheKey
        /// The root of its stream (itself, or the master playlist naming it).
        let root: CacheKey
        let validators: Validators
        let contentType: String?
        let bytes: [UInt8]
        /// Where the cached copy was answered (its relative URLs resolve against it).
        let base: String
        /// An MPD (else an HLS playlist).
        let mpd: Bool
        /// What the cached manifest named: the members dropped when it changed.
        let named: [CacheKey]
        /// A master's media playlist given by its own URL (a stream root for its run): the roots
        /// of the streams it is a member of, released from the members dropped and marked to be
        /// asked for again when it changed.
        var owners: [CacheKey] = []
        /// The stream is complete, for other choices than this run's (`choiceNeedsUncached`).
        var newChoice = false
        /// A master that stands (unchanged, or the same under the key rules) whose cached media
        /// playlists were asked for again too (`keepingUnchangedVariants`): what of its stream
        /// no playlist confirmed names (a changed playlist's members, those no cached playlist
        /// names any more) goes all the same.
        var dropIfStanding: [CacheKey] = []
        /// The media playlists asked for again with it: the run does not ask them once more.
        var asked: Set<CacheKey> = []
        /// One of those the origin gave no answer to judge by (an error status, the network):
        /// the item fails as for the master's own, nothing dropped.
        var askFailed: (why: String, remedy: PrefetchError.Remedy)?
        /// How the stream stood, as its lines say it.
        var since: String { newChoice ? "since the stream was cached for another choice" : "since the stream was partly cached" }
    }

    /// A manifest cached whole under a run item's URL, read once for what the run does with it:
    /// a live one is fetched again (`liveRefetch`), a static one asked for again when its stream
    /// is partial (`staleManifest`).
    struct CachedManifest {
        let url: String
        let key: CacheKey
        let entry: CacheEntry
        /// An MPD (else an HLS playlist).
        let mpd: Bool
        /// A dynamic MPD, or a media playlist without EXT-X-ENDLIST.
        let live: Bool
    }

    /// The manifest cached complete under `url`; nil when there is none (not cached whole, a
    /// video, a segment).
    func cachedManifest(_ url: String) -> CachedManifest? {
        let key = options.keyRules.key(for: url)
        // Every item of a run comes here: its first bytes decide before the whole is read.
        guard let e = (try? store.catalog.entry(key: key)) ?? nil, e.isComplete, let length = e.length, length > 0 else { return nil }
        let head = store.cachedBytes(of: e, count: 4096) ?? []
        if length <= Int64(HLSPlaylist.maxBytes), HLSPlaylist.looksLikePlaylist(firstBytes: head.prefix(16), contentType: e.contentType) {
            guard let playlist = store.cachedPlaylist(e, keyRules: options.keyRules, base: e.latestURL)?.playlist else { return nil }
            var live = false
            if case .media(let media) = playlist { live = media.isLive }
            return CachedManifest(url: url, key: key, entry: e, mpd: false, live: live)
        }
        if length <= Int64(MPD.maxBytes), MPD.looksLikeMPD(firstBytes: head, contentType: e.contentType) {
            guard let mpd = store.cachedMPD(e)?.mpd else { return nil }
            return CachedManifest(url: url, key: key, entry: e, mpd: true, live: mpd.isDynamic)
        }
        return nil
    }

    /// The static manifest `m` (an MPD, a VOD or master playlist) of the stream `root` when that
    /// stream is partly cached (not complete as `ls` says it), or complete while `item`'s choice
    /// (`--variant`, `--audio`) names members not cached (`choiceNeedsUncached`); nil when there
    /// is nothing to ask (a complete stream asked for again with a choice it holds).
    /// `owners`: for a master's media playlist given by its own URL, the roots of the streams it
    /// is a member of; it is then a stream of its own for this run (itself and what it names).
    func staleManifest(_ m: CachedManifest, root: CacheKey, item: PrefetchItem, owners: [CacheKey] = []) -> StaleManifest? {
        let (url, key, e) = (m.url, m.key, m.entry)
        // (Only now, a manifest known: the catalog's streams are read.)
        var found = (try? store.catalog.stream(root: root)) ?? nil
        if found == nil, !owners.isEmpty, !m.mpd, key == root, let p = store.cachedPlaylist(e, keyRules: options.keyRules)?.playlist {
            found = StreamRecord(root: key, format: "hls", members: [.init(key: key, role: .manifest)]
                                 + p.members.map { .init(key: options.keyRules.key(for: $0.url), role: $0.role) })
        }
        guard let stream = found else { return nil }
        let members = stream.keys.filter { $0 != root }
        // Partial as `ls` says it (a variant never chosen does not make it partial).
        guard let summary = try? StreamInventory(store: store, keyRules: options.keyRules).summary(stream) else { return nil }
        let newChoice = summary.isComplete
        if newChoice { guard key == root, choiceNeedsUncached(m, item: item) else { return nil } }
        guard let bytes = store.cachedBytes(of: e), Int64(bytes.count) == e.length else { return nil }
        // The root named all the stream holds; a media playlist of a master, its own members.
        var named = members
        if key != root {
            guard let playlist = try? HLSPlaylist.parse(bytes, url: e.latestURL) else { return nil }
            named = playlist.members.map { options.keyRules.key(for: $0.url) }.filter { $0 != key && $0 != root }
        }
        let base = ((try? store.catalog.finalURL(of: key)) ?? nil) ?? e.latestURL
        return StaleManifest(url: url, key: key, root: root, validators: e.validators, contentType: e.contentType,
                             bytes: bytes, base: base, mpd: m.mpd, named: named, owners: owners, newChoice: newChoice)
    }

    /// What the origin answered about `m`, carried out before the run reads it. An error: the
    /// item fails with it, nothing of the stream fetched (its cached copy may be stale).
    func revalidated(_ m: StaleManifest, _ outcome: ManifestRevalidation.Outcome) -> PrefetchError? {
        if let f = m.askFailed { return .staleManifest(why: f.why, remedy: f.remedy, newChoice: m.newChoice) }
        switch outcome {
        case .unchanged:
            if let e = droppingUnconfirmed(m) { return e }
            askedAgain(m)
            return nil
        case .failed(let why, let remedy):
            return .staleManifest(why: why, remedy: remedy, newChoice: m.newChoice)
        case .changed(let body, let validators, let contentType, let finalURL):
            // Only a manifest of the same kind that reads replaces it (an error page answered 200,
            // a broken deploy): the stream is never traded for something it cannot be read from.
            if let why = unreadable(body, like: m, contentType: contentType, base: finalURL ?? m.url) {
                return .staleManifest(why: "the origin's answer \(why)", remedy: .fixOrigin, newChoice: m.newChoice)
            }
            guard let lock = (try? store.tryLockWriter(key: m.key)) ?? nil else {
                return .lockBusy
            }
            defer { lock.release() }
            // The same stream in other bytes (signed anew, attributes reordered) names the same
            // entries: its members stay; the new copy replaces the cached one, its URLs the ones
            // that answer now.
            if stands(m, body, finalURL: finalURL) {
                if let e = droppingUnconfirmed(m) { return e }
                do {
                    try store.storeWhole(body, key: m.key, url: m.url, validators: validators, contentType: contentType ?? m.contentType)
                } catch {
                    return PrefetchError(error)
                }
                if let finalURL { try? store.catalog.recordFinalURL(key: m.key, url: finalURL) }
                askedAgain(m)
                return nil
            }
            // Members of the old version go (a re-encode keeps the URLs and changes the bytes)
            // BEFORE the new manifest's bytes replace the old: a run killed at any point leaves
            // the old manifest with what is left of its members, or the new one with none of
            // them. One in use (an export reading it) fails the item; the old manifest stays.
            // Another stream's manifest naming members of the old version (two MPDs naming the
            // same segment URLs) may be of the old version too: its copy goes first.
            // A master's media playlist given by its own URL found changed: the origin
            // re-encoded. Its masters are marked first (a kill from here on leaves them marked,
            // never complete), then every member of their streams goes but the masters
            // themselves: the other variants, renditions, segments, init sections and keys may be
            // of the old encode (two playlists naming the same segments or one AES key), and
            // nothing of it is left to mix with the new one (hostile probe h9a, F6).
            var named = m.named
            var ownersNamed: [CacheKey] = []
            if !m.owners.isEmpty {
                do {
                    for owner in m.owners { try store.catalog.markRootToAsk(owner, true) }
                    for owner in m.owners {
                        for k in ((try store.catalog.stream(root: owner))?.keys ?? []) where k != m.key && !m.owners.contains(k) { ownersNamed.append(k) }
                    }
                } catch {
                    return PrefetchError(error)
                }
                named = Array(Set(named).union(ownersNamed)).sorted()
            }
            if let e = dropOtherManifests(naming: named, root: m.root, url: m.url, besides: Set(m.owners)) { return e }
            let dropped: Int
            switch dropOldMembers(named, root: m.root, why: "its manifest changed on the origin \(m.since)") {
            case .failure(let e): return e
            case .success(let n): dropped = n
            }
            // Its masters' streams: the old members leave them (the media playlists' rows stay:
            // their masters still name them, now not cached).
            do {
                let playlists = Set((try store.catalog.playlistOwners(among: named)).keys)
                for owner in m.owners { try store.catalog.releaseMembers(named.filter { !playlists.contains($0) }, root: owner) }
            } catch {
                return PrefetchError(error)
            }
            do {
                try store.storeWhole(body, key: m.key, url: m.url, validators: validators, contentType: contentType ?? m.contentType)
            } catch {
                return PrefetchError(error)
            }
            if let finalURL { try? store.catalog.recordFinalURL(key: m.key, url: finalURL) }
            let what = dropped == 0 ? "nothing cached from the old one had to go"
                : "the \(dropped) \(dropped == 1 ? "entry" : "entries") cached from the old one \(dropped == 1 ? "was" : "were") dropped"
            let from = m.newChoice ? "this run's choice is fetched from the new one" : "the stream is completed from the new one"
            let hint = ManifestRevalidation.tokenHint(body, m.bytes, mpd: m.mpd, rules: options.keyRules).map { "; " + $0 } ?? ""
            events(.note(url: m.url, message: "its manifest changed on the origin \(m.since): \(from); \(what)\(hint)"))
            for owner in m.owners {
                let master = ((try? store.catalog.entry(key: owner)) ?? nil)?.latestURL ?? owner.hex
                events(.note(url: m.url, message: "it is a member of the stream of \(master): a member of it changed on the origin, so what that stream's other playlists named went too (it may be of the old encode), and its master is asked for again by its next run"))
            }
            askedAgain(m)
            return nil
        }
    }

    /// A master that stands, its media playlists asked for again with it: what of its stream no
    /// playlist confirmed names goes (held entries only) before the run reads it, so a member of
    /// a changed playlist, or one a killed `evict`/`verify --fix` left named by no cached
    /// playlist, is never completed into the stream. Nil when all of it went (or none had to).
    private func droppingUnconfirmed(_ m: StaleManifest) -> PrefetchError? {
        guard !m.dropIfStanding.isEmpty else { return nil }
        let held: [CacheKey]
        do { held = try store.catalog.entries(keys: m.dropIfStanding).filter { !$0.value.ranges.isEmpty }.map(\.key).sorted() } catch { return PrefetchError(error) }
        guard !held.isEmpty else { return nil }
        let why = "a media playlist of its stream changed on the origin, or is no longer cached"
        if let e = dropOtherManifests(naming: held, root: m.root, url: m.url) { return e }
        switch dropOldMembers(held, root: m.root, why: why) {
        case .failure(let e): return e
        case .success(let n):
            events(.note(url: m.url, message: "\(why): the \(n) \(n == 1 ? "entry" : "entries") of its stream no cached playlist the origin confirmed names \(n == 1 ? "was" : "were") dropped (nothing says which version \(n == 1 ? "it is" : "they are")), and the stream is completed from what the origin serves now"))
            return nil
        }
    }

    /// The root `m` was asked for again and stands: a mark that its stream must be
    /// (`StreamRole.manifestToAsk`) is cleared.
    private func askedAgain(_ m: StaleManifest) {
        if m.key == m.root { try? store.catalog.markRootToAsk(m.root, false) }
    }

    /// Drops the entries among `keys` (what a stream's old manifest named) that hold bytes, each
    /// alone, then takes `keys` out of the stream `root`: what the new manifest names is fetched,
    /// and recorded, as for a first run. A member that cannot go (in use: an export or a `verify`
    /// reading it) keeps the stream as it is (its members still recorded, so the next run drops
    /// them) and fails the item: it is never counted as cached under a manifest that did not
    /// name its bytes. Returns how many entries went.
    func dropOldMembers(_ keys: [CacheKey], root: CacheKey, why: String) -> Result<Int, PrefetchError> {
        let held: [CacheKey: CacheEntry]
        do { held = try store.catalog.entries(keys: keys).filter { !$0.value.ranges.isEmpty } } catch { return .failure(PrefetchError(error)) }
        var dropped = 0
        if !held.isEmpty {
            var c = Evictor.Criteria()
            c.keys = Set(held.keys)
            c.alone = true
            do {
                // One in use now keeps them all (an export reading the stream gets it whole); one
                // taken between this look and the eviction still fails the item below.
                let look = try Evictor(store: store).evict(c, dryRun: true)
                let out = look.skipped.isEmpty ? try Evictor(store: store).evict(c, dryRun: false) : look
                dropped = look.skipped.isEmpty ? out.evicted.count : 0
                if let first = out.skipped.first {
                    let n = out.skipped.count
                    return .failure(.streamBusy("\(why), but \(n) \(n == 1 ? "entry" : "entries") cached from the old one could not be dropped (\(first.entry.latestURL): \(first.reason)): the stream was left as it was, so it is never completed from two versions; run again once \(n == 1 ? "it is" : "they are") free"))
                }
            } catch {
                return .failure(PrefetchError(error))
            }
        }
        do { try store.catalog.releaseMembers(keys, root: root) } catch { return .failure(PrefetchError(error)) }
        return .success(dropped)
    }

    /// The cached copies of the other streams' manifests that name any of `keys` (the members of
    /// a stream whose manifest changed, about to be dropped and fetched from the new one) are
    /// dropped, their entries kept (as `verify --fix` drops damaged bytes): each such stream's
    /// next run finds its manifest no longer cached whole, drops its members
    /// (`dropMembersOfLostManifest`) and fetches the manifest the origin serves now. Without it,
    /// the other stream, complete again once this run refills the shared members from the new
    /// version, would be served and exported under its old manifest (hostile probe h3, F5). One
    /// that cannot be dropped (its writer busy) fails the item, nothing dropped yet.
    func dropOtherManifests(naming keys: [CacheKey], root: CacheKey, url: String, besides: Set<CacheKey> = []) -> PrefetchError? {
        let out = Self.dropOtherManifests(store, naming: keys, root: root, besides: besides)
        for other in out.dropped {
            events(.note(url: url, message: "its manifest changed on the origin, and \(other) names members of its old version too: that manifest's cached copy was dropped, so its next run drops what it named and fetches it again"))
        }
        if let busy = out.busy {
            return .streamBusy("its manifest changed on the origin, and the manifest of another stream naming the same members (\(busy)) could not be dropped (in use by another vcache process): nothing was dropped, so neither stream is completed from two versions; run again once it is free")
        }
        return out.error.map { PrefetchError($0) }
    }

    /// What `dropOtherManifests` did: the URLs of the manifests whose cached copies were
    /// dropped, and what stopped it (a manifest whose writer another process holds, an error).
    struct OtherManifestsDropped {
        var dropped: [String] = []
        var busy: String?
        var error: (any Error)?
    }

    /// `dropOtherManifests` of prefetch and serve (`Proxy.takeNewVersion`): the cached copies of
    /// the streams other than `root` (and `besides`) whose manifests name any of `keys` are
    /// dropped, their entries kept, each under its writer lock; it stops at the first it cannot.
    static func dropOtherManifests(_ store: CacheStore, naming keys: [CacheKey], root: CacheKey, besides: Set<CacheKey> = []) -> OtherManifestsDropped {
        var out = OtherManifestsDropped()
        let others: Set<CacheKey>
        do { others = try store.catalog.otherRoots(naming: keys, besides: root).subtracting(besides) } catch { out.error = error; return out }
        for other in others.sorted() {
            guard let e = (try? store.catalog.entry(key: other)) ?? nil, !e.ranges.isEmpty else { continue }
            guard let lock = (try? store.tryLockWriter(key: other)) ?? nil else {
                out.busy = e.latestURL
                return out
            }
            defer { lock.release() }
            do {
                try store.dropVersion(key: other, validators: Validators(length: nil, etag: nil, lastModified: nil)).close()
            } catch {
                out.error = error
                return out
            }
            out.dropped.append(e.latestURL)
        }
        return out
    }

    /// A stream root whose manifest is no longer cached whole (`verify --fix` dropped its damaged
    /// bytes, a run killed while storing it) while members of its stream still hold bytes: no
    /// cached manifest says which version those are, so they go before it is fetched again, as
    /// for a changed one. Nil when there was nothing to drop or all of it went.
    func dropMembersOfLostManifest(root: CacheKey, url: String) -> PrefetchError? {
        guard let e = (try? store.catalog.entry(key: root)) ?? nil, !e.isComplete else { return nil }
        // Read again as its writer: one writing it now (serve storing its answer) completes it.
        guard let lock = (try? store.tryLockWriter(key: root)) ?? nil else { return nil }
        defer { lock.release() }
        guard let now = (try? store.catalog.entry(key: root)) ?? nil, !now.isComplete,
              let stream = (try? store.catalog.stream(root: root)) ?? nil else { return nil }
        let members = stream.keys.filter { $0 != root }
        guard ((try? store.catalog.entries(keys: members)) ?? [:]).contains(where: { !$0.value.ranges.isEmpty }) else { return nil }
        switch dropOldMembers(members, root: root, why: "its manifest is no longer cached whole while its stream's members are") {
        case .failure(let e): return e
        case .success(let n):
            events(.note(url: url, message: "its manifest is no longer cached whole while its stream's members were: nothing says which version they are, so the \(n) \(n == 1 ? "entry" : "entries") cached of them \(n == 1 ? "was" : "were") dropped and the stream is completed from the manifest the origin serves now"))
            return nil
        }
    }

    /// Whether `body`, the origin's answer for `m` from `finalURL`, is the same stream as the
    /// cached copy: answered from the same folder (its relative URLs resolve alike:
    /// `ManifestRevalidation.outcome`) and the same under the key rules.
    func stands(_ m: StaleManifest, _ body: [UInt8], finalURL: String?) -> Bool {
        let moved = finalURL.map { ManifestRevalidation.folder(of: $0) != ManifestRevalidation.folder(of: m.base) } ?? false
        return !moved && ManifestRevalidation.sameUnderKeyRules(body, m.bytes, mpd: m.mpd, rules: options.keyRules)
    }

    /// Why `body` cannot stand for the cached manifest of `m` (another kind, or not readable), nil when it can.
    private func unreadable(_ body: [UInt8], like m: StaleManifest, contentType: String?, base: String) -> String? {
        if m.mpd {
            guard MPD.looksLikeMPD(firstBytes: Array(body.prefix(4096)), contentType: contentType) else { return "is not an MPD" }
            do { _ = try MPD.parse(body, url: base) } catch { return "cannot be read (\(error))" }
        } else {
            guard HLSPlaylist.looksLikePlaylist(firstBytes: body.prefix(16), contentType: contentType) else { return "is not a playlist" }
            do { _ = try HLSPlaylist.parse(body, url: base) } catch { return "cannot be read (\(error))" }
        }
        return nil
    }
}
