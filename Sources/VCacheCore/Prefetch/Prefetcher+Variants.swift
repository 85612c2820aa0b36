#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An HLS master playlist that changed (a variant added, the variants reordered, a rendition
/// renamed) need not have changed its variants: each media playlist the old and the new master
/// both name, cached whole, is asked for again on its own (conditionally, as any cached
/// manifest); unchanged (304, the same bytes, or the same under the key rules), it stays with
/// every member it names. What the others named, and what the new master no longer names, is
/// dropped as before (`revalidated`), so no variant is ever completed from two encodes
/// (hostile probe h2, F14).
extension Prefetcher {
    /// `m`, a master whose `outcome` is a change, with the members of its unchanged media
    /// playlists taken out of what is dropped; `m` itself otherwise. `then` is called once, on
    /// the run's loop, when every media playlist asked for has answered.
    /// A master that stands (a 304, the same bytes or the same under the key rules) while its
    /// stream is partial or marked (`StreamRole.manifestToAsk`), or complete for another choice
    /// than this run's, has its cached media playlists asked for again as well
    /// (`askingMediaPlaylists`): a 304 of the master alone says nothing of them (hostile probes
    /// h9a, F2, and h9b, F4: a re-encode keeping the master left the cached audio rendition of
    /// the old encode beside the new variant this run chose).
    func keepingUnchangedVariants(_ m: StaleManifest, _ outcome: ManifestRevalidation.Outcome, on fetcher: Fetcher, then: @escaping (StaleManifest) -> Void) {
        if m.key == m.root, case .master? = try? HLSPlaylist.parse(m.bytes, url: m.base) {
            switch outcome {
            case .unchanged:
                return askingMediaPlaylists(m, on: fetcher, then: then)
            case .changed(let body, _, _, let finalURL):
                if stands(m, body, finalURL: finalURL) {
                    return askingMediaPlaylists(m, on: fetcher, then: then)
                }
            case .failed:
                return then(m)
            }
        }
        guard m.key == m.root, case .changed(let body, _, _, let finalURL) = outcome,
              case .master(let oldMaster)? = try? HLSPlaylist.parse(m.bytes, url: m.base),
              let new = try? HLSPlaylist.parse(body, url: finalURL ?? m.url), case .master(let newMaster) = new,
              !ManifestRevalidation.sameUnderKeyRules(body, m.bytes, mpd: false, rules: options.keyRules) else { return then(m) }
        let rules = options.keyRules
        let named = Set(m.named)
        let (was, now) = (Self.entries(oldMaster, rules), Self.entries(newMaster, rules))
        var asks: [(url: String, key: CacheKey, bytes: [UInt8], base: String, validators: Validators)] = []
        var seen = Set<CacheKey>()
        for (url, _) in new.members {
            let key = rules.key(for: url)
            // A variant whose master entry changed (another RESOLUTION, CODECS, BANDWIDTH: a
            // re-encode under the same names, its media playlist byte for byte the same) goes.
            guard named.contains(key), seen.insert(key).inserted, Self.sameEntries(was[key] ?? [], now[key] ?? []),
                  let c = cachedManifest(url), !c.mpd, !c.live,
                  let bytes = store.cachedBytes(of: c.entry), Int64(bytes.count) == c.entry.length else { continue }
            let base = ((try? store.catalog.finalURL(of: key)) ?? nil) ?? c.entry.latestURL
            asks.append((url, key, bytes, base, c.entry.validators))
        }
        guard !asks.isEmpty else { return then(m) }
        let state = VariantAsks(count: asks.count)
        let finish = { [self] in
            state.requests.removeAll()
            then(dropping(m, keptPlaylists: state.kept))
        }
        for a in asks {
            let r = ManifestRevalidation.start(url: a.url, cached: a.bytes, cachedBase: a.base, validators: a.validators, mpd: false,
                                               options: options.request, policy: RetryPolicy(options), fetcher: fetcher) { [self] o in
                if keepsPlaylist(a.key, url: a.url, cached: a.bytes, base: a.base, o) { state.kept[a.key] = a.bytes }
                state.count -= 1
                if state.count == 0 { finish() }
            }
            if let r { state.requests.append(r) } else { state.count -= 1 }
        }
        // (Answers come on later turns of the loop: none has been counted yet.)
        if state.count == 0 { finish() }
    }

