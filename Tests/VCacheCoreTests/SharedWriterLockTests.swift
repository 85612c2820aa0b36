import Foundation
import Synchronization
import Testing
@testable import VCacheCore

/// The entry's writer lock shared by serve's jobs: a drop runs only while no other job can write
/// the file it replaces, and no job joins while one runs or waits.
@Suite struct SharedWriterLockTests {
    /// The lock, taken on a new entry, with `jobs` jobs joined.
    static func shared(_ cache: TestCache, jobs: Int) throws -> (SharedWriterLock, String) {
        let key = String(repeating: "ab", count: 32)
        let lock = try #require(try cache.store.tryLockWriter(key: key))
        let shared = SharedWriterLock(lock)
        for _ in 0..<jobs { #expect(shared.join()) }
        return (shared, key)
    }

    @Test func aJobAloneDropsAtOnceAndNoJobJoinsMeanwhile() throws {
        let cache = try TestCache()
        let (shared, _) = try Self.shared(cache, jobs: 1)
        let joined = Flag()
        #expect(try shared.dropAlone { joined.value.store(shared.join(), ordering: .relaxed) })
        let didJoin = joined.value.load(ordering: .relaxed)
        #expect(!didJoin)
        #expect(shared.join())  // once the drop is over, jobs join again
        shared.leave()
        shared.leave()
        #expect(!shared.isHeld)
    }

    @Test func aDropAmongOtherJobsWaitsForTheLastOneToLeave() throws {
        let cache = try TestCache()
        let (shared, key) = try Self.shared(cache, jobs: 2)
        let ran = Counted(), heldWhileRunning = Flag(), busyWhileRunning = Flag()
        let store = cache.store
        #expect(try !shared.dropAlone {
            ran.value.add(1, ordering: .relaxed)
            heldWhileRunning.value.store(shared.isHeld, ordering: .relaxed)
            busyWhileRunning.value.store(((try? store.tryLockWriter(key: key)) ?? nil) == nil, ordering: .relaxed)
        })
        // Handed over: no job joins and none may drop a version until it has run.
        #expect(!shared.join())
        #expect(!shared.beginExclusive())
        shared.leave()
        let early = ran.value.load(ordering: .relaxed)
        #expect(early == 0 && shared.isHeld)
        shared.leave()
        // The last job out ran it, still holding the entry, then let the entry go.
        let runs = ran.value.load(ordering: .relaxed)
        let held = heldWhileRunning.value.load(ordering: .relaxed), busy = busyWhileRunning.value.load(ordering: .relaxed)
        #expect(runs == 1)
        #expect(held && busy)
        #expect(!shared.isHeld && !shared.join())
        let again = try #require(try store.tryLockWriter(key: key))
        again.release()
    }

    /// A handed-over drop that fails (the disk) is the last job's to report, and the entry is let
    /// go all the same: its claims stay, and the next completion finds the mismatch again.
    @Test func aHandedOverDropThatFailsIsReturnedToTheLastJobOut() throws {
        struct DiskFailed: Error {}
        let cache = try TestCache()
        let (shared, key) = try Self.shared(cache, jobs: 2)
        #expect(try !shared.dropAlone { throw DiskFailed() })
        #expect(shared.leave() == nil)
        let failure = shared.leave()
        #expect(failure is DiskFailed)
        #expect(!shared.isHeld)
        let again = try #require(try cache.store.tryLockWriter(key: key))
        again.release()
    }
}
