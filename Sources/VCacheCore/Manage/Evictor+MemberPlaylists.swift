#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A master's media playlist going alone (`evict URL`, `verify --fix` dropping its damaged
/// bytes) leaves its segments, init sections and keys named by no cached playlist: nothing
/// cached says which version of the stream they are, and a later copy of the playlist (a player
/// through serve, the next prefetch) would be answered or completed with them. They go with it
/// (those another cached manifest still names stay), and each stream it was a member of is
/// marked partial until its root is asked for again (`StreamRole.manifestToAsk`), so the next run
/// of the master asks the origin, then fetches the playlist as it is now (Docs/hls.md).
extension Evictor {
    public struct MemberPlaylistFallout: Sendable {
        /// The entries that go with the playlists (held bytes, named by no cached manifest left).
        public var members: Set<CacheKey> = []
        /// For each of those, the playlist that named it (the first one going).
        public var namedBy: [CacheKey: CacheKey] = [:]
        /// The roots of the streams the playlists were members of (not going themselves).
        public var roots: [CacheKey] = []
        /// The media playlists among the keys given (a master's variant or rendition).
        public var playlists: Set<CacheKey> = []

        public init() {}

        /// Marks `roots` partial until asked for again, once one of `playlists` went (`gone`).
        public func markRoots(in catalog: Catalog, gone: some Sequence<CacheKey>) throws {
            guard gone.contains(where: playlists.contains) else { return }
            for root in roots { try catalog.markRootToAsk(root, true) }
        }

        /// Marks `roots` partial until asked for again BEFORE anything goes (a process killed
        /// between its deletes leaves the masters marked, never complete and unmarked); returns
        /// the roots this marked (not marked before), for `unmarkUnless`.
        public func markRootsFirst(in catalog: Catalog) throws -> [CacheKey] {
            guard !playlists.isEmpty else { return [] }
            var marked: [CacheKey] = []
            for root in roots where try catalog.streamRole(ofRoot: root) != .manifestToAsk {
                try catalog.markRootToAsk(root, true)
                marked.append(root)
            }
            return marked
        }

        /// Clears the marks `markRootsFirst` set when none of `playlists` went (`gone`: in use).
        public func unmark(_ marked: [CacheKey], in catalog: Catalog, unless gone: some Sequence<CacheKey>) throws {
            guard !gone.contains(where: playlists.contains) else { return }
            for root in marked { try catalog.markRootToAsk(root, false) }
        }
    }

    /// What goes with `keys` when the media playlists among them go alone; `keys` that are no
    /// master's media playlist add nothing. `keyRules`: how the manifests' URLs map to keys.
    public func fallout(ofRemoving keys: Set<CacheKey>, keyRules: CacheKeyRules) throws -> MemberPlaylistFallout {
        var out = MemberPlaylistFallout()
        let owners = try store.catalog.playlistOwners(among: keys).mapValues { $0.filter { !keys.contains($0) } }.filter { !$0.value.isEmpty }
        guard !owners.isEmpty else { return out }
        out.roots = Array(Set(owners.values.joined())).sorted()
        out.playlists = Set(owners.keys)
        let streams = try store.catalog.streams()
        var byRoot: [CacheKey: StreamRecord] = [:]
        var streamsOf: [CacheKey: [CacheKey]] = [:]
        for s in streams {
            byRoot[s.root] = s
            for m in s.members { streamsOf[m.key, default: []].append(s.root) }
        }
        // What each stream's manifests left cached name (its root and media playlists not going).
        var namedLeft: [CacheKey: Set<CacheKey>] = [:]
        func named(_ root: CacheKey) -> Set<CacheKey> {
            if let known = namedLeft[root] { return known }
            var found = Set<CacheKey>()
            for m in byRoot[root]?.members ?? [] where (m.role.isRoot || m.role == .playlist) && !keys.contains(m.key) {
                guard let p = store.cachedPlaylist(key: m.key, keyRules: keyRules)?.playlist else { continue }
                for (url, _) in p.members { found.insert(keyRules.key(for: url)) }
            }
            namedLeft[root] = found
            return found
        }
        // What the playlists going named, as their cached copies say (a damaged one may not read:
        // then every media member of its streams that no manifest left names).
        let media: Set<StreamRole> = [.segment, .initSection, .key]
        var candidates: [CacheKey: CacheKey] = [:]
        for (playlist, roots) in owners.sorted(by: { $0.key < $1.key }) {
            if let p = store.cachedPlaylist(key: playlist, keyRules: keyRules, complete: false)?.playlist {
                for (url, _) in p.members where candidates[keyRules.key(for: url)] == nil { candidates[keyRules.key(for: url)] = playlist }
            } else {
                for root in roots { for m in byRoot[root]?.members ?? [] where media.contains(m.role) && candidates[m.key] == nil { candidates[m.key] = playlist } }
            }
        }
        let held = try store.catalog.entries(keys: Array(candidates.keys).filter { !keys.contains($0) })
        for (key, e) in held where !e.ranges.isEmpty || e.isComplete {
            // Named by a manifest left cached in any stream holding it: it stays for that one.
            guard !(streamsOf[key] ?? []).contains(where: { named($0).contains(key) }) else { continue }
            out.members.insert(key)
            out.namedBy[key] = candidates[key]
        }
        return out
    }
}
