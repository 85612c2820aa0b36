#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The catalog: one SQLite database holding every entry, its cached ranges and the config.
/// Invariant 1 (Docs/cache-format.md) is kept by the callers: ranges are committed here only after `data`
/// was fsynced. Every write is one transaction.
public final class Catalog: Sendable {
    public static var schemaVersion: Int { migrations.count }
    /// The schemas that added `chunk_states` (2), streams (3), playlists' final URLs (4) and
    /// members of several streams (5): an older catalog opened read-only lacks those tables, and
    /// reads as having no rows of them (a schema 3 or 4 file's members are of one stream each).
    static let chunkStatesSchema = 2, streamsSchema = 3, finalURLsSchema = 4, sharedMembersSchema = 5
    public let database: Database
    /// Updates waiting for the next group commit (`commit`).
    private let commitQueue = Locked<[CommitTicket]>([])

    /// Opens an existing catalog for reading only: no migration, nothing written (a catalog from
    /// a newer vcache is refused; one with no schema yet reads as empty).
    public init(readOnlyPath path: String) throws {
        database = try Database(readOnlyPath: path)
        let version = try database.read { try $0.userVersion }
        guard version <= Self.migrations.count else { throw NewerSchema(found: Int(version), known: Self.migrations.count) }
        hasSchema = version > 0
        schema = Int(version)
    }

    /// The schema version of the file as opened (read-only, an older catalog stays as it is:
    /// what a later migration added reads as empty).
    public let schema: Int

    /// False for a catalog file with no schema yet (made, then a crash before its first commit):
    /// read-only, it holds no entry.
    public let hasSchema: Bool

    /// `mode`: a new catalog file's permissions (the cache's sharing).
    public init(path: String, mode: mode_t = 0o600) throws {
        database = try Database(path: path, mode: mode)
        hasSchema = true
        schema = Self.migrations.count
        try migrate()
    }

    private static let migrations: [String] = [
        // 1: entries, ranges, config.
        """
        CREATE TABLE entries (
            key TEXT PRIMARY KEY NOT NULL,
            url TEXT NOT NULL,
            latest_url TEXT NOT NULL,
            length INTEGER,
            etag TEXT,
            last_modified TEXT,
            content_type TEXT,
            created REAL NOT NULL,
            last_used REAL NOT NULL,
            completed REAL,
            sha256 TEXT,
            pinned INTEGER NOT NULL DEFAULT 0,
            cached_bytes INTEGER NOT NULL DEFAULT 0,
            disk_bytes INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX entries_by_last_used ON entries(last_used);
        CREATE TABLE ranges (
            key TEXT NOT NULL REFERENCES entries(key) ON DELETE CASCADE,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            PRIMARY KEY (key, start)
        ) WITHOUT ROWID;
        CREATE TABLE config (
            name TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        );
        """,
        // 2: the SHA-256 states at each chunk boundary of a complete entry (ChunkStates), so
        // verify --fix drops only damaged chunks. A row counts only while its sha256 is the
        // entry's: a new version's completion replaces it, and an old row says nothing.
        """
        CREATE TABLE chunk_states (
            key TEXT PRIMARY KEY NOT NULL REFERENCES entries(key) ON DELETE CASCADE,
            sha256 TEXT NOT NULL,
            chunk_size INTEGER NOT NULL,
            states BLOB NOT NULL
        );
        """,
        // 3: streams (Catalog+Streams.swift): which entries make one stream, and the role of each.
        // Rows only: every entry of schemas 1 and 2 stays as it was, a stream of none.
        """
        CREATE TABLE streams (
            root TEXT PRIMARY KEY NOT NULL,
            format TEXT NOT NULL
        );
        CREATE TABLE stream_members (
            key TEXT PRIMARY KEY NOT NULL,
            root TEXT NOT NULL,
            role TEXT NOT NULL
        );
        CREATE INDEX stream_members_by_root ON stream_members(root);
        """,
        // 4: the URL that last answered a playlist, after redirects (Catalog+FinalURL.swift): its
        // relative URIs resolve against it, offline too. Rows only, gone with their entry.
        """
        CREATE TABLE final_urls (
            key TEXT PRIMARY KEY NOT NULL REFERENCES entries(key) ON DELETE CASCADE,
            url TEXT NOT NULL
        );
        """,
        // 5: an entry may be a member of several streams (two masters naming one audio rendition,
        // subtitles or key): one row per stream that names it, so evicting one stream keeps what
        // another still names. Rows only: each row of schema 4 is kept as it was.
        """
        CREATE TABLE stream_members_5 (
            key TEXT NOT NULL,
            root TEXT NOT NULL,
            role TEXT NOT NULL,
            PRIMARY KEY (key, root)
        ) WITHOUT ROWID;
        INSERT INTO stream_members_5 (key, root, role) SELECT key, root, role FROM stream_members;
        DROP TABLE stream_members;
        ALTER TABLE stream_members_5 RENAME TO stream_members;
        CREATE INDEX stream_members_by_root ON stream_members(root);
        """,
        // Expected digests (Catalog+ExpectedDigests.swift): those given with `--checksum` or on a
        // list line (`given` 1, kept across versions), and the origin's digest headers (`given`
        // 0, of the current version only), each with whether the complete entry matched it.
        // Rows only, gone with their entry: every entry of the earlier schemas expects nothing.
        """
        CREATE TABLE expected_digests (
            key TEXT NOT NULL REFERENCES entries(key) ON DELETE CASCADE,
            given INTEGER NOT NULL,
            algorithm TEXT NOT NULL,
            value TEXT NOT NULL,
            source TEXT NOT NULL,
            matched INTEGER,
            computed TEXT,
            PRIMARY KEY (key, given, algorithm)
        ) WITHOUT ROWID;
        """,
    ]

