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

/// Removes entries: least recently used first under a size cap, or by age, state or name
/// (ExoPlayer's `LeastRecentlyUsedCacheEvictor`, for a cache shared between processes).
///
/// Invariant 5 (Docs/cache-format.md): never an entry a writer holds (LOCK_EX on its folder fails) or a reader
/// uses (LOCK_EX on `data` fails), never a pinned one unless asked by name or with
/// `includePinned`; catalog rows go first and files second, so a crash between leaves only
/// orphan files, which `sweepOrphans` removes. A stream goes whole or not at all: its members
/// are one batch, a member that cannot be locked keeps the others, and their rows are deleted as
/// one group (`Catalog.removeEntries(groups:)`); a member another stream still names stays for
/// it (left out by the choice, and checked again in the deleting transaction). Lock order: the entry folder (the writer's lock),
/// then `data`, both non-blocking.
public struct Evictor {
    public let store: CacheStore

    public init(store: CacheStore) { self.store = store }

    public struct Criteria: Sendable {
        /// Evict least recently used entries until the cache uses at most this much real disk.
        public var maxSize: Int64?
        /// Only entries last used more than this many seconds ago.
        public var olderThan: Double?
        /// Only incomplete entries (and the streams marked partial though every member is
        /// complete: `StreamRole.manifestToAsk`, `.manifestUnconfirmed`).
        public var partialOnly = false
        /// The roots of the streams marked partial (read by `evict` when `partialOnly`).
        var markedRoots: Set<CacheKey> = []
        /// Only these keys (an explicit request: pinned entries among them go too, unless
        /// `keepPinned`).
        public var keys: Set<CacheKey>?
        /// With `keys`: pinned ones stay (prefetch giving back what it stored: a pin the user set
        /// meanwhile, from another process, wins).
        public var keepPinned = false
        /// Every entry (subject to the other filters).
        public var all = false
        public var includePinned = false
        /// Never these keys (e.g. the entries the running prefetch is filling).
        public var protected: Set<CacheKey> = []
        /// Each entry on its own, a stream's members too (a live playlist let go, its segments kept).
        public var alone = false

        public init() {}

        /// Pinned entries may go: asked for, or named (and not kept).
        var evictsPinned: Bool { includePinned || keys != nil && !keepPinned }
    }

    public struct Outcome: Sendable {
        public var evicted: [CacheEntry] = []
        public var skipped: [(entry: CacheEntry, reason: String)] = []
        public var freedBytes: Int64 = 0
        /// How many of `skipped` this user cannot remove (another user's files): a setup problem,
        /// unlike an entry in use, which the next run removes.
        public var untouchable = 0
        /// Real disk use before and after (entries plus the catalog).
        public var usageBefore: Int64 = 0
        public var usageAfter: Int64 = 0
    }

    /// What the cache uses on disk, as `du -s` counts it. `fixed`: the cache folder and every file
    /// in it (the catalog with its journal, the reserve, catalogs `verify --fix` set aside),
    /// `entries/` and its shards, and entry folders no row describes (orphans, until a sweep).
    /// Each entry: its folder and `data` as measured (`measured`; a crash can leave blocks its
    /// row does not count), else its row's `disk_bytes` and a folder of `perEntry`.
    public struct Footprint: Sendable, Equatable {
        public var fixed: Int64
        public var perEntry: Int64
        /// The catalog's journal now (counted in `fixed`).
        public var journal: Int64 = 0
        /// Entry folders measured, by key (folder and `data`).
        public var measured: [CacheKey: Int64] = [:]
        public init(fixed: Int64, perEntry: Int64, journal: Int64 = 0, measured: [CacheKey: Int64] = [:]) {
            self.fixed = fixed
            self.perEntry = perEntry
            self.journal = journal
            self.measured = measured
        }
        /// What storing a new entry may add besides its `data`: its folder and shard, and the
        /// catalog's journal up to the size it is kept under (`Database.journalLimit`).
        public var growthAllowance: Int64 { 2 * perEntry + max(0, Database.journalLimit - journal) }
        public func cost(_ e: CacheEntry) -> Int64 { measured[e.key] ?? e.diskBytes + perEntry }
        /// The cache's size with these rows: entry folders no row names count too.
        public func total(_ entries: [CacheEntry]) -> Int64 {
            let rows = entries.reduce(fixed) { $0 + cost($1) }
            guard !measured.isEmpty else { return rows }
            let named = Set(entries.map(\.key))
            return measured.reduce(rows) { named.contains($1.key) ? $0 : $0 + $1.value }
        }
    }

