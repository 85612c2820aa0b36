#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSQLite
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// An error from SQLite: its result code, `sqlite3_errmsg`, and what vcache was doing.
public struct DatabaseError: Error, Equatable, CustomStringConvertible, Sendable {
    public var code: Int32
    public var message: String
    public var context: String

    public var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
    public var isCorrupt: Bool { code & 0xff == SQLITE_CORRUPT || code & 0xff == SQLITE_NOTADB }
    public var isDiskFull: Bool { code & 0xff == SQLITE_FULL }
    public var isIOError: Bool { code & 0xff == SQLITE_IOERR || code & 0xff == SQLITE_CANTOPEN }

    public var description: String {
        if isBusy { return "the catalog stayed locked by another process for too long; try again later, or raise VCACHE_CATALOG_TIMEOUT (seconds)" }
        return "catalog error during \(context): \(message) (SQLite code \(code))"
    }
}

/// A thin typed layer over one `sqlite3*` connection (GRDB's spirit): statements prepared once and
/// reused, values bound by type, work run inside `write { }` transactions that roll back on throw.
/// Thread-safety: the connection is used only while `lock` is held, so one instance may be shared.
public final class Database: Sendable {
    private let lock = Locked(())
    // Only touched while `lock` is held; see the class comment.
    nonisolated(unsafe) private let connection: Connection
    public let path: String
    /// How long a write waits for another process's transaction before giving up.
    public let busyTimeout: Duration

    /// The size the write-ahead journal is kept near (bytes): `journal_size_limit`, with a
    /// checkpoint every 64 pages (256 KiB of 4 KiB pages).
    public static let journalLimit: Int64 = 256 << 10

    /// The SQLite library's version, e.g. "3.40.1".
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    /// 30 s, or `$VCACHE_CATALOG_TIMEOUT` seconds.
    public static var defaultBusyTimeout: Duration {
        guard case .success(let ms)? = catalogTimeout(ProcessInfo.processInfo.environment["VCACHE_CATALOG_TIMEOUT"]) else {
            return .seconds(30)
        }
        return .milliseconds(ms)
    }

    /// What `$VCACHE_CATALOG_TIMEOUT` is unless it is wrong (nil: unset or empty): seconds from 0
    /// to 86400 (a day), below 0.1 taken as 0.1. NaN, infinities, signs below zero and larger
    /// values are the failure, a line naming the value (the command line refuses to run on it).
    public static func catalogTimeout(_ value: String?) -> Result<Int64, CatalogTimeoutProblem>? {
        guard let value, !value.isEmpty else { return nil }
        guard let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= 86_400 else {
            return .failure(CatalogTimeoutProblem(value: value))
        }
        return .success(Checked.int64(max(0.1, seconds) * 1000) ?? 30_000)
    }

    public struct CatalogTimeoutProblem: Error, CustomStringConvertible {
        public var value: String
        public var description: String {
            "VCACHE_CATALOG_TIMEOUT='\(value)' is not a number of seconds from 0 to 86400; set one (default 30) or unset it"
        }
    }

