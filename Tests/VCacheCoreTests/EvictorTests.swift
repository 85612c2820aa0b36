import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

@Suite struct EvictorTests {
    let origin: TestOrigin
    let cache: TestCache
    let urls: [String]

    /// Six complete 256 KiB entries.
    init() throws {
        origin = try TestOrigin()
        cache = try TestCache()
        var list: [String] = []
        for i in 0..<6 {
            origin.setResource("/e\(i).mp4", .init(body: TestBytes.make(256 << 10, seed: UInt64(i + 1))))
            list.append(origin.url("/e\(i).mp4"))
            #expect(cache.prefetch(list[i]).error == nil)
        }
        urls = list
    }

    func key(_ i: Int) -> CacheKey { CacheKeyRules().key(for: URL(string: urls[i])!) }

    /// Sets last use so that `order` runs from least to most recently used.
    func use(in order: [Int]) throws {
        for (rank, i) in order.enumerated() {
            try cache.store.catalog.touch(key: key(i), now: Date(timeIntervalSince1970: 1_700_000_000 + Double(rank) * 60))
        }
    }

    func remaining() throws -> Set<Int> {
        Set(try (0..<6).filter { try cache.store.catalog.entry(key: key($0)) != nil })
    }

    /// The footprint as `evict` measures it (after giving the journal back).
    func footprint() -> Evictor.Footprint {
        cache.store.catalog.shrinkJournal()
        return Evictor(store: cache.store).footprint()
    }

    /// What `du -s` counts: every file's and folder's allocated blocks, the cache folder's own included.
    func realUsage() -> Int64 {
        var total = FileSystem.status(cache.store.directory).map(FileSystem.allocatedBytes) ?? 0
        let e = FileManager.default.enumerator(atPath: cache.store.directory)
        while let name = e?.nextObject() as? String {
            if let st = FileSystem.status(cache.store.directory + "/" + name) { total += FileSystem.allocatedBytes(st) }
        }
        return total
    }