    /// The catalog was written by a newer vcache (its `user_version` is above this one's).
    public struct NewerSchema: Error, Equatable, Sendable {
        public var found: Int
        public var known: Int
    }

    private func migrate() throws {
        // A read first: an up-to-date catalog needs no write lock, so `ls` works while another
        // process holds one.
        if try database.read({ try $0.userVersion }) == Self.migrations.count { return }
        try database.write { c in
            let version = try c.userVersion
            guard version <= Self.migrations.count else {
                throw NewerSchema(found: Int(version), known: Self.migrations.count)
            }
            for i in version..<Self.migrations.count {
                try c.execute(Self.migrations[i])
            }
            if version < Self.migrations.count {
                try c.execute("PRAGMA user_version = \(Self.migrations.count)")
            }
        }
    }

    // MARK: - Reading

    /// The `entries` columns an entry is read from and written to, in one declaration: the
    /// SELECT list, the INSERT list and each value's position all come from it, so a column can
    /// never be read at another column's position.
    enum EntryColumn: String, CaseIterable {
        case key, url, latest_url, length, etag, last_modified, content_type, created, last_used, completed, sha256,
             pinned, cached_bytes, disk_bytes

        /// Its position in `EntryColumn.list`, hence in a row selected with it.
        var position: Int32 { Int32(Self.allCases.firstIndex(of: self)!) }
        /// `key, url, ...`: every column, for SELECT and INSERT.
        static let list = allCases.map(\.rawValue).joined(separator: ", ")
        /// `?, ?, ...`: one parameter per column.
        static let parameters = allCases.map { _ in "?" }.joined(separator: ", ")

        /// The entry's value for this column, as written.
        func value(of e: CacheEntry) -> SQLValue {
            switch self {
            case .key: .key(e.key)
            case .url: .text(e.url)
            case .latest_url: .text(e.latestURL)
            case .length: .optional(e.length)
            case .etag: .optional(e.etag)
            case .last_modified: .optional(e.lastModified)
            case .content_type: .optional(e.contentType)
            case .created: .double(e.created.timeIntervalSince1970)
            case .last_used: .double(e.lastUsed.timeIntervalSince1970)
            case .completed: .optional(e.completed?.timeIntervalSince1970)
            case .sha256: .optional(e.sha256)
            case .pinned: .int(e.pinned ? 1 : 0)
            case .cached_bytes: .int(e.cachedBytes)
            case .disk_bytes: .int(e.diskBytes)
            }
        }
    }

