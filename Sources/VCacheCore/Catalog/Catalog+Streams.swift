#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One stream: the entries that are one thing to the user (Docs/cache-format.md, migrations 3 and 5).
public struct StreamRecord: Equatable, Sendable {
    /// The key of the root manifest's entry (its URL names the stream).
    public var root: CacheKey
    /// "hls" (a DASH manifest would be "dash").
    public var format: String
    /// Every member named, the root first, then in key order; some may not be cached (yet).
    public var members: [Member]

    public struct Member: Equatable, Sendable {
        public var key: CacheKey
        public var role: StreamRole
        public init(key: CacheKey, role: StreamRole) {
            self.key = key
            self.role = role
        }
    }

    public var keys: [CacheKey] { members.map(\.key) }
}

/// Stream membership (Docs/cache-format.md, migrations 3 and 5): a stream is its root manifest
/// and every entry it names, cached or not. An entry named by several streams (two masters
/// sharing an audio rendition, subtitles or a key) is a member of each. A stream named by a
/// master absorbs a stream one of its playlists was the root of (the playlist was prefetched
/// alone first); a lone playlist recorded again while it is a member stays in the larger streams.
///
/// Invariants, kept here and in `removeEntries`: a `streams` row exists only while its root's
/// entry does (a root removed takes its stream's rows in the same transaction, and a stream is
/// recorded only while its root's entry exists), and every member row's root has its `streams`
/// row. A member's entry removed alone keeps its row: the stream still names it (not cached).
extension Catalog {
    /// Records `members` (their keys and roles) as named by the manifest `root`, one
    /// transaction, nothing written when the catalog already says so. `via`: the playlist that
    /// names them, when it is not `root` (prefetch expanding a master's media playlist): they
    /// join every stream naming it too. Returns the root they were recorded under (another
    /// stream's, when `root` is a member of it; the first such), or nil when nothing was:
    /// `root`'s entry is not in the catalog (evicted meanwhile), and a stream is never recorded
    /// for a root it does not hold.
    @discardableResult
    public func recordStream(root: CacheKey, format: String, members: [StreamRecord.Member], via: CacheKey? = nil) throws -> CacheKey? {
        let wanted = members.filter { $0.key != root }
        func streams(_ c: Connection) throws -> [CacheKey] {
            var owners = try Self.owners(c, key: root)
            if let via, via != root {
                for o in try Self.owners(c, key: via) where o != root && !owners.contains(o) { owners.append(o) }
                if !owners.isEmpty && !owners.contains(root) {
                    var isRoot = false
                    try c.query("SELECT 1 FROM streams WHERE root = ?", .key(root)) { _ in isRoot = true }
                    if isRoot { owners.insert(root, at: 0) }
                }
            }
            return owners
        }
        // A read first: serve records on every playlist it answers, and most of the time nothing changed.
        let known = try database.read { c -> CacheKey? in
            let owners = try streams(c)
            for owner in owners.isEmpty ? [root] : owners {
                var have: [CacheKey: String] = [:]
                try c.query("SELECT key, role FROM stream_members WHERE root = ?", .key(owner)) { have[$0.key(0)] = $0.text(1) }
                var rootRow = false
                try c.query("SELECT 1 FROM streams WHERE root = ?", .key(owner)) { _ in rootRow = true }
                let missing = wanted.contains { m in m.key != owner && have[m.key] != m.role.rawValue }
                if !rootRow || have[owner] == nil || missing { return nil }
            }
            return owners.first ?? root
        }
        if let known { return known }
        testPause("record-stream", root)
        return try database.write { c -> CacheKey? in
            var owners = try streams(c)
            if owners.isEmpty {
                // Only a root the catalog holds: a playlist evicted meanwhile leaves no stream behind.
                var held = false
                try c.query("SELECT 1 FROM entries WHERE key = ?", .key(root)) { _ in held = true }
                guard held else { return nil }
                try c.run("INSERT INTO streams (root, format) VALUES (?, ?) ON CONFLICT(root) DO NOTHING", .key(root), .text(format))
                // The root's own row keeps an unconfirmed mark: a media playlist's members
                // recorded while a run fetches the stream do not confirm it.
                try c.run("""
                    INSERT INTO stream_members (key, root, role) VALUES (?1, ?1, ?2)
                    ON CONFLICT(key, root) DO UPDATE SET role = excluded.role WHERE role != ?3
                    """, .key(root), .text(StreamRole.manifest.rawValue), .text(StreamRole.manifestUnconfirmed.rawValue))
                owners = [root]
            }
            for owner in owners {
                for m in wanted where m.key != owner {
                    // A manifest recorded alone before now joins this stream with all it named.
                    var isRoot = false
                    try c.query("SELECT 1 FROM streams WHERE root = ?", .key(m.key)) { _ in isRoot = true }
                    if isRoot {
                        try c.run("""
                            INSERT INTO stream_members (key, root, role) SELECT key, ?1, role FROM stream_members WHERE root = ?2 AND key != ?2
                            ON CONFLICT(key, root) DO NOTHING
                            """, .key(owner), .key(m.key))
                    }
                    try Self.setMember(c, key: m.key, root: owner, role: m.role)
                }
            }
            // Absorbed lone streams go once every owner has their rows.
            for m in wanted {
                var isRoot = false
                try c.query("SELECT 1 FROM streams WHERE root = ?", .key(m.key)) { _ in isRoot = true }
                guard isRoot, !owners.contains(m.key) else { continue }
                try c.run("DELETE FROM stream_members WHERE root = ?", .key(m.key))
                try c.run("DELETE FROM streams WHERE root = ?", .key(m.key))
            }
            return owners.first
        }
    }

