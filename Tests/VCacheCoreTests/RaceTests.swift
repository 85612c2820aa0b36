import Foundation
import Synchronization
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// Races made exact with pause points (TestSeam), not with sleeps.
@Suite struct RaceTests {
    let origin: TestOrigin
    let body = TestBytes.make(2_000_000, seed: 51)

    init() throws {
        origin = try TestOrigin()
        origin.setResource("/r.mp4", .init(body: body, etag: "\"r1\""))
    }

    func key(_ url: String) -> CacheKey { CacheKeyRules().key(for: URL(string: url)!) }

    /// verify lists the entry partial; before it locks it, a prefetch completes it. The entry is
    /// judged as it is under the lock, so nothing is "fixed" and the completion stays.
    @Test func verifyJudgesTheEntryAsItIsOnceLockedNotAsListed() throws {
        let cache = try TestCache()
        let url = origin.url("/r.mp4"), k = key(url)
        #expect(cache.prefetch(url, [.head(512_000)]).error == nil)
        let store = cache.store
        TestSeam.setHook("verify-before-lock", key: k) { listed in
            guard listed == k else { return }
            let p = Prefetcher(store: store, options: TestCache.fastOptions())
            _ = p.run([PrefetchItem(url: url)])
        }
        defer { TestSeam.setHook("verify-before-lock", key: k, nil) }
        var o = Verifier.Options()
        o.fix = true
        // A child spawned meanwhile by another test would hold a copy of the prefetch's lock.
        let reports = try Child.withoutSpawning { try Verifier(store: store).verify(keys: [k], options: o) }
        #expect(reports.map(\.state) == [.ok], "\(reports.map(\.problems))")
        let entry = try #require(try store.catalog.entry(key: k))
        #expect(entry.isComplete)
        #expect(entry.sha256 == TestBytes.sha256(body))
    }

    /// verify --origin --fix asks about v1; before it locks the entry a prefetch replaces it with
    /// v2. The stale answer must not make --fix drop the fresh copy.
    @Test func aStaleOriginAnswerDoesNotDropAFreshCopy() throws {
        let cache = try TestCache()
        let url = origin.url("/r.mp4"), k = key(url)
        #expect(cache.prefetch(url, [.head(500_000)]).error == nil)
        let v2 = TestBytes.make(2_000_000, seed: 52)
        origin.setResource("/r.mp4", .init(body: v2, etag: "\"r2\""))
        let store = cache.store
        TestSeam.setHook("verify-before-lock", key: k) { listed in
            guard listed == k else { return }
            _ = Prefetcher(store: store, options: TestCache.fastOptions()).run([PrefetchItem(url: url)])
        }
        defer { TestSeam.setHook("verify-before-lock", key: k, nil) }
        var o = Verifier.Options()
        o.fix = true
        o.checkOrigin = true
        // A child spawned meanwhile by another test would hold a copy of the prefetch's lock.
        let reports = try Child.withoutSpawning { try Verifier(store: store).verify(keys: [k], options: o) }
        #expect(reports.map(\.state) == [.ok], "\(reports.map(\.problems))")
        let entry = try #require(try store.catalog.entry(key: k))
        #expect(entry.etag == "\"r2\"")
        #expect(entry.sha256 == TestBytes.sha256(v2))
    }

    /// Dropping a changed version (catalog, unlink, new file) happens off the fetch loop while its
    /// transfer is held: another download of the same run keeps streaming meanwhile and is not
    /// dropped as stalled, however long the drop takes.
    @Test func droppingAVersionDoesNotStallTheOtherDownloadsOfTheRun() throws {
        let cache = try TestCache()
        let changing = origin.url("/r.mp4"), k = key(changing)
        #expect(cache.prefetch(changing, [.head(500_000)]).error == nil)
        let v2 = TestBytes.make(2_000_000, seed: 53)
        origin.setResource("/r.mp4", .init(body: v2, etag: "\"r2\""))
        let other = TestBytes.make(3 << 20, seed: 54)
        origin.setResource("/other.mp4", .init(body: other, etag: "\"o\""))
        origin.throttle("/other.mp4", to: 2 << 20)
        let otherURL = origin.url("/other.mp4")
        let otherData = cache.store.dataPath(key(otherURL))
        // The drop blocks until the other download has written 2 MiB into its `data`: that
        // happens only if the drop does not hold the other transfer up (no stall timeout to race:
        // the event is the bytes written, however slowly the machine runs).
        let progressed = Atomic<Bool>(false)
        TestSeam.setHook("drop-after-invalidate", key: k) { dropping in
            guard dropping == k else { return }
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if let st = FileSystem.status(otherData), Int(st.st_blocks) * 512 >= 2 << 20 {
                    progressed.store(true, ordering: .relaxed)
                    return
                }
                usleep(5_000)  // polling the file: no event says a write landed
            }
        }
        defer { TestSeam.setHook("drop-after-invalidate", key: k, nil) }
        var options = TestCache.fastOptions()
        options.retries = 0
        let results = Prefetcher(store: cache.store, options: options)
            .run([PrefetchItem(url: otherURL), PrefetchItem(url: changing)])
        let sawProgress = progressed.load(ordering: .relaxed)
        #expect(sawProgress, "the other download did not write 2 MiB while the drop was held")
        #expect(results.map(\.error) == [nil, nil])
        #expect(origin.servedBytes("/other.mp4") == other.count)  // never restarted after a stall
        #expect(try cache.inspector.entry(otherURL)?.sha256 == TestBytes.sha256(other))
        #expect(try cache.inspector.entry(changing)?.sha256 == TestBytes.sha256(v2))
    }

    /// export --link hashes through its descriptor, but link() works by path: when `data` is
    /// replaced in between, the linked file is not the one hashed, and nothing is published.
    @Test func exportLinkRefusesAFileReplacedAfterItWasHashed() throws {
        let cache = try TestCache()
        let url = origin.url("/r.mp4"), k = key(url)
        #expect(cache.prefetch(url).complete)
        let path = cache.store.dataPath(k)
        TestSeam.setHook("export-link-after-hash", key: k) { exporting in
            guard exporting == k else { return }
            unlink(path)
            _ = FileManager.default.createFile(atPath: path, contents: TestBytes.make(2_000_000, seed: 99))
        }
        defer { TestSeam.setHook("export-link-after-hash", key: k, nil) }
        let out = cache.dir.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        #expect(throws: Exporter.ExportError.changedWhileExporting(url: url)) {
            try Exporter(store: cache.store).export(key: k, to: out + "/r.mp4", force: false, link: true)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }
}