    /// Opens (creating) the database in WAL mode with a busy timeout, so concurrent vcache
    /// processes wait for each other instead of failing at once.
    /// `mode`: the new file's permissions, given exactly (SQLite gives the -wal and -shm files the
    /// database file's mode).
    public init(path: String, mode: mode_t = 0o600, busyTimeout: Duration = Database.defaultBusyTimeout) throws {
        self.busyTimeout = busyTimeout
        // The catalog holds every URL, signed tokens included: create it 0600 before SQLite opens
        // it (SQLite gives its -wal and -shm files the database file's mode).
        if let created = try? RawFile.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: mode) {
            fchmod(created.fd, mode)
            created.close()
        }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nil)
        guard rc == SQLITE_OK, let handle else {
            var message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            // The system's reason, read now: "unable to open database file" alone names no cause.
            if let handle, sqlite3_system_errno(handle) != 0 { message += ": " + String(cString: strerror(sqlite3_system_errno(handle))) }
            _ = sqlite3_close(handle)  // a handle that never opened: nothing to report beyond `rc`
            throw DatabaseError(code: rc, message: message, context: "open \(path)")
        }
        self.path = path
        connection = Connection(handle)
        try connection.setBusyTimeout(busyTimeout)
        // Switching a new database to WAL needs an exclusive lock and answers SQLITE_BUSY at once
        // (without the busy handler) while another process is creating the same catalog: retry.
        try Self.retryingBusy(for: busyTimeout) { try connection.execute("PRAGMA journal_mode=WAL") }
        // FULL: each commit is durable when it returns. In WAL mode NORMAL is not (a power cut can
        // roll a commit back), while the unlink that follows a commit (evict, a dropped version,
        // verify --fix) reaches the disk with the next journal commit: rows first, files second
        // holds only if the rows' removal is durable first. Cost: Docs/performance.md.
        try connection.execute(BenchSwitches.noFsync ? "PRAGMA synchronous=OFF" : "PRAGMA synchronous=FULL")
        try connection.execute("PRAGMA foreign_keys=ON")
        // The journal counts in the cache's size: checkpointed every 64 pages and cut back to
        // `journalLimit` when it restarts (the default lets it grow to 4 MiB and stay there).
        try connection.execute("PRAGMA wal_autocheckpoint=64; PRAGMA journal_size_limit=\(Self.journalLimit)")
    }

    /// Opens an existing database for reading only (`mode=ro`); on a read-only file system where
    /// its WAL index cannot be made, as immutable (nothing else can be writing it then).
    public init(readOnlyPath path: String, busyTimeout: Duration = Database.defaultBusyTimeout) throws {
        self.busyTimeout = busyTimeout
        self.path = path
        let encoded = PercentCoding.encode(path, allowed: PercentCoding.urlPathAllowed)
        var opened: OpaquePointer?
        var lastError = DatabaseError(code: SQLITE_CANTOPEN, message: "unable to open database file", context: "open \(path)")
        for query in ["mode=ro", "immutable=1"] {
            var handle: OpaquePointer?
            let rc = sqlite3_open_v2("file:\(encoded)?\(query)", &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
            if rc == SQLITE_OK, let handle {
                let set = sqlite3_busy_timeout(handle, Int32(clamping: busyTimeout.inMilliseconds))
                guard set == SQLITE_OK else {
                    lastError = DatabaseError(code: set, message: String(cString: sqlite3_errmsg(handle)), context: "set the busy timeout of \(path)")
                    _ = sqlite3_close(handle)
                    throw lastError
                }
                // Opening is lazy: the first read says whether this way works.
                if sqlite3_exec(handle, "SELECT count(*) FROM sqlite_schema", nil, nil, nil) == SQLITE_OK {
                    opened = handle
                    break
                }
                lastError = DatabaseError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), context: "open \(path)")
                if lastError.isCorrupt || lastError.isBusy { _ = sqlite3_close(handle); throw lastError }
            } else if let handle {
                lastError = DatabaseError(code: rc, message: String(cString: sqlite3_errmsg(handle)), context: "open \(path)")
            }
            _ = sqlite3_close(handle)  // this way did not work: its error is `lastError`
        }
        guard let opened else { throw lastError }
        connection = Connection(opened)
    }

    /// Runs `body` again while it fails with SQLITE_BUSY, for at most `limit`.
    static func retryingBusy<T>(for limit: Duration, _ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + limit
        var pause = 5
        while true {
            do {
                return try body()
            } catch let e as DatabaseError where e.isBusy && ContinuousClock.now < deadline {
                usleep(useconds_t(pause * 1000))
                pause = min(pause * 2, 100)
            }
        }
    }

    deinit { connection.close() }

    /// Runs `body` in a write transaction (BEGIN IMMEDIATE, so the write lock is taken up front
    /// and a busy catalog is waited for by the busy timeout, not failed mid-way). Rolls back on throw.
    @discardableResult
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        var result: T?
        try lock.withLock { _ in try Self.transaction(connection, busyTimeout) { result = try body(connection) } }
        return result!
    }

    /// Runs `body` holding the connection's lock, outside any transaction; the `transaction` it
    /// is given runs its work in one (rolled back on throw). For group commit: a follower finds
    /// its work already done there, without a transaction of its own.
    public func locked<T: Sendable>(_ body: (Connection, _ transaction: (() throws -> Void) throws -> Void) throws -> T) throws -> T {
        try lock.withLock { _ in
            let c = connection, timeout = busyTimeout
            return try body(c) { work in try Self.transaction(c, timeout, work) }
        }
    }

    /// `work` between BEGIN IMMEDIATE and COMMIT, rolled back on throw. BEGIN IMMEDIATE waits in
    /// the busy handler; a rare immediate BUSY (lock upgrade deadlock avoidance, WAL recovery) is
    /// retried here. Called with `lock` held.
    private static func transaction(_ c: Connection, _ timeout: Duration, _ work: () throws -> Void) throws {
        try retryingBusy(for: timeout) { try c.execute("BEGIN IMMEDIATE") }
        do {
            try work()
            try c.execute("COMMIT")
        } catch {
            try? c.execute("ROLLBACK")
            throw error
        }
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)` with a busy timeout of `limit` for this call only; errors
    /// ignored (a reader or writer elsewhere keeps the journal until a later checkpoint).
    public func checkpoint(waitingAtMost limit: Duration) {
        lock.withLock { _ in
            guard (try? connection.setBusyTimeout(limit)) != nil else { return }
            try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            // The connection's own timeout back: should that fail, later statements would wait
            // `limit` rather than the usual time for a busy catalog (they still fail as busy).
            try? connection.setBusyTimeout(busyTimeout)
        }
    }

    /// Runs `body` with the connection outside an explicit transaction (each statement its own snapshot),
    /// or inside a read transaction when `snapshot` is true.
    public func read<T>(snapshot: Bool = false, _ body: (Connection) throws -> T) throws -> T {
        try lock.withLock { _ in
            if snapshot { try connection.execute("BEGIN") }
            defer { if snapshot { try? connection.execute("COMMIT") } }
            return try body(connection)
        }
    }
}

/// The connection as seen inside `Database.read`/`write`. Not Sendable; never escapes the closure.
public final class Connection {
    let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(_ handle: OpaquePointer) { self.handle = handle }

    /// Finalizes the statements and closes the handle. Their codes repeat the last statement's
    /// error (already reported by it); `close_v2` closes once the last statement is finalized.
    func close() {
        for (_, s) in statements { _ = sqlite3_finalize(s) }
        statements = [:]
        _ = sqlite3_close_v2(handle)
    }

    /// `sqlite3_busy_timeout`: how long a statement waits for another connection's lock.
    func setBusyTimeout(_ limit: Duration) throws {
        let rc = sqlite3_busy_timeout(handle, Int32(clamping: limit.inMilliseconds))
        guard rc == SQLITE_OK else { throw error(rc, "set the busy timeout") }
    }

    private func error(_ rc: Int32, _ context: String) -> DatabaseError {
        var message = String(cString: sqlite3_errmsg(handle))
        // "disk I/O error" names no cause: the system's, read now (EIO, ENOSPC, EACCES...).
        let code = sqlite3_extended_errcode(handle)
        if code & 0xff == SQLITE_IOERR || code & 0xff == SQLITE_CANTOPEN, sqlite3_system_errno(handle) != 0 {
            message += " (" + String(cString: strerror(sqlite3_system_errno(handle))) + ")"
        }
        return DatabaseError(code: code, message: message, context: context)
    }

    /// One or more statements without parameters or results.
    public func execute(_ sql: String) throws {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql.prefix(60).description) }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let s = statements[sql] {
            // reset's code is the last step's error, already reported; clear_bindings cannot fail.
            _ = sqlite3_reset(s)
            _ = sqlite3_clear_bindings(s)
            return s
        }
        var s: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &s, nil)
        guard rc == SQLITE_OK, let s else { throw error(rc, "prepare \(sql.prefix(60))") }
        statements[sql] = s
        return s
    }

    /// Binds `values` to the statement's parameters in order; a value SQLite refuses (too big,
    /// no such parameter, out of memory) fails the statement rather than run it with a NULL.
    private func bind(_ s: OpaquePointer, _ values: [SQLValue], _ sql: String) throws {
        for (i, v) in values.enumerated() {
            let idx = Int32(i + 1)
            let rc = switch v {
            case .null: sqlite3_bind_null(s, idx)
            case .int(let x): sqlite3_bind_int64(s, idx, x)
            case .double(let x): sqlite3_bind_double(s, idx, x)
            case .text(let x): sqlite3_bind_text(s, idx, x, -1, vc_sqlite_transient())
            case .blob(let x): x.withUnsafeBytes { sqlite3_bind_blob(s, idx, $0.baseAddress, Int32($0.count), vc_sqlite_transient()) }
            }
            guard rc == SQLITE_OK else { throw error(rc, "bind parameter \(idx) of \(sql.prefix(60))") }
        }
    }

    /// Runs a statement with parameters; returns the number of rows changed.
    @discardableResult
    public func run(_ sql: String, _ values: SQLValue...) throws -> Int { try run(sql, values) }

    /// `run` with the parameters as an array (a row written column by column).
    @discardableResult
    public func run(_ sql: String, _ values: [SQLValue]) throws -> Int {
        let s = try prepared(sql)
        try bind(s, values, sql)
        defer { _ = sqlite3_reset(s) }  // its code repeats the step's, checked below
        var rc = sqlite3_step(s)
        while rc == SQLITE_ROW { rc = sqlite3_step(s) }
        guard rc == SQLITE_DONE else { throw error(rc, sql.prefix(60).description) }
        return Int(sqlite3_changes(handle))
    }

    /// Runs a query and calls `row` for each result row.
    public func query(_ sql: String, _ values: SQLValue..., row: (Row) throws -> Void) throws {
        let s = try prepared(sql)
        try bind(s, values, sql)
        defer { _ = sqlite3_reset(s) }  // its code repeats the step's, checked below
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, sql.prefix(60).description) }
            try row(Row(statement: s))
        }
    }

    public var userVersion: Int {
        get throws {
            var v = 0
            try query("PRAGMA user_version") { v = Int($0.int(0)) }
            return v
        }
    }
}

public enum SQLValue: Sendable {
    case null, int(Int64), double(Double), text(String), blob([UInt8])

    public static func optional(_ s: String?) -> SQLValue { s.map { .text($0) } ?? .null }
    public static func key(_ k: CacheKey) -> SQLValue { .text(k.hex) }
    public static func optional(_ i: Int64?) -> SQLValue { i.map { .int($0) } ?? .null }
    public static func optional(_ d: Double?) -> SQLValue { d.map { .double($0) } ?? .null }
}

/// One result row; valid only inside the `query` callback.
public struct Row {
    let statement: OpaquePointer

    public func isNull(_ i: Int32) -> Bool { sqlite3_column_type(statement, i) == SQLITE_NULL }
    public func int(_ i: Int32) -> Int64 { sqlite3_column_int64(statement, i) }
    public func double(_ i: Int32) -> Double { sqlite3_column_double(statement, i) }
    public func text(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(statement, i) else { return "" }
        return String(cString: p)
    }
    public func optionalText(_ i: Int32) -> String? { isNull(i) ? nil : text(i) }
    /// A key column (written by `SQLValue.key`).
    public func key(_ i: Int32) -> CacheKey { CacheKey(stored: text(i)) }
    public func blob(_ i: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(statement, i))
        guard n > 0, let p = sqlite3_column_blob(statement, i) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
    public func optionalInt(_ i: Int32) -> Int64? { isNull(i) ? nil : int(i) }
    public func optionalDouble(_ i: Int32) -> Double? { isNull(i) ? nil : double(i) }
}
