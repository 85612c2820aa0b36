import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// serve's record of a cached entry read from the catalog a moment ago (`KnownEntries`, issue 36):
/// the requests that follow read no catalog, and the record is about one file only.
@Suite struct KnownEntriesTests {
    /// A cached video opened again at once is known: its second open reads no catalog. Shown by
    /// changing the catalog's row in between: the second open still sees the row as it was (unless
    /// more than the record's lifetime passed, on a machine that slow).
    @Test
    func aCachedVideoOpenedAgainAtOnceReadsNoCatalog() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let v = TestBytes.make(1_000_000, seed: 3601)
        origin.setResource("/k.mp4", .init(body: v, etag: "\"k1\""))
        let url = origin.url("/k.mp4")
        #expect(cache.prefetch(url).error == nil)
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        let start = ContinuousClock.now
        let first = try readThrough.open(url)
        #expect(first.fromCatalog)
        let type = first.contentType
        #expect(readThrough.known.count == 1)
        _ = try cache.store.catalog.database.write { c in
            try c.run("UPDATE entries SET content_type = 'video/x-changed' WHERE key = ?", .key(first.key))
        }
        let second = try readThrough.open(url)
        let elapsed = ContinuousClock.now - start
        if elapsed < KnownEntries.lifetime {
            #expect(second.contentType == type, "the second open read the catalog again")
        }
        // What it sends is the cached bytes, from the file it holds.
        let reader = readThrough.reader(second, range: ByteRange(0, 1_000_000))
        #expect(reader.isCached)
        let sent = ServeTrustRaceTests.drain(reader)
        reader.finished(completed: true)
        #expect(sent == v)
    }

    /// A record holds its file open, so the file system cannot give its inode number to a new
    /// `data` (ext4 gives a freed one out again at once): a new file made for the entry after its
    /// version was dropped is never taken for the recorded one, whose claims covered the whole
    /// video, and a reader of the new file's hole gets the origin's bytes, not zeros.
    @Test(.requires(.reusesInodeNumbers))
    func aKnownEntryIsNeverTakenForANewFileOfTheEntry() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let v = TestBytes.make(1_000_000, seed: 3602)
        origin.setResource("/n.mp4", .init(body: v, etag: "\"n1\""))
        let url = origin.url("/n.mp4")
        #expect(cache.prefetch(url).error == nil)
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        let (key, old, version): (CacheKey, FileID, Validators) = try {
            let opened = try readThrough.open(url)
            return (opened.key, try #require(opened.snapshot.fileID), opened.validators)
        }()  // the video is released here, and the reader's own hold on the file with it
        #expect(readThrough.known.count == 1)
        // The version dropped (verify --fix, a start-over) and [500 kB, 1 MB) stored again in a
        // new `data`, whose first bytes are a hole; the free inode numbers below the old file's
        // are taken first, so that without the record's hold it would get the old number.
        let fillers = ServeTrustRaceTests.takeFreeInodes(below: old, in: cache.store.entryDirectory(key))
        let lock = try #require(try cache.store.tryLockWriter(key: key))
        try cache.store.dropVersion(key: key, validators: version).close()
        lock.release()
        for f in fillers { unlink(f) }
        #expect(cache.prefetch(url, [.span(first: 500_000, last: 999_999)]).error == nil)
        #expect(FileSystem.identity(cache.store.dataPath(key)) != old, "the new data got the recorded file's inode number")

        let reader = readThrough.reader(try readThrough.open(url), range: ByteRange(0, 65_536))
        let sent = ServeTrustRaceTests.drain(reader)
        reader.finished(completed: sent.count == 65_536)
        #expect(sent.count == 65_536, "\(reader.failure ?? "")")
        let wrong = ServeTrustRaceTests.firstWrong(sent, v, from: 0)
        #expect(wrong == nil, "the head sent other bytes (a hole's zeros?) from offset \(wrong ?? 0) on")
    }
}
