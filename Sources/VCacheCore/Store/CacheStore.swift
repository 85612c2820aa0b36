#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The cache directory: the catalog and one folder per entry.
///
///     catalog.db                  SQLite, WAL
///     entries/ab/abcdef.../       the entry's folder: flock target of its one writer
///     entries/ab/abcdef.../data   sparse file, every byte at its absolute offset in the video
///
/// Locks (invariant 4, Docs/cache-format.md): a writer holds LOCK_EX on the entry's folder; anyone using
/// `data` holds LOCK_SH on `data`; the evictor takes LOCK_EX|LOCK_NB on the folder and then on
/// `data`, and skips the entry if either is busy. After any lock, the descriptor's inode is
/// compared with the path's, so a lock on something removed meanwhile is never trusted.
/// (The starting design sketched a separate `lock` file; locking the folder itself keeps one inode fewer
/// per entry, which is most of the cost of a small prefetch on ext4.)
public final class CacheStore: Sendable {
    public let directory: String
    public let catalog: Catalog
    public let sharing: Sharing
    /// The catalog file this store opened (its device and inode), to notice its replacement.
    private let catalogFile = Locked<FileID?>(nil)

    /// True once `catalog.db` is no longer the file this store opened: `verify --fix` repaired a
    /// damaged catalog (moved it aside, started a new one). A process that stays up (serve)
    /// would go on reading and writing the old one, stale, and trust its claims for files
    /// another process has replaced since: it must stop using this store.
    public var catalogReplaced: Bool {
        guard let opened = catalogFile.withLock({ $0 }) else { return false }
        return FileSystem.identity(directory + "/catalog.db") != opened
    }

    /// Who may use the cache. By default its owner only (folders 0700, files 0600: a cache holds
    /// every URL, signed tokens included). When the cache folder has the set-group-ID bit
    /// (`install -d -m 2770 -g vcache /var/cache/vcache`), its group too: folders 2770 and files
    /// 0660, set exactly (no umask narrows them), so a warm-up run as root and a serve run as
    /// the `vcache` user share one cache (every new file gets the folder's group).
    public enum Sharing: String, Sendable {
        case owner, group
        public var folderMode: mode_t { self == .group ? 0o2770 : 0o700 }
        public var fileMode: mode_t { self == .group ? 0o660 : 0o600 }
    }

    public enum OpenError: Error, Equatable, CustomStringConvertible {
        case notWritable(path: String, reason: String)
        case catalog(path: String, reason: String)
        case corruptCatalog(path: String, reason: String)
        /// A newer vcache wrote this catalog: its schema version and the one this binary knows.
        case newerCatalog(path: String, found: Int, known: Int)
        /// A command that only reads found no cache there (a mistyped VCACHE_DIR, say).
        case noCache(path: String)
        /// `verify --fix` of a corrupt catalog was stopped midway (a kill, a power cut, a failed
        /// write): the rows it set aside in `aside` are not all in the new catalog yet, so the
        /// cache is not opened (an entry folder would look like an orphan, and be swept).
        case repairInterrupted(path: String, aside: String)

        public var description: String {
            switch self {
            case .notWritable(let path, let reason): "cache directory '\(path)' is not usable: \(reason); choose another with --cache-dir or VCACHE_DIR"
            case .catalog(let path, let reason): "cannot open the catalog '\(path)': \(reason)"
            case .corruptCatalog(let path, let reason): "the catalog '\(path)' is corrupt (\(reason)); run 'vcache verify --fix' to set it aside and start a new one"
            case .newerCatalog(let path, let found, let known):
                "the catalog '\(path)' was written by a newer vcache (schema \(found); this one knows \(known)); upgrade vcache, or use another --cache-dir"
            case .repairInterrupted(let path, let aside):
                "a repair of the catalog '\(path)' was interrupted (the rows it set aside in '\(aside)' are not all copied back); run 'vcache verify --fix' to finish it"
            case .noCache(let path):
                "there is no cache at '\(path)' (nothing was ever cached there); check --cache-dir or VCACHE_DIR, or cache a video with 'vcache prefetch URL'"
            }
        }
    }

