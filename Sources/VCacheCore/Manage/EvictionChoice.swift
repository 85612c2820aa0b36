import Foundation

/// Which entries an eviction removes, decided without I/O: least recently used first (ties by
/// key), those matching every filter, and with a cap only until the cache would fit. A stream
/// (Catalog+Streams.swift) is one unit. Table-tested
/// in `EvictionChoiceTests`; `Evictor` removes what this chooses and asks again while anything
/// could not go.
public struct EvictionChoice: Equatable, Sendable {
    public struct Skip: Equatable, Sendable {
        public var key: String
        public var reason: String
    }

    /// Keys to remove, in order.
    public var victims: [String] = []
    /// Entries that matched the filters but stay, with the reason, in the order met.
    public var skipped: [Skip] = []
    /// What the cache would use once every victim is gone.
    public var usageAfter: Int64 = 0

    /// - Parameters:
    ///   - entries: the catalog's rows.
    ///   - footprint: the measured disk use of what is not a `data` file.
    ///   - excluded: entries known not to go (in use, another user's), with why.
    ///   - streams: the stream each member belongs to (member key to root key, `Catalog.streams`).
    ///     A stream is one unit: used when its most recently used member was, pinned when any
    ///     member is, partial when any cached member is, kept whole when any member must stay,
    ///     and removed whole (never half a stream for the cap). Named (`keys`), its root takes
    ///     the whole stream; a member named alone goes alone.
    public static func choose(_ entries: [CacheEntry], _ c: Evictor.Criteria, footprint: Evictor.Footprint,
                              excluded: [String: String] = [:], streams: [String: String] = [:], now: Date) -> EvictionChoice {
        var out = EvictionChoice()
        var usage = footprint.total(entries)
        for unit in units(entries, streams: c.alone ? [:] : streams) {
            if let cap = c.maxSize, usage <= cap { break }
            var members = unit.members
            if let keys = c.keys, !keys.contains(unit.root) {
                members = members.filter { keys.contains($0.key) }
                if members.isEmpty { continue }
            }
            if let age = c.olderThan, now.timeIntervalSince(unit.lastUsed) <= age { continue }
            if c.partialOnly && members.allSatisfy(\.isComplete) { continue }
            let reason: (key: String, why: String)? =
                if let e = members.first(where: { excluded[$0.key] != nil }) { (e.key, excluded[e.key] ?? "") }
                else if let e = members.first(where: { c.protected.contains($0.key) }) { (e.key, "in use by this run") }
                else if !c.includePinned && c.keys == nil, let e = members.first(where: \.pinned) { (e.key, "pinned") }
                else { nil }
            if let reason {
                out.skipped.append(Skip(key: reason.key, reason: reason.why))
                continue
            }
            for e in members {
                out.victims.append(e.key)
                usage -= footprint.cost(e)
            }
        }
        out.usageAfter = usage
        return out
    }

    /// A stream's cached members, or one entry on its own.
    struct Unit {
        var root: String
        /// The root's entry first (when cached), then by key.
        var members: [CacheEntry]
        var lastUsed: Date
    }

    /// The units in eviction order: least recently used first (by their most recent member), ties by root key.
    static func units(_ entries: [CacheEntry], streams: [String: String]) -> [Unit] {
        var byRoot: [String: Unit] = [:]
        for e in entries {
            let root = streams[e.key] ?? e.key
            var unit = byRoot[root] ?? Unit(root: root, members: [], lastUsed: .distantPast)
            unit.members.append(e)
            unit.lastUsed = max(unit.lastUsed, e.lastUsed)
            byRoot[root] = unit
        }
        return byRoot.values.map { u in
            var u = u
            u.members.sort { ($0.key != u.root ? 1 : 0, $0.key) < ($1.key != u.root ? 1 : 0, $1.key) }
            return u
        }.sorted { ($0.lastUsed, $0.root) < ($1.lastUsed, $1.root) }
    }
}