    /// Measures the footprint now. `exact`: every entry folder too (two stats an entry: what
    /// evict and ls report); otherwise rows stand for entries (serve, on every storing job).
    public func footprint(exact: Bool = true) -> Footprint {
        func blocks(_ path: String) -> Int64 { FileSystem.status(path).map(FileSystem.allocatedBytes) ?? 0 }
        let list = { (path: String) in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] }
        let root = store.directory + "/entries"
        var fixed = blocks(store.directory) + blocks(root)
        for name in list(store.directory) where name != "entries" { fixed += blocks(store.directory + "/" + name) }
        var perEntry: Int64?
        var measured: [CacheKey: Int64] = [:]
        for shard in list(root) {
            fixed += blocks(root + "/" + shard)
            let keys = exact ? list(root + "/" + shard) : Array(list(root + "/" + shard).prefix(1))
            for key in keys {
                let folder = root + "/" + shard + "/" + key
                let own = blocks(folder)
                if perEntry == nil { perEntry = own }
                if exact, let k = CacheKey(key) { measured[k] = own + blocks(folder + "/data") }
            }
        }
        // With no entry folder to measure, one the size of the entries folder (a fresh directory).
        return Footprint(fixed: fixed, perEntry: perEntry ?? blocks(root), journal: blocks(store.directory + "/catalog.db-wal"),
                         measured: measured)
    }

    /// Chooses and (unless `dryRun`) removes entries, least recently used first: those matching every
    /// filter given, and with `maxSize` only until the cache fits. The choice is `EvictionChoice`'s
    /// (pure); this removes what it chose, then chooses again from what is really left while an
    /// entry could not go (in use, pinned meanwhile, another user's) or the cache is still over
    /// the cap (the catalog's journal grew, another process stored meanwhile).
    public func evict(_ c: Criteria, dryRun: Bool, now: Date = Date()) throws -> Outcome {
        var out = Outcome()
        // The journal is measured too: give back what earlier writes left in it first, so that a
        // dry run counts what the run that follows will find.
        store.catalog.shrinkJournal()
        var entries = try store.catalog.allEntries()
        var footprint = footprint()
        out.usageBefore = footprint.total(entries)
        // Entries that could not go, and why; each skipped entry is named once, in the order met.
        var excluded: [CacheKey: String] = [:]
        var untouchable = Set<CacheKey>()  // keys a dry run found this user cannot remove
        var named = Set<CacheKey>()
        func name(_ e: CacheEntry, _ reason: String) {
            if named.insert(e.key).inserted { out.skipped.append((e, reason)) }
        }
        // Each round removes or excludes at least one entry; the bound only guards against a
        // concurrent writer adding entries forever.
        for _ in 0..<16 {
            let roots = c.alone ? [:] : try streamRoots()
            var c = c
            if c.partialOnly, !c.alone { c.markedRoots = try store.catalog.markedRoots() }
            let choice = EvictionChoice.choose(entries, c, footprint: footprint, excluded: excluded, streams: roots, now: now)
            let byKey = Dictionary(entries.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            let victims = choice.victims.compactMap { byKey[$0] }
            let groups = choice.groups.map { g in (root: g.root, entries: g.keys.compactMap { byKey[$0] }) }
            out.usageAfter = choice.usageAfter
            if dryRun {
                // What the run would find: entries this user cannot remove, then entries in use.
                var blocked: [CacheKey: String] = [:]
                for v in victims {
                    if let why = removalProblem(v.key) {
                        blocked[v.key] = why
                        untouchable.insert(v.key)
                    } else if isInUse(v.key) { blocked[v.key] = "in use by another vcache process" }
                }
                guard blocked.isEmpty else {
                    excluded.merge(blocked) { a, _ in a }
                    continue
                }
                for s in choice.skipped { byKey[s.key].map { name($0, s.reason) } }
                out.evicted = victims
                out.freedBytes = victims.reduce(0) { $0 + footprint.cost($1) }
                out.untouchable = out.skipped.filter { untouchable.contains($0.entry.key) }.count
                return out
            }
            for s in choice.skipped { byKey[s.key].map { name($0, s.reason) } }
            if victims.isEmpty { break }
            for batch in Self.batches(groups) {
                for (e, removal) in try remove(batch, evenIfPinned: c.evictsPinned) {
                    let why: String
                    switch removal {
                    case .removed(let freed):
                        out.evicted.append(e)
                        out.freedBytes += freed > 0 ? footprint.cost(e) : 0
                        continue
                    case .busy: why = "in use by another vcache process"
                    case .withStream: why = "kept with its stream: another member of it could not go"
                    case .changed: why = "pinned or used while evicting"
                    case .shared:
                        // Not a failure: it stays for the stream that names it (which may go later).
                        name(e, "kept: another stream names it now")
                        continue
                    case .untouchable(let reason):
                        why = reason
                        out.untouchable += 1
                    }
                    excluded[e.key] = why
                    name(e, why)
                }
            }
            // Deleting rows grew the catalog's journal; give that back before measuring.
            store.catalog.shrinkJournal()
            entries = try store.catalog.allEntries()
            footprint = self.footprint()
            out.usageAfter = footprint.total(entries)
            if let cap = c.maxSize, out.usageAfter <= cap { break }
        }
        return out
    }

    /// Member key to the roots of the streams naming it (a stream is evicted as one unit).
    private func streamRoots() throws -> [CacheKey: [CacheKey]] {
        var roots: [CacheKey: [CacheKey]] = [:]
        for s in try store.catalog.streams() { for k in s.keys { roots[k, default: []].append(s.root) } }
        return roots
    }

    typealias Group = (root: CacheKey?, entries: [CacheEntry])

    /// Chosen groups go together, one transaction for about 256 entries (each catalog commit is
    /// a durable fsync; 5,000 of them cost seconds); a stream's members always in one batch.
    static func batches(_ groups: [Group]) -> [[Group]] {
        var out: [[Group]] = []
        var current: [Group] = []
        var count = 0
        for g in groups {
            current.append(g)
            count += g.entries.count
            if count >= 256 {
                out.append(current)
                current = []
                count = 0
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    enum Removal {
        case removed(Int64), busy, changed
        /// A member of its stream could not be locked or removed: the stream stays whole.
        case withStream
        /// This user cannot lock or remove its files (another user made them): skipped, named.
        case untouchable(String)
        /// Another stream names it now (recorded since the choice): it stays, for that stream.
        case shared
    }

    /// Why this process cannot remove the entry's files, or nil when it can: it must be able to
    /// unlink `data` (write on the entry folder) and remove the folder (write on the shard).
    func removalProblem(_ key: CacheKey) -> String? {
        let folder = store.entryDirectory(key)
        for dir in [folder, PathText.deletingLastPathComponent(folder)] where FileSystem.exists(dir) {
            if access(dir, W_OK | X_OK) != 0 { return "cannot remove its files: \(String(cString: strerror(errno))) on \(dir)" }
        }
        return nil
    }

    /// True when a writer or reader holds the entry now.
    func isInUse(_ key: CacheKey) -> Bool {
        guard let locks = try? takeLocks(key) else { return true }
        locks.forEach { $0.close() }
        return false
    }

    /// LOCK_EX|LOCK_NB on the entry folder (the writer's lock) then on `data`; nil when either is held.
    private func takeLocks(_ key: CacheKey) throws -> [RawFile]? {
        var held: [RawFile] = []
        for path in [store.lockPath(key), store.dataPath(key)] {
            guard FileSystem.exists(store.entryDirectory(key)) else { return held }
            guard FileSystem.exists(path) else { continue }
            let f = try RawFile.open(path, flags: path == store.lockPath(key) ? O_RDONLY | O_DIRECTORY : O_RDWR)
            guard try f.lock(exclusive: true, nonBlocking: true) else {
                f.close()
                held.forEach { $0.close() }
                return nil
            }
            held.append(f)
        }
        return held
    }

    /// Removes the groups' entries: each one's locks first (a busy one is skipped, and keeps the
    /// rest of its group), then every row in one transaction (each deleted only if still unpinned
    /// and unused since it was chosen, a stream's member only if no other stream names it now),
    /// then the files of those whose rows went. A crash between leaves only orphan folders.
    private func remove(_ groups: [Group], evenIfPinned: Bool) throws -> [(CacheEntry, Removal)] {
        var outcome: [(CacheEntry, Removal)] = []
        var locked: [(group: Int, entry: CacheEntry, locks: [RawFile])] = []
        defer { for l in locked { l.locks.forEach { $0.close() } } }
        var blocked = Set<Int>()
        for (g, group) in groups.enumerated() {
            for e in group.entries {
                if let why = removalProblem(e.key) {
                    outcome.append((e, .untouchable(why)))
                    blocked.insert(g)
                    continue
                }
                let taken: [RawFile]?
                do {
                    taken = try takeLocks(e.key)
                } catch {
                    // One entry another user made must not stop the eviction of all the others.
                    outcome.append((e, .untouchable("cannot lock it: \(error)")))
                    blocked.insert(g)
                    continue
                }
                guard let locks = taken else {
                    outcome.append((e, .busy))
                    blocked.insert(g)
                    continue
                }
                locked.append((g, e, locks))
                testPause("evict-before-delete", e.key)
            }
        }
        // A stream goes whole or not at all: a member that could not be locked keeps the others.
        locked.removeAll { l in
            guard groups[l.group].root != nil, blocked.contains(l.group) else { return false }
            l.locks.forEach { $0.close() }
            outcome.append((l.entry, .withStream))
            return true
        }
        let freed = locked.map { store.diskUsage(key: $0.entry.key) }
        var removal: [Catalog.RemovalGroup] = []
        var last: Int?
        for l in locked {
            if l.group != last { removal.append(.init(root: groups[l.group].root, entries: [])) }
            removal[removal.count - 1].entries.append((l.entry.key, l.entry.lastUsed))
            last = l.group
        }
        let (gone, shared) = try store.catalog.removeEntries(groups: removal, evenIfPinned: evenIfPinned)
        for (i, l) in locked.enumerated() {
            let e = l.entry
            guard gone.contains(e.key) else {
                outcome.append((e, shared.contains(e.key) ? .shared : .changed))
                continue
            }
            // Rows are gone; now the files. A crash here leaves an orphan folder for sweepOrphans.
            testPause("evict-after-delete", e.key)
            // Only what really went counts as freed (an orphan left here is swept later).
            outcome.append((e, .removed(store.removeFiles(key: e.key) ? freed[i] : 0)))
        }
        return outcome
    }

    /// Entry folders with no catalog row and no lock holder (left by a crash between a row's
    /// deletion and its files', or by a writer killed before its first checkpoint). Returns what went.
    @discardableResult
    public func sweepOrphans() throws -> [CacheKey] {
        // A catalog repair under way: a folder whose row is not copied back yet is no orphan.
        guard CacheStore.pendingRepair(directory: store.directory) == nil else { return [] }
        let known = Set(try store.catalog.allEntries().map(\.key))
        var removed: [CacheKey] = []
        let root = store.directory + "/entries"
        for fan in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + fan)) ?? [] {
                guard let key = CacheKey(name), !known.contains(key), name.hasPrefix(fan), let locks = try? takeLocks(key) else { continue }
                defer { locks.forEach { $0.close() } }
                testPause("sweep-before-recheck", key)
                // Re-check under the locks: a writer may have committed its first checkpoint
                // meanwhile. A catalog that cannot be read now (busy, an I/O error) proves no
                // folder an orphan: it stays for the next sweep.
                let row: CacheEntry?
                do { row = try store.catalog.entry(key: key) } catch { continue }
                guard row == nil else { continue }
                store.removeFiles(key: key)
                removed.append(key)
            }
            rmdir(root + "/" + fan)  // only succeeds when empty
        }
        return removed
    }
}