    /// The roots of the streams `key` is a member (not the root) of, in key order.
    private static func owners(_ c: Connection, key: CacheKey) throws -> [CacheKey] {
        var found: [CacheKey] = []
        try c.query("SELECT root FROM stream_members WHERE key = ? AND root != key ORDER BY root", .key(key)) { found.append($0.key(0)) }
        return found
    }

    private static func setMember(_ c: Connection, key: CacheKey, root: CacheKey, role: StreamRole) throws {
        try c.run("""
            INSERT INTO stream_members (key, root, role) VALUES (?, ?, ?)
            ON CONFLICT(key, root) DO UPDATE SET role = excluded.role
            """, .key(key), .key(root), .text(role.rawValue))
    }

    /// Every stream, with its members. Empty for a catalog older than streams (opened read-only).
    public func streams() throws -> [StreamRecord] {
        guard schema >= Catalog.streamsSchema else { return [] }
        return try database.read(snapshot: true) { c in
            var formats: [(CacheKey, String)] = []
            try c.query("SELECT root, format FROM streams ORDER BY root") { formats.append(($0.key(0), $0.text(1))) }
            var members: [CacheKey: [StreamRecord.Member]] = [:]
            try c.query("SELECT key, root, role FROM stream_members ORDER BY root, key") { r in
                // An unknown role (a newer vcache's) reads as a segment: a member all the same.
                members[r.key(1), default: []].append(.init(key: r.key(0), role: StreamRole(rawValue: r.text(2)) ?? .segment))
            }
            return formats.map { root, format in
                var m = members[root] ?? []
                m.sort { ($0.key != root ? 1 : 0, $0.key) < ($1.key != root ? 1 : 0, $1.key) }
                if m.first?.key != root { m.insert(.init(key: root, role: .manifest), at: 0) }
                return StreamRecord(root: root, format: format, members: m)
            }
        }
    }

    /// Whether `key` is a stream's root (one row read, not the stream's members).
    public func isStreamRoot(_ key: CacheKey) throws -> Bool {
        guard schema >= Catalog.streamsSchema else { return false }
        return try database.read { c in
            var found = false
            try c.query("SELECT 1 FROM streams WHERE root = ?", .key(key)) { _ in found = true }
            return found
        }
    }

    /// Which of `keys` are streams' roots (one read).
    public func streamRoots(among keys: some Sequence<CacheKey>) throws -> Set<CacheKey> {
        guard schema >= Catalog.streamsSchema else { return [] }
        var roots = Set<CacheKey>()
        try database.read { c in try c.query("SELECT root FROM streams") { roots.insert($0.key(0)) } }
        return roots.intersection(keys)
    }

    /// The roots of the streams other than `root` that name any of `keys` as a member (one read).
    public func otherRoots(naming keys: [CacheKey], besides root: CacheKey) throws -> Set<CacheKey> {
        guard schema >= Catalog.streamsSchema, !keys.isEmpty else { return [] }
        var out = Set<CacheKey>()
        try database.read { c in
            for k in Set(keys) {
                try c.query("SELECT root FROM stream_members WHERE key = ? AND root != ? AND root != key", .key(k), .key(root)) { out.insert($0.key(0)) }
            }
        }
        return out
    }

    /// The stream whose root is `key`, or nil.
    public func stream(root key: CacheKey) throws -> StreamRecord? {
        try streams().first { $0.root == key }
    }