    /// A row as read: every value is untrusted (a damaged or hand-edited catalog must give clear
    /// answers, never a trap): a negative length is unknown, sizes are at least 0, and times are
    /// clamped to the years 1970 to 5138 (a date of -1e300 would overflow every formatter), byte
    /// counts to 64 TiB an entry (a sum over the catalog must not overflow).
    /// `r` is a row selected with `EntryColumn.list`.
    static func entry(from r: Row) -> CacheEntry {
        typealias C = EntryColumn
        func time(_ t: Double) -> Date { Date(timeIntervalSince1970: t.isFinite ? min(max(t, 0), 1e11) : 0) }
        // At most 2^46 (64 TiB) an entry: sums over a catalog (ls, evict, the cap) cannot overflow.
        func bytes(_ n: Int64) -> Int64 { min(max(0, n), 1 << 46) }
        return CacheEntry(
            key: r.key(C.key.position), url: r.text(C.url.position), latestURL: r.text(C.latest_url.position),
            length: r.optionalInt(C.length.position).flatMap { $0 >= 0 ? $0 : nil },
            etag: r.optionalText(C.etag.position), lastModified: r.optionalText(C.last_modified.position),
            contentType: r.optionalText(C.content_type.position),
            created: time(r.double(C.created.position)), lastUsed: time(r.double(C.last_used.position)),
            completed: r.optionalDouble(C.completed.position).map(time), sha256: r.optionalText(C.sha256.position),
            pinned: r.int(C.pinned.position) != 0, cachedBytes: bytes(r.int(C.cached_bytes.position)),
            diskBytes: bytes(r.int(C.disk_bytes.position)), ranges: RangeSet())
    }

    static func ranges(_ c: Connection, key: CacheKey) throws -> RangeSet {
        var set = RangeSet()
        try c.query("SELECT start, end FROM ranges WHERE key = ? ORDER BY start", .key(key)) { r in
            let start = r.int(0), end = r.int(1)
            if start >= 0 && start < end { set.insert(ByteRange(start, end)) }
        }
        return set
    }

    /// The entry with its ranges, read in one snapshot.
    public func entry(key: CacheKey) throws -> CacheEntry? {
        try database.read(snapshot: true) { c in
            var found: CacheEntry?
            try c.query("SELECT \(EntryColumn.list) FROM entries WHERE key = ?", .key(key)) { found = Self.entry(from: $0) }
            if found != nil { found!.ranges = try Self.ranges(c, key: key) }
            return found
        }
    }

    /// Which of `keys` are complete entries, read in one snapshot (one read for a whole run's
    /// items instead of one each).
    public func completeKeys(among keys: some Sequence<CacheKey>) throws -> Set<CacheKey> {
        try database.read(snapshot: true) { c in
            var found = Set<CacheKey>()
            for key in keys {
                try c.query("SELECT 1 FROM entries WHERE key = ? AND completed IS NOT NULL", .key(key)) { _ in found.insert(key) }
            }
            return found
        }
    }

    /// Every entry without its ranges, most recently used first: one query.
    public func allEntries() throws -> [CacheEntry] {
        try database.read { c in
            var out: [CacheEntry] = []
            try c.query("SELECT \(EntryColumn.list) FROM entries ORDER BY last_used DESC, key") { out.append(Self.entry(from: $0)) }
            return out
        }
    }

    /// Every entry's URL as first asked and as last asked: one query (`CachedURLIndex`).
    public func allURLs() throws -> [String] {
        try database.read { c in
            var out: [String] = []
            try c.query("SELECT url, latest_url FROM entries") { out.append($0.text(0)); out.append($0.text(1)) }
            return out
        }
    }

    /// The entry's range rows exactly as stored (not normalised), for `verify`.
    public func storedRanges(key: CacheKey) throws -> [(start: Int64, end: Int64)] {
        try database.read { c in
            var rows: [(Int64, Int64)] = []
            try c.query("SELECT start, end FROM ranges WHERE key = ? ORDER BY start", .key(key)) { rows.append(($0.int(0), $0.int(1))) }
            return rows
        }
    }

