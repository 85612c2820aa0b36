import Foundation

/// Which entries an eviction removes, decided without I/O: least recently used first (ties by
/// key), those matching every filter, and with a cap only until the cache would fit. Table-tested
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
    public static func choose(_ entries: [CacheEntry], _ c: Evictor.Criteria, footprint: Evictor.Footprint,
                              excluded: [String: String] = [:], now: Date) -> EvictionChoice {
        var out = EvictionChoice()
        var usage = footprint.total(entries)
        for e in entries.sorted(by: { ($0.lastUsed, $0.key) < ($1.lastUsed, $1.key) }) {
            if let cap = c.maxSize, usage <= cap { break }
            if let keys = c.keys, !keys.contains(e.key) { continue }
            if let age = c.olderThan, now.timeIntervalSince(e.lastUsed) <= age { continue }
            if c.partialOnly && e.isComplete { continue }
            let reason: String? =
                if let why = excluded[e.key] { why }
                else if c.protected.contains(e.key) { "in use by this run" }
                else if e.pinned && !c.includePinned && c.keys == nil { "pinned" }
                else { nil }
            if let reason {
                out.skipped.append(Skip(key: e.key, reason: reason))
                continue
            }
            out.victims.append(e.key)
            usage -= footprint.cost(e)
        }
        out.usageAfter = usage
        return out
    }
}