    /// Opens the cache at `given`, making it when missing; with `readOnly` it makes and writes
    /// nothing (a read-only file system, or a command that only reads: a missing cache is an
    /// error, not a new empty one).
    public init(directory given: String, readOnly: Bool = false, repairing: Bool = false) throws {
        if !repairing, let aside = Self.pendingRepair(directory: FileSystem.realPath(given) ?? given) {
            throw OpenError.repairInterrupted(path: (FileSystem.realPath(given) ?? given) + "/catalog.db", aside: aside)
        }
        if readOnly {
            let directory = FileSystem.realPath(given) ?? given
            guard FileSystem.followingStatus(directory + "/catalog.db") != nil else {
                // A path that cannot be a folder (a file in the way) is a problem of this machine.
                if errno == ENOTDIR { throw OpenError.notWritable(path: given, reason: String(cString: strerror(ENOTDIR))) }
                throw OpenError.noCache(path: directory)
            }
            self.directory = directory
            sharing = (FileSystem.followingStatus(directory).map { $0.st_mode & S_ISGID != 0 } ?? false) ? .group : .owner
            let path = directory + "/catalog.db"
            do {
                let opened = try Catalog(readOnlyPath: path)
                // A catalog file with no schema (a crash before its first commit) holds nothing;
                // made usable when the folder is writable, else there is no cache here yet.
                if !opened.hasSchema {
                    guard access(directory, W_OK) == 0 else { throw OpenError.noCache(path: directory) }
                    catalog = try Catalog(path: path, mode: sharing.fileMode)
                    return
                }
                catalog = opened
                catalogFile.withLock { $0 = FileSystem.identity(path) }
            } catch let e as Catalog.NewerSchema {
                throw OpenError.newerCatalog(path: path, found: e.found, known: e.known)
            } catch let e as DatabaseError {
                if e.isCorrupt { throw OpenError.corruptCatalog(path: path, reason: e.message) }
                throw OpenError.catalog(path: path, reason: e.isBusy ? "it stayed locked by another vcache process" : e.message)
            }
            return
        }
        do {
            try FileSystem.makeDirectories(given)
        } catch let e as SystemError {
            throw OpenError.notWritable(path: given, reason: String(cString: strerror(e.errno)))
        }
        // The cache directory itself may be reached through symlinks (`~/.cache` often is one):
        // it is resolved once, here. Inside it nothing is followed (O_NOFOLLOW, and SQLite's
        // SQLITE_OPEN_NOFOLLOW refuses a symlink anywhere in the catalog's path).
        let directory = FileSystem.realPath(given) ?? given
        self.directory = directory
        let sharing: Sharing = (FileSystem.followingStatus(directory).map { $0.st_mode & S_ISGID != 0 } ?? false) ? .group : .owner
        self.sharing = sharing
        do {
            try FileSystem.makeDirectories(directory + "/entries", mode: sharing.folderMode)
        } catch let e as SystemError {
            throw OpenError.notWritable(path: directory, reason: String(cString: strerror(e.errno)))
        }
        if access(directory, W_OK | X_OK) != 0 {
            throw OpenError.notWritable(path: directory, reason: String(cString: strerror(errno)))
        }
        let path = directory + "/catalog.db"
        let reserve = directory + "/" + Self.reserveName
        do {
            catalog = try Self.openCatalog(path, reserve: reserve, mode: sharing.fileMode)
        } catch let e as Catalog.NewerSchema {
            throw OpenError.newerCatalog(path: path, found: e.found, known: e.known)
        } catch let e as DatabaseError {
            if e.isCorrupt { throw OpenError.corruptCatalog(path: path, reason: e.message) }
            throw OpenError.catalog(path: path, reason: e.isBusy ? "it stayed locked by another vcache process" : e.message)
        }
        catalogFile.withLock { $0 = FileSystem.identity(path) }
        // Space kept back for the next time the disk is full (made when missing, best effort).
        if FileSystem.status(reserve).map({ FileSystem.allocatedBytes($0) < Int64(Self.reserveBytes) }) ?? true {
            unlink(reserve)
            Self.makeReserve(reserve, mode: sharing.fileMode)
        }
    }

    /// A file of `reserveBytes` kept in the cache folder. On a full disk SQLite cannot even open
    /// the catalog (its WAL index needs a page), so neither `evict` (which frees space), `ls` nor
    /// `verify` could run: then the reserve is given back first, and made again once there is room.
    public static let reserveName = "space.reserve"
    static let reserveBytes = 256 << 10