    /// The entry's length column exactly as stored (nil: NULL, no length told), for `verify`:
    /// `entry(from:)` reads a negative one as unknown too.
    public func storedLength(key: CacheKey) throws -> Int64? {
        try database.read { c in
            var length: Int64?
            try c.query("SELECT length FROM entries WHERE key = ?", .key(key)) { length = $0.optionalInt(0) }
            return length
        }
    }

    /// Replaces the entry's ranges with `set` (verify --fix); drops completion when not whole.
    public func replaceRanges(key: CacheKey, with set: RangeSet, diskBytes: Int64, keepCompletion: Bool) throws {
        try database.write { c in
            try c.run("DELETE FROM ranges WHERE key = ?", .key(key))
            for r in set.ranges {
                try c.run("INSERT INTO ranges (key, start, end) VALUES (?, ?, ?)", .key(key), .int(r.lowerBound), .int(r.upperBound))
            }
            try c.run("UPDATE entries SET cached_bytes = ?, disk_bytes = ? WHERE key = ?", .int(set.count), .int(diskBytes), .key(key))
            if !keepCompletion {
                try c.run("UPDATE entries SET completed = NULL, sha256 = NULL WHERE key = ?", .key(key))
                // No longer whole: what its checks found is of bytes no longer all there.
                try c.run("UPDATE expected_digests SET matched = NULL, computed = NULL WHERE key = ?", .key(key))
            }
        }
    }

    /// The chunk states kept with the entry's digest, when they are of its current digest.
    public func chunkStates(key: CacheKey) throws -> ChunkStates? {
        guard schema >= Self.chunkStatesSchema else { return nil }
        return try database.read { c in
            var found: ChunkStates?
            try c.query("""
                SELECT s.sha256, s.chunk_size, s.states FROM chunk_states s JOIN entries e ON e.key = s.key
                WHERE s.key = ? AND e.sha256 = s.sha256
                """, .key(key)) { found = ChunkStates(sha256: $0.text(0), chunkSize: $0.int(1), states: $0.blob(2)) }
            return found
        }
    }

    /// The digest kept for the entry's version, whether or not the entry is complete now (after
    /// `verify --fix` dropped damaged chunks, the bytes fetched again must lead to it).
    public func keptDigest(key: CacheKey) throws -> ChunkStates? {
        guard schema >= Self.chunkStatesSchema else { return nil }
        return try database.read { c in
            var found: ChunkStates?
            try c.query("SELECT sha256, chunk_size, states FROM chunk_states WHERE key = ?", .key(key)) {
                found = ChunkStates(sha256: $0.text(0), chunkSize: $0.int(1), states: $0.blob(2))
            }
            return found
        }
    }