    /// Takes `keys` out of the stream `root` (its manifest changed on the origin: what the old
    /// one named is no member of the new one until it names it again); their entries stay.
    public func releaseMembers(_ keys: [CacheKey], root: CacheKey) throws {
        guard !keys.isEmpty else { return }
        try database.write { c in
            for k in keys where k != root { _ = try c.run("DELETE FROM stream_members WHERE root = ? AND key = ?", .key(root), .key(k)) }
        }
    }

    /// The roots of the streams each of `keys` is a media playlist of (role `playlist`: a master's
    /// variant or rendition), for the keys that are one (one read).
    public func playlistOwners(among keys: some Sequence<CacheKey>) throws -> [CacheKey: [CacheKey]] {
        guard schema >= Catalog.streamsSchema else { return [:] }
        let wanted = Set(keys)
        var out: [CacheKey: [CacheKey]] = [:]
        try database.read { c in
            try c.query("SELECT key, root FROM stream_members WHERE role = ? AND root != key ORDER BY root", .text(StreamRole.playlist.rawValue)) { r in
                let key = r.key(0)
                if wanted.contains(key) { out[key, default: []].append(r.key(1)) }
            }
        }
        return out
    }

    /// Marks the stream `root` as partial until its root manifest is asked for again (`ask`), or
    /// clears that mark: the role of the root's own row (`StreamRole.manifestToAsk`).
    public func markRootToAsk(_ root: CacheKey, _ ask: Bool) throws {
        let role = ask ? StreamRole.manifestToAsk : .manifest
        try database.write { c in
            _ = try c.run("UPDATE stream_members SET role = ? WHERE key = ? AND root = ? AND role != ?",
                          .text(role.rawValue), .key(root), .key(root), .text(role.rawValue))
        }
    }

    /// Marks the stream `root` unconfirmed (`StreamRole.manifestUnconfirmed`: a run fetches its
    /// members and has not asked for its manifest again at their end), or clears that mark. A
    /// root marked to be asked for again (`manifestToAsk`) keeps that mark. One write.
    public func markRootUnconfirmed(_ root: CacheKey, _ on: Bool) throws {
        let (from, to) = on ? (StreamRole.manifest, StreamRole.manifestUnconfirmed) : (.manifestUnconfirmed, .manifest)
        try database.write { c in
            _ = try c.run("UPDATE stream_members SET role = ? WHERE key = ? AND root = ? AND role = ?",
                          .text(to.rawValue), .key(root), .key(root), .text(from.rawValue))
        }
    }

    /// The roots marked partial whatever their members hold (`manifestToAsk`, `manifestUnconfirmed`).
    public func markedRoots() throws -> Set<CacheKey> {
        guard schema >= Catalog.streamsSchema else { return [] }
        return try database.read { c in
            var out = Set<CacheKey>()
            try c.query("SELECT key FROM stream_members WHERE key = root AND role IN (?, ?)",
                        .text(StreamRole.manifestToAsk.rawValue), .text(StreamRole.manifestUnconfirmed.rawValue)) { out.insert($0.key(0)) }
            return out
        }
    }

    /// The role of the root `key`'s own row (nil: no stream's root); one row read.
    public func rootRole(_ key: CacheKey) throws -> StreamRole? {
        guard schema >= Catalog.streamsSchema else { return nil }
        return try database.read { c in
            var role: StreamRole?
            try c.query("SELECT role FROM stream_members WHERE key = ? AND root = ?", .key(key), .key(key)) { role = StreamRole(rawValue: $0.text(0)) }
            return role
        }
    }

    /// Called with a removed entry's row: when it was a root, its stream's rows go (the members
    /// stay entries of their own, and of the other streams naming them). A member's row stays:
    /// its stream still names it, now not cached (as `--seconds` leaves members named and not
    /// fetched), so `info`, `ls` and `check` count what the stream names, not what is left.
    static func forgetMembership(_ c: Connection, key: CacheKey) throws {
        if try c.run("DELETE FROM streams WHERE root = ?", .key(key)) > 0 {
            try c.run("DELETE FROM stream_members WHERE root = ?", .key(key))
        }
    }