    static func openCatalog(_ path: String, reserve: String, mode: mode_t) throws -> Catalog {
        do {
            return try Catalog(path: path, mode: mode)
        } catch let e as DatabaseError where e.isDiskFull || e.isIOError {
            // Only a full disk is what the reserve is for (a folder named catalog.db, or one this
            // user cannot open, must not cost it).
            let full = e.isDiskFull || (FileSystem.space(PathText.deletingLastPathComponent(path)).map { $0.free < Int64(reserveBytes) } ?? false)
            guard full, unlink(reserve) == 0 else { throw e }
            return try Catalog(path: path, mode: mode)
        }
    }

    static func makeReserve(_ path: String, mode: mode_t) {
        guard let f = try? RawFile.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode) else { return }
        defer { f.close() }
        fchmod(f.fd, mode)
        // Real blocks, not a sparse size: fallocate(2) gives them without writing (and without an
        // fsync: a reserve lost in a crash is only made again). Elsewhere, zeros are written.
        #if os(Linux)
        let ok = posix_fallocate(f.fd, 0, off_t(reserveBytes)) == 0
        #else
        let zeros = [UInt8](repeating: 0, count: reserveBytes)
        let ok = zeros.withUnsafeBytes { (try? f.write($0, toAbsoluteOffset: 0)) != nil }
        #endif
        if !ok { unlink(path) }
    }

    /// A catalog SQLite reports as corrupt is moved aside (`catalog.db.corrupt-<time>`), its WAL
    /// with it. The next open starts an empty catalog; the entry folders it no longer describes
    /// are then orphans, which `Evictor.sweepOrphans` removes each under its locks (a writer
    /// still running keeps its folder until the next sweep). Returns where the old catalog went.
    ///
    /// Until `finishRepair`, the mark `catalog.db.repairing` (naming the old catalog, made
    /// durable before anything moves) says the repair is under way: no other open succeeds and no
    /// sweep removes a folder, so a repair stopped midway (a kill, a power cut, a failed write)
    /// loses no entry whose row still reads; the next `verify --fix` finishes it (called again,
    /// this resumes the move and returns the same place).
    public static func setAsideCorruptCatalog(directory: String, now: Date = Date()) throws -> String {
        let path = directory + "/catalog.db"
        if let aside = pendingRepair(directory: directory) {
            if !FileSystem.exists(aside) { try move(path, to: aside, directory: directory) }
            return aside
        }
        let aside = path + ".corrupt-" + UTCTime.compact(now)
        let mark = directory + "/" + repairMarkName
        let temp = mark + ".tmp"
        do {
            // Readable by whoever shares the cache (a group-shared one: 0660), so that every user's
            // vcache sees the repair under way.
            let shared = FileSystem.followingStatus(directory).map { $0.st_mode & S_ISGID != 0 } ?? false
            let mode: mode_t = shared ? Sharing.group.fileMode : Sharing.owner.fileMode
            let file = try RawFile.open(temp, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
            defer { file.close() }
            fchmod(file.fd, mode)
            try Array(PathText.lastPathComponent(aside).utf8).withUnsafeBytes { try file.write($0, toAbsoluteOffset: 0) }
            try file.sync()
        }
        guard rename(temp, mark) == 0 else { throw SystemError("rename", path: mark, errno: errno) }
        try FileSystem.syncFolder(directory)
        try move(path, to: aside, directory: directory)
        return aside
    }

    /// The WAL and its index first, then the database: a `catalog.db` never meets another's WAL.
    private static func move(_ path: String, to aside: String, directory: String) throws {
        for suffix in ["-wal", "-shm"] where FileSystem.exists(path + suffix) {
            _ = rename(path + suffix, aside + suffix)
        }
        guard rename(path, aside) == 0 else { throw SystemError("move aside", path: path, errno: errno) }
        try FileSystem.syncFolder(directory)
    }


    /// The mark of a catalog repair under way (`setAsideCorruptCatalog`).
    public static let repairMarkName = "catalog.db.repairing"

    /// Where the catalog being repaired was set aside, while a repair is under way; else nil.
    public static func pendingRepair(directory: String) -> String? {
        let mark = directory + "/" + repairMarkName
        guard FileSystem.status(mark) != nil else { return nil }
        // A mark this user cannot read still says a repair is under way.
        guard let bytes = FileManager.default.contents(atPath: mark) else { return directory + "/catalog.db.corrupt-unknown" }
        // A name in the cache folder, as a repair makes it (the mark points nowhere else).
        let name = String(decoding: bytes, as: UTF8.self)
        guard name.hasPrefix("catalog.db.corrupt-"), !name.contains("/") else { return directory + "/catalog.db.corrupt-unknown" }
        return directory + "/" + name
    }

    /// The repair is done (every row that reads is in the new catalog, durably): the mark goes.
    public static func finishRepair(directory: String) throws {
        guard unlink(directory + "/" + repairMarkName) == 0 || errno == ENOENT else {
            throw SystemError("remove", path: directory + "/" + repairMarkName, errno: errno)
        }
        try FileSystem.syncFolder(directory)
    }

    public func entryDirectory(_ key: CacheKey) -> String { "\(directory)/entries/\(key.hex.prefix(2))/\(key.hex)" }
    public func dataPath(_ key: CacheKey) -> String { entryDirectory(key) + "/data" }
    /// The writer's lock target: the entry folder itself.
    public func lockPath(_ key: CacheKey) -> String { entryDirectory(key) }

    /// Allocated bytes of an entry's `data` (0 when there is none).
    public func diskUsage(key: CacheKey) -> Int64 {
        FileSystem.status(dataPath(key)).map(FileSystem.allocatedBytes) ?? 0
    }

    /// Tries once to become the entry's writer. nil when another process or thread holds it.
    public func tryLockWriter(key: CacheKey) throws -> EntryLock? {
        let dir = entryDirectory(key)
        try FileSystem.makeDirectories(dir, mode: sharing.folderMode)
        if let st = FileSystem.status(dir), (st.st_mode & S_IFMT) != S_IFDIR {
            throw SystemError("use entry folder", path: dir, errno: ENOTDIR)
        }
        let path = lockPath(key)
        let file: RawFile
        do {
            file = try RawFile.open(path, flags: O_RDONLY | O_DIRECTORY)
        } catch let e as SystemError where e.errno == ENOENT {
            return try tryLockWriter(key: key)  // removed between mkdir and open: make it again
        }
        guard try file.lock(exclusive: true, nonBlocking: true) else {
            file.close()
            return nil
        }
        // The entry may have been evicted between open and flock: then this lock guards nothing.
        let mine = try file.status()
        guard let now = FileSystem.status(path), now.st_ino == mine.st_ino, now.st_dev == mine.st_dev else {
            file.close()
            return try tryLockWriter(key: key)
        }
        return EntryLock(file: file)
    }

    /// The lock of the stream whose root manifest is `root` (Docs/cache-format.md, "Streams"): a
    /// prefetch holds it from before it asks for the stream's manifest again to the end of its
    /// members, so two runs never complete one stream from two manifest versions. Its target is the
    /// folder of a key of vcache's own (`streamLockKey`, no catalog row), removed by
    /// `releaseStreamLock` (one a killed holder left is an empty orphan, swept). Nil when another
    /// process holds it.
    public func tryLockStream(root: CacheKey) throws -> EntryLock? {
        try tryLockWriter(key: Self.streamLockKey(of: root))
    }

    /// Releases a lock `tryLockStream(root:)` took, its folder removed first (a process waiting
    /// for it finds the folder gone and makes it again: `tryLockWriter`'s inode check).
    public func releaseStreamLock(_ lock: EntryLock, root: CacheKey) {
        removeFiles(key: Self.streamLockKey(of: root))
        lock.release()
    }

    public static func streamLockKey(of root: CacheKey) -> CacheKey {
        CacheKey(stored: SHA256Digest.hash("vcache stream lock " + root.hex))
    }

    /// Removes an entry's files (the caller holds its writer lock and the catalog has no rows).
    /// True when `data` is gone (removed now, or not there).
    @discardableResult
    public func removeFiles(key: CacheKey) -> Bool {
        let gone = unlink(dataPath(key)) == 0 || errno == ENOENT
        rmdir(entryDirectory(key))
        rmdir(PathText.deletingLastPathComponent(entryDirectory(key)))  // the shard, when now empty
        return gone
    }

    /// The writer's `data`: opened for reading and writing, created when missing (only the writer,
    /// holding the entry's lock, ever creates it), with LOCK_SH held while open so eviction skips it.
    public func openDataForWriting(key: CacheKey) throws -> RawFile {
        let file = try RawFile.open(dataPath(key), flags: O_RDWR | O_CREAT, mode: sharing.fileMode)
        // Exactly the cache's mode (the umask would narrow a group's); another user's file keeps its own.
        if sharing == .group, let st = try? file.status(), st.st_uid == geteuid(), st.st_mode & 0o777 != sharing.fileMode { fchmod(file.fd, sharing.fileMode) }
        _ = try file.lock(exclusive: false, nonBlocking: false)
        return file
    }

    /// The entry's `count` bytes from `offset` (to its end when nil, and never past it), read under
    /// LOCK_SH, when `e`'s ranges (as `Catalog.entry` reads them) claim them all; nil otherwise.
    public func cachedBytes(of e: CacheEntry, at offset: Int64 = 0, count: Int64? = nil) -> [UInt8]? {
        guard let length = e.length, offset >= 0, offset < length else { return nil }
        let span = ByteRange(offset, min(length, count.map { offset + $0 } ?? length))
        guard !span.isEmpty, e.ranges.contains(span), let data = try? openDataForReading(key: e.key) else { return nil }
        defer { data.close() }
        return try? data.bytes(Int(span.count), at: span.lowerBound)
    }

    /// A reader's `data` (export, verify, info): read-only and never created, so a reader racing
    /// an eviction cannot leave an empty file behind. LOCK_SH is held while open. Throws ENOENT
    /// when there is no `data`.
    public func openDataForReading(key: CacheKey) throws -> RawFile {
        let file = try RawFile.open(dataPath(key), flags: O_RDONLY)
        _ = try file.lock(exclusive: false, nonBlocking: false)
        return file
    }

    /// Drops a version (invariant 2): every claim of the entry, its completion and digest go and
    /// `validators` are recorded, durably, and only then the entry gets a new, empty `data`
    /// (Docs/cache-format.md, "Versions"). The caller holds the writer lock. The one way a version
    /// is dropped: by a job whose version changed, a completion whose digest did not match, serve
    /// starting over, and `verify --fix`. Returns the new `data`, open for writing; `old` (the
    /// caller's own open `data`, if any) is closed once it is unlinked. A reader holding the old
    /// file keeps a consistent view of it, and no writer, holding no byte now, can put another
    /// version into that file. `pausePoint` names the debug pause between the rows and the file.
    public func dropVersion(key: CacheKey, validators: Validators, closing old: RawFile? = nil,
                            pausePoint: String = "drop-all-after-invalidate") throws -> RawFile {
        try catalog.invalidate(key: key, validators: validators)
        testPause(pausePoint, key)
        return try replaceData(key: key, closing: old)
    }

    /// Stores `body` as the entry's one version, whole (the caller holds its writer lock): the old
    /// version is dropped first (rows, then a new `data`: a reader holding the old file keeps its
    /// view), the bytes written and fsynced before the one commit that claims them whole with
    /// their SHA-256 (invariant 1). serve keeps a manifest it answered this way; prefetch puts
    /// back a live manifest's copy when fetching it again failed.
    public func storeWhole(_ body: [UInt8], key: CacheKey, url: String, validators: Validators, contentType: String?) throws {
        let n = Int64(body.count)
        let data = try dropVersion(key: key, validators: validators)
        defer { data.close() }
        try body.withUnsafeBytes { try data.write($0, toAbsoluteOffset: 0) }
        try data.sync()
        let digest = SHA256Digest(chunkSize: ChunkStates.size)
        body.withUnsafeBytes { digest.update($0) }
        let sha = digest.finalize()
        var u = Catalog.Update(key: key, url: url, validators: validators, contentType: contentType)
        u.added = RangeSet([ByteRange(0, n)])
        u.diskBytes = (try? data.status()).map(FileSystem.allocatedBytes)
        u.sha256 = sha
        u.chunkStates = ChunkStates(sha256: sha, chunkSize: ChunkStates.size, states: digest.chunkStates)
        try catalog.commit(u)
    }

    /// The staging entry of a live manifest's refetch (`LiveRefetch.staging`, keyed by `key`'s
    /// hex): vcache's own, never shown as the user's.
    public static func stagingKey(of key: CacheKey) -> CacheKey {
        CacheKey(stored: SHA256Digest.hash("vcache live refetch " + key.hex))
    }

    /// A run killed inside `storeWhole` of a live manifest's new copy (after its first commit)
    /// left `key` holding no complete version while the new copy is whole in `staging`: that copy
    /// becomes `key`'s version (`storeWhole`, under `key`'s writer lock) and `staging` goes.
    /// Only a whole copy that is an MPD or a playlist; true when it was restored.
    @discardableResult
    public func restoreStagedManifest(key: CacheKey, staging: CacheKey, url: String) -> Bool {
        guard let s = (try? catalog.entry(key: staging)) ?? nil, s.isComplete,
              let bytes = cachedBytes(of: s), s.length == Int64(bytes.count), !bytes.isEmpty,
              MPD.looksLikeMPD(firstBytes: Array(bytes.prefix(4096)), contentType: nil)
                || HLSPlaylist.looksLikePlaylist(firstBytes: Array(bytes.prefix(16)), contentType: nil),
              let lock = (try? tryLockWriter(key: key)) ?? nil else { return false }
        defer { lock.release() }
        // Read under the lock: a writer may have completed it meanwhile.
        guard let e = (try? catalog.entry(key: key)) ?? nil, !e.isComplete else { return false }
        guard (try? storeWhole(bytes, key: key, url: s.latestURL, validators: s.validators, contentType: s.contentType)) != nil else { return false }
        if let final = (try? catalog.finalURL(of: staging)) ?? nil { try? catalog.recordFinalURL(key: key, url: final) }
        var c = Evictor.Criteria()
        c.keys = [staging]
        c.alone = true
        _ = try? Evictor(store: self).evict(c, dryRun: false)
        return true
    }

    /// Gives an entry a new, empty `data` (the caller holds the writer lock and no claim vouches
    /// for the old file's bytes: `dropVersion` removed them, or there were none). The old file is
    /// unlinked, never truncated: a reader still holding it keeps a consistent view, and a hard
    /// link made by `export --link` keeps the video it was made from. `old` is closed once the
    /// unlink succeeded.
    ///
    /// The folder is fsynced then: the old name's removal and the new file's name are durable
    /// before any byte of the new file is claimed (a crash could otherwise bring the old `data`
    /// back under claims of the new version where a file system does not commit a new file's name
    /// with its fsync, as POSIX allows; ext4 and XFS do). A version is dropped rarely: the cost
    /// (about a millisecond) is not on the path of every download.
    func replaceData(key: CacheKey, closing old: RawFile?) throws -> RawFile {
        if unlink(dataPath(key)) != 0 && errno != ENOENT {
            throw SystemError("remove", path: dataPath(key), errno: errno)
        }
        old?.close()
        let fresh = try openDataForWriting(key: key)
        do {
            try FileSystem.syncFolder(entryDirectory(key))
        } catch {
            fresh.close()
            throw error
        }
        return fresh
    }

    /// For a writer that has just taken the entry (`data` open): claims past the end of `data`
    /// are not cached (a file lost or cut short by a crash, ExoPlayer's rule for missing spans), so
    /// they are dropped from the catalog, with the completion. Returns the entry as it now stands.
    public func dropClaimsBeyondData(_ entry: CacheEntry, data: RawFile) throws -> CacheEntry {
        let st = try data.status()
        let size = Int64(st.st_size)
        guard let last = entry.ranges.ranges.last, last.upperBound > size else { return entry }
        var e = entry
        e.ranges.remove(ByteRange(size, last.upperBound))
        let whole = e.length.map { e.ranges.contains(ByteRange(0, $0)) } ?? false
        try catalog.replaceRanges(key: e.key, with: e.ranges, diskBytes: FileSystem.allocatedBytes(st), keepCompletion: whole && e.isComplete)
        e.cachedBytes = e.ranges.count
        if !(whole && e.isComplete) {
            e.completed = nil
            e.sha256 = nil
        }
        return e
    }
}

/// A held flock; released by `release()` (closing the descriptor releases it too).
public final class EntryLock: Sendable {
    let file: RawFile
    init(file: RawFile) { self.file = file }
    public func release() { file.close() }
}