    /// `m`, a master that stands, with each media playlist of it cached whole asked for again
    /// (conditionally: a 304 costs no bytes). What a changed one named, and what of the stream no
    /// cached playlist names (a killed `evict` or `verify --fix` left it), is set to go
    /// (`StaleManifest.dropIfStanding`) even when shared with an unchanged one: its bytes may be
    /// of the old encode. A live media playlist changes by design: such a stream is left as it is.
    private func askingMediaPlaylists(_ m: StaleManifest, on fetcher: Fetcher, then: @escaping (StaleManifest) -> Void) {
        guard let old = try? HLSPlaylist.parse(m.bytes, url: m.base) else { return then(m) }
        let rules = options.keyRules
        var asks: [(url: String, key: CacheKey, bytes: [UInt8], base: String, validators: Validators)] = []
        var seen = Set<CacheKey>()
        for (url, role) in old.members where role == .playlist {
            let key = rules.key(for: url)
            guard seen.insert(key).inserted, let c = cachedManifest(url), !c.mpd else { continue }
            if c.live { return then(m) }
            guard let bytes = store.cachedBytes(of: c.entry), Int64(bytes.count) == c.entry.length else { continue }
            let base = ((try? store.catalog.finalURL(of: key)) ?? nil) ?? c.entry.latestURL
            asks.append((url, key, bytes, base, c.entry.validators))
        }
        let state = VariantAsks(count: asks.count)
        let finish = { [self] in
            state.requests.removeAll()
            var d = m
            d.dropIfStanding = unconfirmed(m, old: old, kept: state.kept)
            d.asked = Set(asks.map(\.key))
            d.askFailed = state.failed
            then(d)
        }
        for a in asks {
            let r = ManifestRevalidation.start(url: a.url, cached: a.bytes, cachedBase: a.base, validators: a.validators, mpd: false,
                                               options: options.request, policy: RetryPolicy(options), fetcher: fetcher) { [self] o in
                if keepsPlaylist(a.key, url: a.url, cached: a.bytes, base: a.base, o) { state.kept[a.key] = a.bytes }
                if case .failed(let why, let remedy) = o, state.failed == nil { state.failed = ("\(a.url): \(why)", remedy) }
                state.count -= 1
                if state.count == 0 { finish() }
            }
            if let r { state.requests.append(r) } else { state.count -= 1 }
        }
        if state.count == 0 { finish() }
    }

    /// What of `m`'s stream no playlist the origin confirmed (`kept`) names: the members of the
    /// others (changed, or not cached), those no cached playlist names, and a member a kept
    /// playlist shares with a changed one. The master's own members (a session key) stay.
    private func unconfirmed(_ m: StaleManifest, old: HLSPlaylist, kept: [CacheKey: [UInt8]]) -> [CacheKey] {
        let rules = options.keyRules
        func members(_ key: CacheKey) -> [CacheKey]? {
            guard let e = (try? store.catalog.entry(key: key)) ?? nil, e.isComplete, let bytes = store.cachedBytes(of: e),
                  let p = try? HLSPlaylist.parse(bytes, url: e.latestURL) else { return nil }
            return p.members.map { rules.key(for: $0.url) }
        }
        var keep = Set(kept.keys)
        var others = Set<CacheKey>()
        for (url, role) in old.members {
            let key = rules.key(for: url)
            if role != .playlist {
                keep.insert(key)
            } else if kept[key] != nil {
                guard let names = members(key) else { return m.named }
                keep.formUnion(names)
            } else if let names = members(key) {
                others.formUnion(names)
            }
        }
        keep.subtract(others.subtracting(kept.keys))
        return m.named.filter { !keep.contains($0) }
    }