    /// Whether `key`, chosen for removal with the stream `root` (nil: on its own), is named now by
    /// another stream that stays: it then leaves `root`'s membership only (a shared audio
    /// rendition, subtitles or key stay for the other stream). Asked in the removing transaction:
    /// a stream recorded since the choice counts.
    static func namedByAnotherStream(_ c: Connection, key: CacheKey, root: CacheKey) throws -> Bool {
        var other = false
        try c.query("""
            SELECT 1 FROM stream_members m JOIN streams s ON s.root = m.root
            WHERE m.key = ? AND m.root != ? AND m.root != m.key LIMIT 1
            """, .key(key), .key(root)) { _ in other = true }
        return other
    }
}

extension Catalog {
    /// The entries among `keys` that exist, each with its ranges, read in one snapshot.
    public func entries(keys: [CacheKey]) throws -> [CacheKey: CacheEntry] {
        try database.read(snapshot: true) { c in
            var out: [CacheKey: CacheEntry] = [:]
            for key in keys where out[key] == nil {
                var found: CacheEntry?
                try c.query("SELECT \(EntryColumn.list) FROM entries WHERE key = ?", .key(key)) { found = Self.entry(from: $0) }
                if var e = found {
                    e.ranges = try Self.ranges(c, key: key)
                    out[key] = e
                }
            }
            return out
        }
    }
}

extension Catalog {
    /// The stream `root`'s cached entries (the root and each member row that is an entry), each
    /// with its ranges, in one snapshot: one query for the stream, not one per member (a stream
    /// names up to a million segments, `ls` reads them on every call).
    public func memberEntries(root: CacheKey) throws -> [CacheKey: CacheEntry] {
        guard schema >= Self.streamsSchema else { return try entries(keys: [root]) }
        return try database.read(snapshot: true) { c in
            var out: [CacheKey: CacheEntry] = [:]
            try c.query("SELECT \(EntryColumn.list) FROM entries WHERE key = ? OR key IN (SELECT key FROM stream_members WHERE root = ?)",
                        .key(root), .key(root)) { let e = Self.entry(from: $0); out[e.key] = e }
            for key in Array(out.keys) { out[key]?.ranges = try Self.ranges(c, key: key) }
            return out
        }
    }
}

extension Catalog {
    /// For a stream member `key` (not a root): its role, and the playlists of its streams that may
    /// name it (each root and its members of role `playlist`), roots first. Nil when it is no member.
    public func playlists(naming key: CacheKey) throws -> (role: StreamRole, playlists: [CacheKey])? {
        guard schema >= Self.streamsSchema else { return nil }
        return try database.read(snapshot: true) { c in
            var found: [(root: CacheKey, role: StreamRole)] = []
            try c.query("SELECT root, role FROM stream_members WHERE key = ? AND root != key ORDER BY root", .key(key)) {
                found.append(($0.key(0), StreamRole(rawValue: $0.text(1)) ?? .segment))
            }
            guard let first = found.first else { return nil }
            var playlists = found.map(\.root)
            for f in found {
                try c.query("SELECT key FROM stream_members WHERE root = ? AND role = ? AND key != root ORDER BY key",
                            .key(f.root), .text(StreamRole.playlist.rawValue)) { k in
                    let p = k.key(0)
                    if !playlists.contains(p) { playlists.append(p) }
                }
            }
            return (first.role, playlists)
        }
    }

    /// The format of the stream whose root is `key` ("hls", "dash"), or nil when it is none.
    public func streamFormat(root key: CacheKey) throws -> String? {
        guard schema >= Self.streamsSchema else { return nil }
        return try database.read { c in
            var format: String?
            try c.query("SELECT format FROM streams WHERE root = ?", .key(key)) { format = $0.text(0) }
            return format
        }
    }

    /// The role of `key` in the stream it belongs to, or nil (no stream, or a catalog older than streams).
    /// The role of the root `root`'s own row (`manifest`, or `manifestToAsk` when marked); nil
    /// when it is no stream's root.
    public func streamRole(ofRoot root: CacheKey) throws -> StreamRole? {
        guard schema >= Catalog.streamsSchema else { return nil }
        return try database.read { c in
            var role: StreamRole?
            try c.query("SELECT role FROM stream_members WHERE key = ? AND root = ?", .key(root), .key(root)) { role = StreamRole(rawValue: $0.text(0)) ?? .segment }
            return role
        }
    }

    public func streamRole(of key: CacheKey) throws -> StreamRole? {
        guard schema >= Catalog.streamsSchema else { return nil }
        return try database.read { c in
            var role: StreamRole?
            try c.query("SELECT role FROM stream_members WHERE key = ? ORDER BY root LIMIT 1", .key(key)) { role = StreamRole(rawValue: $0.text(0)) ?? .segment }
            return role
        }
    }
}
