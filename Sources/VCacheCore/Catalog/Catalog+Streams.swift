import Foundation

/// One stream: the entries that are one thing to the user (Docs/cache-format.md, migration 2).
public struct StreamRecord: Equatable, Sendable {
    /// The key of the root manifest's entry (its URL names the stream).
    public var root: String
    /// "hls" (a DASH manifest would be "dash").
    public var format: String
    /// Every member named, the root first, then in key order; some may not be cached (yet).
    public var members: [Member]

    public struct Member: Equatable, Sendable {
        public var key: String
        public var role: StreamRole
        public init(key: String, role: StreamRole) {
            self.key = key
            self.role = role
        }
    }

    public var keys: [String] { members.map(\.key) }
}

/// Stream membership: an entry belongs to at most one stream, the last that named it. A stream
/// named by a master absorbs a stream one of its playlists was the root of (the playlist was
/// prefetched alone first); a lone playlist recorded again while it is a member stays in the
/// larger stream. Rows go with their entry (`removeEntries`): a removed root takes its stream's
/// rows (not its members' entries) with it.
extension Catalog {
    /// Records `members` (their keys and roles) as the stream of the manifest `root`, one
    /// transaction, nothing written when the catalog already says so. Returns the root they were
    /// recorded under (another stream's, when `root` is a member of it).
    @discardableResult
    public func recordStream(root: String, format: String, members: [StreamRecord.Member]) throws -> String {
        let wanted = members.filter { $0.key != root }
        // A read first: serve records on every playlist it answers, and most of the time nothing changed.
        let (current, known) = try database.read { c -> (String, Bool) in
            let owner = try Self.owner(c, key: root) ?? root
            var have: [String: String] = [:]
            try c.query("SELECT key, role FROM stream_members WHERE root = ?", .text(owner)) { have[$0.text(0)] = $0.text(1) }
            var rootRow = false
            try c.query("SELECT 1 FROM streams WHERE root = ?", .text(owner)) { _ in rootRow = true }
            let missing = wanted.contains { m in m.key != owner && have[m.key] != m.role.rawValue }
            return (owner, rootRow && have[owner] != nil && !missing)
        }
        if known { return current }
        return try database.write { c in
            let owner = try Self.owner(c, key: root) ?? root
            if owner == root {
                try c.run("INSERT INTO streams (root, format) VALUES (?, ?) ON CONFLICT(root) DO NOTHING", .text(root), .text(format))
                try Self.setMember(c, key: root, root: root, role: .manifest)
            }
            for m in wanted where m.key != owner {
                // A manifest recorded alone before now joins this stream with all it named.
                var isRoot = false
                try c.query("SELECT 1 FROM streams WHERE root = ?", .text(m.key)) { _ in isRoot = true }
                if isRoot {
                    try c.run("UPDATE stream_members SET root = ? WHERE root = ?", .text(owner), .text(m.key))
                    try c.run("DELETE FROM streams WHERE root = ?", .text(m.key))
                }
                try Self.setMember(c, key: m.key, root: owner, role: m.role)
            }
            return owner
        }
    }

    /// The root of the stream `key` is a member (not the root) of.
    private static func owner(_ c: Connection, key: String) throws -> String? {
        var found: String?
        try c.query("SELECT root FROM stream_members WHERE key = ? AND root != key", .text(key)) { found = $0.text(0) }
        return found
    }

    private static func setMember(_ c: Connection, key: String, root: String, role: StreamRole) throws {
        try c.run("""
            INSERT INTO stream_members (key, root, role) VALUES (?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET root = excluded.root, role = excluded.role
            """, .text(key), .text(root), .text(role.rawValue))
    }

    /// Every stream, with its members. Empty for a catalog older than streams (opened read-only).
    public func streams() throws -> [StreamRecord] {
        guard schema >= Catalog.streamsSchema else { return [] }
        return try database.read(snapshot: true) { c in
            var formats: [(String, String)] = []
            try c.query("SELECT root, format FROM streams ORDER BY root") { formats.append(($0.text(0), $0.text(1))) }
            var members: [String: [StreamRecord.Member]] = [:]
            try c.query("SELECT key, root, role FROM stream_members ORDER BY root, key") { r in
                // An unknown role (a newer vcache's) reads as a segment: a member all the same.
                members[r.text(1), default: []].append(.init(key: r.text(0), role: StreamRole(rawValue: r.text(2)) ?? .segment))
            }
            return formats.map { root, format in
                var m = members[root] ?? []
                m.sort { ($0.key != root ? 1 : 0, $0.key) < ($1.key != root ? 1 : 0, $1.key) }
                if m.first?.key != root { m.insert(.init(key: root, role: .manifest), at: 0) }
                return StreamRecord(root: root, format: format, members: m)
            }
        }
    }

    /// The stream whose root is `key`, or nil.
    public func stream(root key: String) throws -> StreamRecord? {
        try streams().first { $0.root == key }
    }

    /// Called with a removed entry's row: its membership goes, and when it was a root, its
    /// stream's rows (the members stay entries of their own).
    static func forgetMembership(_ c: Connection, key: String) throws {
        try c.run("DELETE FROM stream_members WHERE key = ?", .text(key))
        if try c.run("DELETE FROM streams WHERE root = ?", .text(key)) > 0 {
            try c.run("DELETE FROM stream_members WHERE root = ?", .text(key))
        }
    }
}

extension Catalog {
    /// The entries among `keys` that exist, each with its ranges, read in one snapshot.
    public func entries(keys: [String]) throws -> [String: CacheEntry] {
        try database.read(snapshot: true) { c in
            var out: [String: CacheEntry] = [:]
            for key in keys where out[key] == nil {
                var found: CacheEntry?
                try c.query("SELECT \(EntryColumn.list) FROM entries WHERE key = ?", .text(key)) { found = Self.entry(from: $0) }
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
    /// For a stream member `key` (not a root): its role, and the playlists of its stream that may
    /// name it (the root and its members of role `playlist`), root first. Nil when it is no member.
    public func playlists(naming key: String) throws -> (role: StreamRole, playlists: [String])? {
        guard schema >= Self.streamsSchema else { return nil }
        return try database.read(snapshot: true) { c in
            var found: (root: String, role: StreamRole)?
            try c.query("SELECT root, role FROM stream_members WHERE key = ? AND root != key", .text(key)) {
                found = ($0.text(0), StreamRole(rawValue: $0.text(1)) ?? .segment)
            }
            guard let found else { return nil }
            var playlists = [found.root]
            try c.query("SELECT key FROM stream_members WHERE root = ? AND role = ? AND key != root ORDER BY key",
                        .text(found.root), .text(StreamRole.playlist.rawValue)) { playlists.append($0.text(0)) }
            return (found.role, playlists)
        }
    }

    /// The role of `key` in the stream it belongs to, or nil (no stream, or a catalog older than streams).
    public func streamRole(of key: String) throws -> StreamRole? {
        guard schema >= Catalog.streamsSchema else { return nil }
        return try database.read { c in
            var role: StreamRole?
            try c.query("SELECT role FROM stream_members WHERE key = ?", .text(key)) { role = StreamRole(rawValue: $0.text(0)) ?? .segment }
            return role
        }
    }
}