    /// What a master says of each playlist it names, by key: its variants, renditions and
    /// I-frame streams, their place in the text and the URI's spelling aside.
    private static func entries(_ m: HLSMasterPlaylist, _ rules: CacheKeyRules) -> [CacheKey: [String]] {
        var out: [CacheKey: [String]] = [:]
        for var v in m.variants {
            let key = rules.key(for: v.uri)
            (v.uri, v.rawURI, v.line) = ("", "", 0)
            out[key, default: []].append(String(describing: v))
        }
        for var r in m.renditions {
            guard let uri = r.uri else { continue }
            (r.uri, r.line) = (nil, 0)
            out[rules.key(for: uri), default: []].append(String(describing: r))
        }
        for var i in m.iFrameStreams {
            let key = rules.key(for: i.uri)
            (i.uri, i.line) = ("", 0)
            out[key, default: []].append(String(describing: i))
        }
        return out
    }

    private static func sameEntries(_ a: [String], _ b: [String]) -> Bool { a.sorted() == b.sorted() }

    /// Whether the media playlist `key` is unchanged by `o`; one the same under the key rules
    /// in other bytes is stored as it is answered now.
    private func keepsPlaylist(_ key: CacheKey, url: String, cached: [UInt8], base: String, _ o: ManifestRevalidation.Outcome) -> Bool {
        switch ManifestRevalidation.judged(o, cached: cached, cachedBase: base, mpd: false, rules: options.keyRules) {
        case .unchanged:
            return true
        case .changed(let body, let validators, let contentType, let finalURL):
            if let f = finalURL, ManifestRevalidation.folder(of: f) != ManifestRevalidation.folder(of: base) { return false }
            guard ManifestRevalidation.sameUnderKeyRules(body, cached, mpd: false, rules: options.keyRules),
                  let lock = (try? store.tryLockWriter(key: key)) ?? nil else { return false }
            defer { lock.release() }
            return (try? store.storeWhole(body, key: key, url: url, validators: validators, contentType: contentType)) != nil
        case .failed:
            return false
        }
    }

    /// `m` with the playlists `kept` (their cached bytes) and what they name taken out of what
    /// it drops; a member another (changed) playlist also names still goes.
    private func dropping(_ m: StaleManifest, keptPlaylists kept: [CacheKey: [UInt8]]) -> StaleManifest {
        guard !kept.isEmpty else { return m }
        let rules = options.keyRules
        func members(_ key: CacheKey) -> [CacheKey]? {
            guard let e = (try? store.catalog.entry(key: key)) ?? nil, let bytes = store.cachedBytes(of: e),
                  let p = try? HLSPlaylist.parse(bytes, url: e.latestURL) else { return nil }
            return p.members.map { rules.key(for: $0.url) }
        }
        var keep = Set(kept.keys)
        var others = Set<CacheKey>()
        guard let old = try? HLSPlaylist.parse(m.bytes, url: m.base) else { return m }
        for (url, _) in old.members {
            let key = rules.key(for: url)
            if kept[key] != nil {
                guard let names = members(key) else { return m }
                keep.formUnion(names)
            } else if let names = members(key) {
                others.formUnion(names)
            }
        }
        keep.subtract(others.subtracting(kept.keys))
        return StaleManifest(url: m.url, key: m.key, root: m.root, validators: m.validators, contentType: m.contentType,
                             bytes: m.bytes, base: m.base, mpd: m.mpd, named: m.named.filter { !keep.contains($0) }, newChoice: m.newChoice)
    }
}

/// The media playlists of a changed master being asked for again: the loop's only (`Prefetcher`).
private final class VariantAsks {
    var count: Int
    var kept: [CacheKey: [UInt8]] = [:]
    /// The first asked that gave no answer to judge by (`askingMediaPlaylists`).
    var failed: (why: String, remedy: PrefetchError.Remedy)?
    /// Held until every one answered (a transfer holds its delegate weakly).
    var requests: [ManifestRevalidation] = []
    init(count: Int) { self.count = count }
}
