import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// A prefetch job takes its entry off the fetch loop (`EntryOpening`); a job that ends first
/// (a stop) must leave neither a lock held nor a folder it made, whichever side comes second.
@Suite struct EntryOpeningTests {
    @Test func anOpeningAbandonedAfterItTookTheEntryGivesItBack() throws {
        let cache = try TestCache()
        let key: CacheKey = "opening-after"
        let opening = EntryOpening(store: cache.store, key: key)
        opening.run(replacingUnclaimed: true)
        #expect(FileManager.default.fileExists(atPath: cache.store.dataPath(key)))
        #expect(try cache.store.tryLockWriter(key: key) == nil, "the opening holds the lock")
        opening.abandon()
        #expect(!FileManager.default.fileExists(atPath: cache.store.entryDirectory(key)), "the folder it made is gone")
        #expect(opening.take() == nil)
        let lock = try #require(try cache.store.tryLockWriter(key: key), "the lock is free again")
        lock.release()
    }

    @Test func anOpeningAbandonedBeforeItTookTheEntryGivesItBackItself() throws {
        let cache = try TestCache()
        let key: CacheKey = "opening-before"
        let opening = EntryOpening(store: cache.store, key: key)
        opening.abandon()
        opening.run(replacingUnclaimed: true)
        #expect(opening.take() == nil)
        #expect(!FileManager.default.fileExists(atPath: cache.store.entryDirectory(key)))
        let lock = try #require(try cache.store.tryLockWriter(key: key))
        lock.release()
    }

    @Test func anOpeningKeepsAnEntryThatWasThereBefore() throws {
        let cache = try TestCache()
        let key: CacheKey = "opening-kept"
        let before = try #require(try cache.store.tryLockWriter(key: key))
        let data = try cache.store.openDataForWriting(key: key)
        data.close()
        let busy = EntryOpening(store: cache.store, key: key)
        busy.run(replacingUnclaimed: true)
        guard case .busy? = busy.take() else { Issue.record("another writer holds it: busy"); return }
        before.release()
        let opening = EntryOpening(store: cache.store, key: key)
        opening.run(replacingUnclaimed: true)
        opening.abandon()
        #expect(FileManager.default.fileExists(atPath: cache.store.dataPath(key)), "a data file it did not make stays")
    }
}
