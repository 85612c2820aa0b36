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
/// that has nothing to fetch makes no request.
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
        let maxBytes: Int
        /// What the cached manifest named: the members dropped when it changed.
        let named: [CacheKey]
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
        var maxBytes: Int { mpd ? MPD.maxBytes : HLSPlaylist.maxBytes }
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
    /// stream is partly cached (not complete as `ls` says it); nil when there is nothing to ask
    /// (a complete stream).
    func staleManifest(_ m: CachedManifest, root: CacheKey) -> StaleManifest? {
        let (url, key, e, maxBytes) = (m.url, m.key, m.entry, m.maxBytes)
        // (Only now, a manifest known: the catalog's streams are read.)
        guard let stream = (try? store.catalog.stream(root: root)) ?? nil else { return nil }
        let members = stream.keys.filter { $0 != root }
        // Partial as `ls` says it (a variant never chosen does not make it partial).
        guard let summary = try? StreamInventory(store: store, keyRules: options.keyRules).summary(stream), !summary.isComplete else { return nil }
        guard let bytes = store.cachedBytes(of: e), Int64(bytes.count) == e.length else { return nil }
        // The root named all the stream holds; a media playlist of a master, its own members.
        var named = members
        if key != root {
            guard let playlist = try? HLSPlaylist.parse(bytes, url: e.latestURL) else { return nil }
            named = playlist.members.map { options.keyRules.key(for: $0.url) }.filter { $0 != key && $0 != root }
        }
        let base = ((try? store.catalog.finalURL(of: key)) ?? nil) ?? e.latestURL
        return StaleManifest(url: url, key: key, root: root, validators: e.validators, contentType: e.contentType,
                             bytes: bytes, base: base, maxBytes: maxBytes, named: named)
    }

    /// What the origin answered about `m`, carried out before the run reads it. An error: the
    /// item fails with it, nothing of the stream fetched (its cached copy may be stale).
    func revalidated(_ m: StaleManifest, _ outcome: ManifestRevalidation.Outcome) -> PrefetchError? {
        switch outcome {
        case .unchanged:
            return nil
        case .failed(let why, let remedy):
            return .staleManifest(why: why, remedy: remedy)
        case .changed(let body, let validators, let contentType, let finalURL):
            // Only a manifest of the same kind that reads replaces it (an error page answered 200,
            // a broken deploy): the stream is never traded for something it cannot be read from.
            if let why = unreadable(body, like: m, contentType: contentType, base: finalURL ?? m.url) {
                return .staleManifest(why: "the origin's answer \(why)", remedy: .fixOrigin)
            }
            guard let lock = (try? store.tryLockWriter(key: m.key)) ?? nil else {
                return .lockBusy
            }
            defer { lock.release() }
            do {
                try store.storeWhole(body, key: m.key, url: m.url, validators: validators, contentType: contentType ?? m.contentType)
            } catch {
                return PrefetchError(error)
            }
            if let finalURL { try? store.catalog.recordFinalURL(key: m.key, url: finalURL) }
            // The same stream in other bytes (signed anew, attributes reordered) names the same
            // entries: its members stay; the new copy is kept, its URLs the ones that answer now.
            if !moved(m, finalURL), ManifestRevalidation.sameUnderKeyRules(body, m.bytes, mpd: m.maxBytes == MPD.maxBytes, rules: options.keyRules) {
                return nil
            }
            // Members of the old version go (a re-encode keeps the URLs and changes the bytes):
            // what the new manifest names is fetched, and recorded, as for a first run.
            let held = ((try? store.catalog.entries(keys: m.named)) ?? [:]).filter { !$0.value.ranges.isEmpty }
            try? store.catalog.releaseMembers(m.named, root: m.root)
            var dropped = 0
            if !held.isEmpty {
                var c = Evictor.Criteria()
                c.keys = Set(held.keys)
                c.alone = true
                dropped = ((try? Evictor(store: store).evict(c, dryRun: false))?.evicted.count) ?? 0
            }
            let what = dropped == 0 ? "nothing cached from the old one had to go"
                : "the \(dropped) \(dropped == 1 ? "entry" : "entries") cached from the old one \(dropped == 1 ? "was" : "were") dropped"
            events(.note(url: m.url, message: "its manifest changed on the origin since the stream was partly cached: the stream is completed from the new one; \(what)"))
            return nil
        }
    }

    /// Answered from another folder than the cached copy was (`ManifestRevalidation.outcome`).
    private func moved(_ m: StaleManifest, _ finalURL: String?) -> Bool {
        finalURL.map { ManifestRevalidation.folder(of: $0) != ManifestRevalidation.folder(of: m.base) } ?? false
    }

    /// Why `body` cannot stand for the cached manifest of `m` (another kind, or not readable), nil when it can.
    private func unreadable(_ body: [UInt8], like m: StaleManifest, contentType: String?, base: String) -> String? {
        if m.maxBytes == MPD.maxBytes {
            guard MPD.looksLikeMPD(firstBytes: Array(body.prefix(4096)), contentType: contentType) else { return "is not an MPD" }
            do { _ = try MPD.parse(body, url: base) } catch { return "cannot be read (\(error))" }
        } else {
            guard HLSPlaylist.looksLikePlaylist(firstBytes: body.prefix(16), contentType: contentType) else { return "is not a playlist" }
            do { _ = try HLSPlaylist.parse(body, url: base) } catch { return "cannot be read (\(error))" }
        }
        return nil
    }
}