    @Test(arguments: [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 5, 0, 3, 1, 4]])
    func exactlyTheLeastRecentlyUsedGoUnderTheCap(order: [Int]) throws {
        try use(in: order)
        var c = Evictor.Criteria()
        let footprint = footprint()
        let entryCost = footprint.cost(try #require(try cache.store.catalog.entry(key: key(0))))
        c.maxSize = footprint.fixed + 3 * entryCost + entryCost / 2
        let out = try Evictor(store: cache.store).evict(c, dryRun: false)
        #expect(out.evicted.map(\.key) == order.prefix(3).map(key))
        #expect(try remaining() == Set(order.suffix(3)))
        #expect(out.usageAfter <= c.maxSize!)
        #expect(realUsage() <= c.maxSize!)  // as du counts: folders and the catalog's journal included
    }

    /// A `pin` landing after the evictor chose an entry wins: the row is deleted only if it is
    /// still unpinned and unused since the choice (invariant 5).
    @Test func aPinLandingDuringAnEvictionWins() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        let victim = key(0), catalog = cache.store.catalog
        TestSeam.setHook("evict-before-delete", key: victim) { k in
            if k == victim { _ = try? catalog.setPinned(key: victim, true) }
        }
        defer { TestSeam.setHook("evict-before-delete", key: victim, nil) }
        var c = Evictor.Criteria()
        let footprint = footprint()
        let entryCost = footprint.cost(try #require(try catalog.entry(key: key(0))))
        c.maxSize = footprint.fixed + 3 * entryCost + entryCost / 2
        let out = try Evictor(store: cache.store).evict(c, dryRun: false)
        #expect(out.skipped.map(\.entry.key) == [victim])
        #expect(out.skipped.first?.reason == "pinned or used while evicting")
        #expect(out.evicted.map(\.key) == [1, 2, 3].map(key))
        #expect(try catalog.entry(key: victim)?.pinned == true)
        #expect(FileSystem.exists(cache.store.dataPath(victim)))
    }

    @Test func pinnedEntriesStayAndTheNextLeastRecentlyUsedGoesInstead() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        #expect(try cache.store.catalog.setPinned(key: key(0), true))
        var c = Evictor.Criteria()
        c.maxSize = footprint().total(try cache.store.catalog.allEntries()) - 1  // one entry must go
        let out = try Evictor(store: cache.store).evict(c, dryRun: false)
        #expect(out.evicted.map(\.key) == [key(1)])
        #expect(out.skipped.map(\.entry.key) == [key(0)])
        #expect(try remaining() == [0, 2, 3, 4, 5])
    }

    @Test func anEntryAWriterHoldsOrAReaderUsesIsSkippedNotRemoved() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        let writer = try #require(try cache.store.tryLockWriter(key: key(0)))
        let reader = try cache.store.openDataForReading(key: key(1))  // LOCK_SH, as export and serve hold it
        var c = Evictor.Criteria()
        c.all = true
        let out = try Evictor(store: cache.store).evict(c, dryRun: false)
        writer.release()
        reader.close()
        #expect(Set(out.skipped.map(\.entry.key)) == [key(0), key(1)])
        #expect(out.skipped.allSatisfy { $0.reason == "in use by another vcache process" })
        #expect(try remaining() == [0, 1])
        #expect(FileSystem.exists(cache.store.dataPath(key(0))))
    }

    /// A stream goes whole or not at all: one member a reader holds keeps every member, named
    /// (its root) or under a cap, and each is said.
    @Test func aStreamWithAMemberInUseStaysWhole() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        try cache.store.catalog.recordStream(root: key(0), format: "hls", members: [1, 2, 3].map { .init(key: key($0), role: .segment) })
        let reader = try cache.store.openDataForReading(key: key(2))
        var c = Evictor.Criteria()
        c.keys = [key(0)]
        let named = try Evictor(store: cache.store).evict(c, dryRun: false)
        #expect(named.evicted.isEmpty)
        #expect(Set(named.skipped.map(\.entry.key)) == Set([0, 1, 2, 3].map(key)))
        #expect(named.skipped.first { $0.entry.key == key(1) }?.reason == "kept with its stream: another member of it could not go")
        var all = Evictor.Criteria()
        all.all = true
        let out = try Evictor(store: cache.store).evict(all, dryRun: false)
        reader.close()
        #expect(try remaining() == [0, 1, 2, 3])
        #expect(Set(out.evicted.map(\.key)) == Set([4, 5].map(key)))
        // Free again: the stream goes, all of it.
        #expect(try Evictor(store: cache.store).evict(c, dryRun: false).evicted.count == 4)
        #expect(try remaining() == [])
    }

    /// `--dry-run` promises what the run does: the same entries, and a cache no larger than it said
    /// (it said "would use 200 MiB" and the run then used 205 MiB: the journal grew). A busy entry
    /// makes the next least recently used one go instead, in both.
    @Test func aDryRunNamesWhatTheRunRemovesAndTheRunEndsWhereItSaid() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        let reader = try cache.store.openDataForReading(key: key(1))
        defer { reader.close() }
        let evictor = Evictor(store: cache.store)
        var c = Evictor.Criteria()
        c.maxSize = footprint().total(try cache.store.catalog.allEntries()) / 2
        let dry = try evictor.evict(c, dryRun: true)
        let real = try evictor.evict(c, dryRun: false)
        #expect(!dry.evicted.isEmpty)
        #expect(dry.evicted.map(\.key) == Array([0, 2, 3, 4, 5].map(key).prefix(dry.evicted.count)))
        #expect(real.evicted.map(\.key) == dry.evicted.map(\.key))
        #expect(dry.skipped.map(\.entry.key) == [key(1)] && real.skipped.map(\.entry.key) == [key(1)])
        #expect(real.usageAfter <= dry.usageAfter)
        #expect(realUsage() <= c.maxSize!)
        #expect(real.usageAfter == realUsage())
    }

    /// The size is what du counts even where rows do not say it: bytes a killed writer wrote and
    /// never claimed, an orphan folder, a catalog verify set aside (evict said 4.6 MiB of a 5 MiB
    /// cap while du counted 5.6 MiB).
    @Test func theCacheSizeIsWhatDuCountsWhatTheRowsMiss() throws {
        let data = try #require(FileHandle(forUpdatingAtPath: cache.store.dataPath(key(0))))
        try data.seekToEnd()
        data.write(TestBytes.make(512 << 10, seed: 77))
        try data.close()
        let orphan = cache.store.entryDirectory(CacheKey(String(repeating: "e", count: 64))!)
        try FileSystem.makeDirectories(orphan)
        try TestBytes.make(100_000, seed: 78).write(to: URL(fileURLWithPath: orphan + "/data"))
        try TestBytes.make(50_000, seed: 79).write(to: URL(fileURLWithPath: cache.store.directory + "/catalog.db.corrupt-20261124-000000"))
        let total = footprint().total(try cache.store.catalog.allEntries())
        #expect(total == realUsage())
    }

    @Test func aDryRunChangesNothing() throws {
        var c = Evictor.Criteria()
        c.all = true
        let out = try Evictor(store: cache.store).evict(c, dryRun: true)
        #expect(out.evicted.count == 6)
        #expect(try remaining() == Set(0..<6))
    }

    @Test func olderThanAndPartialCombine() throws {
        try use(in: [0, 1, 2, 3, 4, 5])
        try cache.store.catalog.touch(key: key(5))  // now
        let partial = origin.url("/p.mp4")
        origin.setResource("/p.mp4", .init(body: TestBytes.make(100_000, seed: 9)))
        #expect(cache.prefetch(partial, [.head(1000)]).error == nil)
        var c = Evictor.Criteria()
        c.olderThan = 3600
        let out = try Evictor(store: cache.store).evict(c, dryRun: false)
        #expect(out.evicted.count == 5)
        #expect(try remaining() == [5])
        var p = Evictor.Criteria()
        p.partialOnly = true
        #expect(try Evictor(store: cache.store).evict(p, dryRun: false).evicted.map(\.latestURL) == [partial])
    }

    @Test func orphanFoldersAreSweptButALockedOneIsLeft() throws {
        let orphan = CacheKey(String(repeating: "0", count: 64))!, busy = CacheKey(String(repeating: "1", count: 64))!
        for k in [orphan, busy] {
            try FileSystem.makeDirectories(cache.store.entryDirectory(k))
            #expect(FileManager.default.createFile(atPath: cache.store.dataPath(k), contents: Data("x".utf8)))
        }
        let held = try #require(try cache.store.tryLockWriter(key: busy))
        let swept = try Evictor(store: cache.store).sweepOrphans()
        held.release()
        #expect(swept == [orphan])
        #expect(!FileSystem.exists(cache.store.entryDirectory(orphan)))
        #expect(FileSystem.exists(cache.store.dataPath(busy)))
    }
}
