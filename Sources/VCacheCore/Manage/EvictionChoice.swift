#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which entries an eviction removes, decided without I/O: least recently used first (ties by
/// key), those matching every filter, and with a cap only until the cache would fit. A stream
/// (Catalog+Streams.swift) is one unit; an entry several streams name is in each of their units
/// and goes with the last of them. Table-tested in `EvictionChoiceTests`; `Evictor` removes what
/// this chooses and asks again while anything could not go.
public struct EvictionChoice: Equatable, Sendable {
    public struct Skip: Equatable, Sendable {
        public var key: CacheKey
        public var reason: String
    }

    /// Keys to remove, in order.
    public var victims: [CacheKey] { groups.flatMap(\.keys) }
    /// The victims as they go together: a stream's (its root's key; the root first when it goes),
    /// or one entry of no stream (root nil), in order.
    public var groups: [Group] = []
    /// Entries that matched the filters but stay, with the reason, in the order met.
    public var skipped: [Skip] = []
    /// What the cache would use once every victim is gone.
    public var usageAfter: Int64 = 0

    public struct Group: Equatable, Sendable {
        public var root: CacheKey?
        public var keys: [CacheKey]
    }

    /// - Parameters:
    ///   - entries: the catalog's rows.
    ///   - footprint: the measured disk use of what is not a `data` file.
    ///   - excluded: entries known not to go (in use, another user's), with why.
    ///   - streams: the streams each key is a member of (member key to root keys, cached or not:
    ///     `Catalog.streams`). A stream is one unit: used when its most recently used member was,
    ///     partial when any cached member is, kept whole when a member that would go must stay
    ///     (pinned, in use, another user's), kept whole when any member it names is protected
    ///     (this run fills it, or serve plays it: a key not cached yet protects its streams too),
    ///     and removed whole (never half a stream for the cap), but for the members another
    ///     stream that stays names (they leave this stream only). Named (`keys`), its root takes
    ///     the whole stream; a member named alone goes alone.
    public static func choose(_ entries: [CacheEntry], _ c: Evictor.Criteria, footprint: Evictor.Footprint,
                              excluded: [CacheKey: String] = [:], streams: [CacheKey: [CacheKey]] = [:], now: Date) -> EvictionChoice {
        var out = EvictionChoice()
        var usage = footprint.total(entries)
        let streams = c.alone ? [:] : streams
        // Streams a protected key belongs to (cached or not) are in use as a whole.
        let protectedRoots = Set(c.protected.flatMap { streams[$0] ?? [] })
        // Units removed so far (a shared member goes with the last of its streams), and keys chosen.
        var goneRoots = Set<CacheKey>()
        var chosen = Set<CacheKey>()
        for unit in units(entries, streams: streams) {
            if let cap = c.maxSize, usage <= cap { break }
            var members = unit.members.filter { !chosen.contains($0.key) }
            let named = c.keys.map { $0.contains(unit.root) } ?? false
            if let keys = c.keys, !named {
                members = members.filter { keys.contains($0.key) }
                if members.isEmpty { continue }
            }
            if let age = c.olderThan, now.timeIntervalSince(unit.lastUsed) <= age { continue }
            if c.partialOnly && members.allSatisfy(\.isComplete) && !(unit.isStream && c.markedRoots.contains(unit.root)) { continue }
            // A stream's member that another stream still names stays with it (unless named alone).
            let isStream = unit.isStream && (c.keys == nil || named)
            let going = isStream ? members.filter { e in
                e.key == unit.root || (streams[e.key] ?? []).allSatisfy { $0 == unit.root || goneRoots.contains($0) }
            } : members
            let reason: (key: CacheKey, why: String)? =
                if let e = going.first(where: { excluded[$0.key] != nil }) { (e.key, excluded[e.key] ?? "") }
                else if isStream, protectedRoots.contains(unit.root) { (members.first { c.protected.contains($0.key) }?.key ?? unit.root, "in use by this run") }
                else if let e = going.first(where: { c.protected.contains($0.key) }) { (e.key, "in use by this run") }
                else if !c.evictsPinned, let e = going.first(where: \.pinned) { (e.key, "pinned") }
                else { nil }
            if let reason {
                out.skipped.append(Skip(key: reason.key, reason: reason.why))
                continue
            }
            if isStream { goneRoots.insert(unit.root) }
            guard !going.isEmpty else { continue }
            for e in going {
                chosen.insert(e.key)
                usage -= footprint.cost(e)
            }
            out.groups.append(Group(root: isStream ? unit.root : nil, keys: going.map(\.key)))
        }
        out.usageAfter = usage
        return out
    }

    /// A stream's cached members, or one entry on its own.
    struct Unit {
        var root: CacheKey
        var isStream: Bool
        /// The root's entry first (when cached), then by key.
        var members: [CacheEntry]
        var lastUsed: Date
    }

    /// The units in eviction order: least recently used first (by their most recent member), ties by root key.
    static func units(_ entries: [CacheEntry], streams: [CacheKey: [CacheKey]]) -> [Unit] {
        var byRoot: [CacheKey: Unit] = [:]
        for e in entries {
            let roots = streams[e.key] ?? []
            for root in roots.isEmpty ? [e.key] : roots {
                var unit = byRoot[root] ?? Unit(root: root, isStream: !roots.isEmpty, members: [], lastUsed: .distantPast)
                unit.members.append(e)
                unit.lastUsed = max(unit.lastUsed, e.lastUsed)
                byRoot[root] = unit
            }
        }
        return byRoot.values.map { u in
            var u = u
            u.members.sort { ($0.key != u.root ? 1 : 0, $0.key) < ($1.key != u.root ? 1 : 0, $1.key) }
            return u
        }.sorted { ($0.lastUsed, $0.root) < ($1.lastUsed, $1.root) }
    }
}