    /// `PRAGMA integrity_check`: nil when SQLite finds nothing wrong, else its report.
    public func integrityProblem() throws -> String? {
        try database.read { c in
            var lines: [String] = []
            try c.query("PRAGMA integrity_check") { row in
                lines += row.text(0).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("*** in database") }
            }
            // "Page N is never used" is a page leaked from the free list: every row still reads,
            // nothing is damaged (the next VACUUM reclaims it). Not a reason to set anything aside.
            lines.removeAll { $0 == "ok" || ($0.hasPrefix("Page ") && $0.hasSuffix(" is never used")) }
            return lines.isEmpty ? nil : lines.joined(separator: "; ")
        }
    }

    /// When `integrityProblem` found only damaged indexes (their rows are all still in the
    /// tables), rebuilds them with REINDEX and checks again. True when the catalog is sound now.
    public func repairIndexes(problem: String) throws -> Bool {
        let onlyIndexes = problem.split(separator: ";").allSatisfy {
            let line = $0.trimming(.whitespaces)
            return line.hasPrefix("wrong # of entries in index") || (line.hasPrefix("row ") && line.contains("missing from index"))
        }
        guard onlyIndexes else { return false }
        try database.write { try $0.execute("REINDEX") }
        return try integrityProblem() == nil
    }

    /// Pins (or unpins) the entry and, when it is a stream's root, every member of the stream
    /// cached now (a member cached later counts as pinned: `EvictionChoice` keeps a stream whole).
    public func setPinned(key: CacheKey, _ pinned: Bool) throws -> Bool {
        try database.write { c in
            let n = try c.run("UPDATE entries SET pinned = ? WHERE key = ?", .int(pinned ? 1 : 0), .key(key))
            if schema >= Self.streamsSchema {
                try c.run("UPDATE entries SET pinned = ? WHERE key IN (SELECT key FROM stream_members WHERE root = ?)", .int(pinned ? 1 : 0), .key(key))
            }
            return n > 0
        }
    }

    // MARK: - Writing

    /// What one checkpoint records about an entry: ranges now durably in `data` (the caller
    /// fsynced first), the validators those bytes belong to, and, at completion, the digest.
    public struct Update: Sendable {
        public var key: CacheKey
        public var url: String
        public var validators: Validators
        public var contentType: String?
        public var added = RangeSet()
        public var diskBytes: Int64?
        public var sha256: String?
        /// With `sha256`: the digest's states at each chunk boundary, kept beside it.
        public var chunkStates: ChunkStates?
        /// The entry's expected digests, replacing those stored (nil: left as they are).
        public var expectations: [DigestCheck]?

        public init(key: CacheKey, url: String, validators: Validators, contentType: String? = nil) {
            self.key = key
            self.url = url
            self.validators = validators
            self.contentType = contentType
        }
    }

    /// Applies `u` in one transaction, creating the entry if needed, and returns its whole range set.
    /// Also records `u.url` as the latest URL used and marks the entry used now.
    ///
    /// Group commit: entries that checkpoint at the same moment (a batch at `-j 8`) share one
    /// transaction, so one WAL fsync, instead of queueing for one each. A caller whose update is
    /// queued while another's transaction runs waits for the connection; the first of them to get
    /// it commits every queued update at once, the others find theirs done. Each caller fsynced
    /// its own bytes before calling, so no claim precedes its bytes (invariant 1); when the
    /// transaction fails, every update in it fails and none is claimed.
    @discardableResult
    public func commit(_ u: Update, now: Date = Date()) throws -> RangeSet {
        let ticket = CommitTicket(update: u, now: now)
        commitQueue.withLock { $0.append(ticket) }
        return try database.locked { c, transaction -> RangeSet in
            if ticket.result == nil {
                let batch = commitQueue.withLock { q -> [CommitTicket] in
                    defer { q.removeAll() }
                    return q
                }
                var sets: [RangeSet] = []
                do {
                    try transaction {
                        for t in batch { sets.append(try Self.apply(c, t.update, now: t.now)) }
                    }
                    for (t, set) in zip(batch, sets) { t.result = .success(set) }
                } catch {
                    for t in batch { t.result = .failure(error) }
                }
            }
            return try ticket.result!.get()
        }
    }

    /// One update's statements, inside the group's transaction.
    private static func apply(_ c: Connection, _ u: Update, now: Date) throws -> RangeSet {
        let t = now.timeIntervalSince1970
        try c.run("""
            INSERT INTO entries (key, url, latest_url, length, etag, last_modified, content_type, created, last_used)
            VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
            ON CONFLICT(key) DO UPDATE SET latest_url = ?2, length = ?3, etag = ?4, last_modified = ?5,
                content_type = COALESCE(?6, content_type), last_used = ?7
            """, .key(u.key), .text(u.url), .optional(u.validators.length), .optional(u.validators.etag),
            .optional(u.validators.lastModified), .optional(u.contentType), .double(t))
        var set = try Self.ranges(c, key: u.key)
        if !u.added.isEmpty {
            set.formUnion(u.added)
            try c.run("DELETE FROM ranges WHERE key = ?", .key(u.key))
            for r in set.ranges {
                try c.run("INSERT INTO ranges (key, start, end) VALUES (?, ?, ?)", .key(u.key), .int(r.lowerBound), .int(r.upperBound))
            }
            try c.run("UPDATE entries SET cached_bytes = ? WHERE key = ?", .int(set.count), .key(u.key))
        }
        if let disk = u.diskBytes {
            try c.run("UPDATE entries SET disk_bytes = ? WHERE key = ?", .int(disk), .key(u.key))
        }
        if let sha = u.sha256 {
            try c.run("UPDATE entries SET completed = ?, sha256 = ? WHERE key = ?", .double(t), .text(sha), .key(u.key))
            if let cs = u.chunkStates, cs.sha256 == sha {
                try c.run("INSERT OR REPLACE INTO chunk_states (key, sha256, chunk_size, states) VALUES (?, ?, ?, ?)",
                          .key(u.key), .text(sha), .int(cs.chunkSize), .blob(cs.states))
            }
        }
        if let expectations = u.expectations { try Self.replaceExpectations(c, key: u.key, expectations) }
        return set
    }

    /// The video changed (invariant 2): drops every cached range, the completion and the digest,
    /// and records the new validators. Only after this committed does the caller give the entry a
    /// new, empty `data` (`CacheStore.dropVersion` does both: the old file is unlinked, never truncated).
    public func invalidate(key: CacheKey, validators: Validators) throws {
        try database.write { c in
            try c.run("DELETE FROM ranges WHERE key = ?", .key(key))
            // Another version (or none trusted): the digest kept for the old one says nothing.
            try c.run("DELETE FROM chunk_states WHERE key = ?", .key(key))
            try Self.forgetVersionDigests(c, key: key)
            try c.run("UPDATE entries SET cached_bytes = 0, disk_bytes = 0, completed = NULL, sha256 = NULL, length = ?, etag = ?, last_modified = ? WHERE key = ?",
                      .optional(validators.length), .optional(validators.etag), .optional(validators.lastModified), .key(key))
        }
    }

    public func touch(key: CacheKey, now: Date = Date()) throws {
        try database.write { c in
            try c.run("UPDATE entries SET last_used = ? WHERE key = ?", .double(now.timeIntervalSince1970), .key(key))
        }
    }

    /// What `salvage` could read from a damaged catalog.
    public struct Salvage: Sendable {
        /// Entries copied with all their ranges.
        public var kept = 0
        /// Rows that could not be read (counted, not named: they are unreadable).
        public var lost = 0
        /// Rows kept whose ranges could not be read (complete ones checked whole by their SHA-256).
        public var rangesLost = 0
        public init() {}
    }

    /// Copies into this (new, empty) catalog every entry of the damaged catalog at `path` that
    /// can still be read whole, its row and all its ranges, and the settings: one row at a time,
    /// so damage in one page loses only the rows on it. What is copied is then checked against
    /// its `data` like any entry (`Verifier`); folders of rows that could not be read are orphans.
    /// The rows read, but writing them into this catalog failed (not a reason to count them lost).
    public struct SalvageWriteFailed: Error {
        public var error: any Error
    }

    public func salvage(from path: String) throws -> Salvage {
        var out = Salvage()
        var rows: [(entry: CacheEntry, ranges: [(Int64, Int64)])] = []
        var settings: [(String, String)] = []
        var streamRows: [(CacheKey, String)] = []
        var memberRows: [(CacheKey, CacheKey, String)] = []
        var finalRows: [(CacheKey, String)] = []
        var digestRows: [(CacheKey, Int64, String, String, String, Int64?, String?)] = []
        // Read everything that reads, each statement on its own (no transaction spans the damaged
        // file: its commit would fail on the damage), then write it here in one transaction.
        try database.locked { c, _ in
            let quoted = path.replacing("'", with: "''")
            // A damaged schema page must not hide the tables: with writable_schema on, SQLite
            // reads what it can of the schema instead of refusing the whole file.
            try c.execute("PRAGMA writable_schema=ON")
            defer { try? c.execute("PRAGMA writable_schema=OFF") }
            try c.execute("ATTACH DATABASE '\(quoted)' AS old")
            defer { try? c.execute("DETACH DATABASE old") }
            // The rows' ids, gathered from every structure that holds them (the table forwards
            // and backwards, both indexes), each read until it meets the damage.
            var ids = Set<Int64>()
            for sql in ["SELECT rowid FROM old.entries", "SELECT rowid FROM old.entries ORDER BY rowid DESC",
                        "SELECT rowid FROM old.entries INDEXED BY sqlite_autoindex_entries_1",
                        "SELECT rowid FROM old.entries INDEXED BY entries_by_last_used"] {
                try? c.query(sql) { ids.insert($0.int(0)) }
            }
            for id in ids.sorted() {
                do {
                    var entry: CacheEntry?
                    try c.query("SELECT \(EntryColumn.list) FROM old.entries WHERE rowid = ?", .int(id)) { entry = Self.entry(from: $0) }
                    guard let entry else { continue }
                    var ranges: [(Int64, Int64)] = []
                    do {
                        try c.query("SELECT start, end FROM old.ranges WHERE key = ? ORDER BY start", .key(entry.key)) { ranges.append(($0.int(0), $0.int(1))) }
                    } catch {
                        // The row reads but its ranges do not: a complete entry claims all of its
                        // length (its SHA-256 then decides, as verify checks every complete
                        // entry); a partial one claims nothing (its bytes are fetched again).
                        if let length = entry.length, entry.isComplete, entry.sha256 != nil { ranges = [(0, length)] } else { ranges = [] }
                        out.rangesLost += 1
                    }
                    rows.append((entry, ranges))
                } catch {
                    out.lost += 1
                }
            }
            try? c.query("SELECT name, value FROM old.config") { settings.append(($0.text(0), $0.text(1))) }
            // Streams as far as they read (none in a schema-1 catalog): rows of entries lost go below.
            try? c.query("SELECT root, format FROM old.streams") { streamRows.append(($0.key(0), $0.text(1))) }
            try? c.query("SELECT key, root, role FROM old.stream_members") { memberRows.append(($0.key(0), $0.key(1), $0.text(2))) }
            try? c.query("SELECT key, url FROM old.final_urls") { finalRows.append(($0.key(0), $0.text(1))) }
            try? c.query("SELECT key, given, algorithm, value, source, matched, computed FROM old.expected_digests") {
                digestRows.append(($0.key(0), $0.int(1), $0.text(2), $0.text(3), $0.text(4), $0.optionalInt(5), $0.optionalText(6)))
            }
        }
        testPause("salvage-before-write", path)
        do {
            try database.write { c in
                for (var e, ranges) in rows {
                    if ranges.isEmpty && e.cachedBytes > 0 { e.cachedBytes = 0; e.completed = nil }
                    let added = try c.run("""
                        INSERT OR IGNORE INTO entries (\(EntryColumn.list)) VALUES (\(EntryColumn.parameters))
                        """, EntryColumn.allCases.map { $0.value(of: e) })
                    guard added > 0 else { continue }
                    for (start, end) in ranges {
                        try c.run("INSERT OR IGNORE INTO ranges (key, start, end) VALUES (?, ?, ?)", .key(e.key), .int(start), .int(end))
                    }
                    out.kept += 1
                }
                for (name, value) in settings { try c.run("INSERT OR IGNORE INTO config (name, value) VALUES (?, ?)", .text(name), .text(value)) }
                let kept = Set(rows.map(\.entry.key))
                let roots = Set(streamRows.map(\.0).filter { kept.contains($0) })
                for (root, format) in streamRows where roots.contains(root) {
                    try c.run("INSERT OR IGNORE INTO streams (root, format) VALUES (?, ?)", .key(root), .text(format))
                }
                for (key, root, role) in memberRows where roots.contains(root) {
                    try c.run("INSERT OR IGNORE INTO stream_members (key, root, role) VALUES (?, ?, ?)", .key(key), .key(root), .text(role))
                }
                for (key, url) in finalRows where kept.contains(key) {
                    try c.run("INSERT OR IGNORE INTO final_urls (key, url) VALUES (?, ?)", .key(key), .text(url))
                }
                // Expected digests as they read; the outcomes too (verify checks each kept entry again).
                for (key, given, algorithm, value, source, matched, computed) in digestRows where kept.contains(key) {
                    try c.run("""
                        INSERT OR IGNORE INTO expected_digests (key, given, algorithm, value, source, matched, computed) VALUES (?, ?, ?, ?, ?, ?, ?)
                        """, .key(key), .int(given), .text(algorithm), .text(value), .text(source), .optional(matched), .optional(computed))
                }
            }
        } catch {
            throw SalvageWriteFailed(error: error)
        }
        return out
    }

    /// Gives back the journal's disk space (a checkpoint that truncates the WAL), waiting at most
    /// a moment for readers; best effort: a busy catalog keeps its journal until the next time.
    public func shrinkJournal() { database.checkpoint(waitingAtMost: .milliseconds(200)) }

    /// Removes each entry only if it is still as the evictor chose it: still unpinned (unless
    /// `evenIfPinned`) and not used since its `lastUsed` (to the millisecond: a Date round trip
    /// may move the last bits). Checked in the statement that deletes the row (invariant 5), so a
    /// `pin` or a use landing after the choice wins. One transaction; returns the keys removed.
    public func removeEntries(_ chosen: [(key: CacheKey, lastUsed: Date)], evenIfPinned: Bool) throws -> Set<CacheKey> {
        try removeEntries(groups: chosen.map { [$0] }, evenIfPinned: evenIfPinned)
    }

    /// As `removeEntries`, each group whole or not at all (a stream's members: one of them pinned
    /// or used since the choice keeps all of them). One transaction, a savepoint a group.
    public func removeEntries(groups: [[(key: CacheKey, lastUsed: Date)]], evenIfPinned: Bool) throws -> Set<CacheKey> {
        try removeEntries(groups: groups.map { RemovalGroup(root: nil, entries: $0) }, evenIfPinned: evenIfPinned).removed
    }

    /// Entries chosen to go together: a stream's (`root`: its root's key; the root first when it
    /// goes too), or one entry of no stream (`root` nil).
    public struct RemovalGroup: Sendable {
        public var root: CacheKey?
        public var entries: [(key: CacheKey, lastUsed: Date)]
        public init(root: CacheKey?, entries: [(key: CacheKey, lastUsed: Date)]) {
            self.root = root
            self.entries = entries
        }
    }

    /// As above; a stream group's member that another stream (one that stays) names now is kept
    /// and leaves the group's stream only (`shared`): checked in the deleting transaction, so a
    /// stream that a player's playlist recorded after the choice keeps what it names.
    public func removeEntries(groups: [RemovalGroup], evenIfPinned: Bool) throws -> (removed: Set<CacheKey>, shared: Set<CacheKey>) {
        guard groups.contains(where: { !$0.entries.isEmpty }) else { return ([], []) }
        return try database.write { c in
            var gone = Set<CacheKey>(), shared = Set<CacheKey>()
            for group in groups where !group.entries.isEmpty {
                try c.execute("SAVEPOINT evict_group")
                var removed: [CacheKey] = [], kept: [CacheKey] = []
                for (key, lastUsed) in group.entries {
                    if let root = group.root, key != root, try Self.namedByAnotherStream(c, key: key, root: root) {
                        kept.append(key)
                        continue
                    }
                    let n = try c.run("DELETE FROM entries WHERE key = ? AND abs(last_used - ?) < 0.001 AND (pinned = 0 OR ?)",
                                      .key(key), .double(lastUsed.timeIntervalSince1970), .int(evenIfPinned ? 1 : 0))
                    guard n > 0 else { break }
                    try c.run("DELETE FROM ranges WHERE key = ?", .key(key))
                    try Self.forgetMembership(c, key: key)
                    removed.append(key)
                }
                if removed.count + kept.count < group.entries.count {
                    try c.execute("ROLLBACK TO evict_group")
                } else {
                    gone.formUnion(removed)
                    shared.formUnion(kept)
                }
                try c.execute("RELEASE evict_group")
            }
            return (gone, shared)
        }
    }

    // MARK: - Config

    public func config(_ name: String) throws -> String? {
        try database.read { c in
            var v: String?
            try c.query("SELECT value FROM config WHERE name = ?", .text(name)) { v = $0.text(0) }
            return v
        }
    }

    public func setConfig(_ name: String, _ value: String?) throws {
        try database.write { c in
            if let value {
                try c.run("INSERT INTO config (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value", .text(name), .text(value))
            } else {
                try c.run("DELETE FROM config WHERE name = ?", .text(name))
            }
        }
    }
}

/// One caller's update in a group commit; `result` is set once, with the database's lock held.
private final class CommitTicket: @unchecked Sendable {
    let update: Catalog.Update
    let now: Date
    var result: Result<RangeSet, any Error>?
    init(update: Catalog.Update, now: Date) {
        self.update = update
        self.now = now
    }
}
