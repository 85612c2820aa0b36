import Foundation
import Synchronization
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// A video whole again after `verify --fix` that does not hash as at its first completion has
/// every claim dropped (`CacheStore.dropVersion`: rows, then a new `data`). In serve the job
/// that finds it shares the entry's writer lock with the process's other jobs: none of them may
/// write the old file while the drop runs, or their claims would name bytes the new `data` lacks
/// (Docs/reliability.md, "Four processes"). Pause points make the interleaving exact.
@Suite struct ServeCompletionDropTests {
    static let chunk = Int(ChunkStates.size)
    static let length = 8_000_000

    /// One player fills the chunk `verify --fix` dropped; its job, alone on the entry, finds the
    /// video does not hash as it did and drops it. Between the drop's rows and its new `data`,
    /// the player's next request (a chunk this process did not write) needs a job.
    @Test
    func noJobWritesTheOldFileWhileAMismatchedCompletionDropsIt() throws {
        try playAcrossTheDrop(players: 1)
    }

    /// Two players read far apart, each filling a dropped chunk with its own job sharing the
    /// entry's lock; the job that completes the video finds the mismatch while the other has not
    /// let go of the lock yet; then a request needs a job during the drop, as above.
    @Test
    func noJobWritesTheOldFileWhenTheMismatchIsFoundAmongOtherJobs() throws {
        try playAcrossTheDrop(players: 2)
    }

    func playAcrossTheDrop(players: Int) throws {
        let chunk = Self.chunk
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(Self.length, seed: 81)
        origin.setResource("/m.mp4", .init(body: a, etag: "\"m\""))
        let url = origin.url("/m.mp4")
        #expect(cache.prefetch(url).complete)
        let key = try #require(try cache.inspector.entry(url)).key

        // A damaged byte in chunk 1 (and 5): verify --fix drops those chunks and keeps the digest's states.
        let holes = Array([1, 5].prefix(players))
        let fh = try #require(FileHandle(forUpdatingAtPath: cache.store.dataPath(key)))
        for h in holes {
            try fh.seek(toOffset: UInt64(h * chunk + 5))
            try fh.write(contentsOf: Data([a[h * chunk + 5] ^ 0x01]))
        }
        try fh.close()
        var fix = Verifier.Options()
        fix.fix = true
        #expect(try Verifier(store: cache.store).verify(keys: [key], options: fix).map(\.state) == [.fixed])
        #expect(try cache.inspector.entry(url)?.ranges.count == Int64(Self.length - holes.count * chunk))
        // The origin's chunk 1 is other bytes now, under the same ETag: whole again, the video
        // does not hash as it did. (Everywhere else its bytes are the cached ones: the old file,
        // whole again, holds exactly the origin's bytes, so every body can be checked against them.)
        var a2 = a
        a2[chunk + 100_000] ^= 0xff
        origin.setResource("/m.mp4", .init(body: a2, etag: "\"m\""))

        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        // Between the drop's rows and its new `data`: a request for chunk 7, which no job of this
        // process wrote (the catalog claims nothing now, and `data` is still the old file).
        let next = ByteRange(Int64(7 * chunk), Int64(Self.length))
        // Its player reads on a thread of its own (a reader stays on one thread); the drop goes
        // on once it has its first bytes.
        let dropped = Flag(), begun = DispatchSemaphore(value: 0), ended = DispatchSemaphore(value: 0)
        let third = Box<RangeReader>(), nextSent = Box<Data>()
        TestSeam.setHook("drop-all-after-invalidate", key: key) { k in
            guard k == key, !dropped.value.exchange(true, ordering: .relaxed) else { return }
            Thread.detachNewThread {
                defer { ended.signal() }
                guard let video = try? readThrough.open(url) else {
                    begun.signal()
                    return
                }
                let r = readThrough.reader(video, range: next)
                third.value = r
                var sent = Data()
                var buffer = [UInt8](repeating: 0, count: 64 << 10)
                while let n = buffer.withUnsafeMutableBytes({ r.read(at: Int64(sent.count), into: $0) }), n > 0 {
                    sent.append(contentsOf: buffer[0..<n])
                    if sent.count == n { begun.signal() }
                }
                if sent.isEmpty { begun.signal() }
                r.finished(completed: sent.count == Int(next.count))
                nextSent.value = sent
            }
            _ = begun.wait(timeout: .now() + 60)
        }
        defer { TestSeam.setHook("drop-all-after-invalidate", key: key, nil) }
        if players > 1 {
            // The first job to end keeps the entry's lock until the second has ended too: the
            // mismatch is found by a job that is not alone on the entry.
            let arrivals = Counted(), second = DispatchSemaphore(value: 0)
            TestSeam.setHook("serve-job-before-leave", key: key) { k in
                guard k == key else { return }
                if arrivals.value.add(1, ordering: .relaxed).newValue == 1 {
                    _ = second.wait(timeout: .now() + 60)
                } else {
                    second.signal()
                }
            }
        }
        defer { TestSeam.setHook("serve-job-before-leave", key: key, nil) }

        // Each player reads a dropped chunk: its job fetches it (the origin's bytes now).
        let spans = holes.map { ByteRange(Int64($0 * chunk), Int64(($0 + 1) * chunk)) }
        let readers = try spans.map { readThrough.reader(try readThrough.open(url), range: $0) }
        let bodies = Box<[Int: Data]>()
        bodies.value = [:]
        let lock = NSLock(), group = DispatchGroup()
        for (i, reader) in readers.enumerated() {
            DispatchQueue.global().async(group: group) {
                let sent = ServeTrustRaceTests.drain(reader)
                reader.finished(completed: sent.count == Int(reader.range.count))
                lock.lock(); bodies.value?[i] = sent; lock.unlock()
            }
        }
        #expect(group.wait(timeout: .now() + 120) == .success)
        #expect(ended.wait(timeout: .now() + 120) == .success, "the completion did not drop the video")
        readThrough.shutdown()  // every job ended (the last checkpoints committed)

        // No body has a byte other than the origin's (a cut is allowed; none is expected).
        for (i, span) in spans.enumerated() {
            let sent = bodies.value?[i] ?? Data()
            let wrong = ServeTrustRaceTests.firstWrong(sent, a2, from: Int(span.lowerBound))
            #expect(wrong == nil, "player \(i + 1) was sent other bytes from offset \(wrong ?? 0) on")
            #expect(sent.count == Int(span.count), "player \(i + 1) got \(sent.count) bytes")
        }
        let wrongNext = ServeTrustRaceTests.firstWrong(nextSent.value ?? Data(), a2, from: Int(next.lowerBound))
        #expect(wrongNext == nil, "the request during the drop was sent other bytes from offset \(wrongNext ?? 0) on")
        #expect(nextSent.value?.count == Int(next.count), "\(third.value?.failure ?? "no reader")")
        // Every claim is of bytes the entry's `data` holds, and they are the origin's.
        let claims = try cache.inspector.verifyClaims(url, origin: a2)
        #expect(claims.mismatch == nil, "the catalog claims \(claims.mismatch.map { "\($0)" } ?? "") of a data file that does not hold it")

        // A later player gets chunk 7 (what a false claim would cut: the claim sends it to the
        // new `data`), then the whole video, byte for byte, and the entry completes with it.
        let later = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { later.shutdown() }
        let again = later.reader(try later.open(url), range: next)
        let sentAgain = ServeTrustRaceTests.drain(again)
        again.finished(completed: sentAgain.count == Int(next.count))
        #expect(sentAgain.count == Int(next.count) && ServeTrustRaceTests.firstWrong(sentAgain, a2, from: Int(next.lowerBound)) == nil,
                "a later read of chunk 7 got \(sentAgain.count) bytes (\(again.failure ?? "not cut"))")
        let whole = later.reader(try later.open(url), range: ByteRange(0, Int64(Self.length)))
        let sent = ServeTrustRaceTests.drain(whole)
        whole.finished(completed: sent.count == Self.length)
        later.shutdown()
        #expect(sent.count == Self.length && ServeTrustRaceTests.firstWrong(sent, a2, from: 0) == nil,
                "a later read got \(sent.count) bytes, wrong from \(ServeTrustRaceTests.firstWrong(sent, a2, from: 0) ?? -1)")
        #expect(try cache.inspector.verifyClaims(url, origin: a2).mismatch == nil)
        #expect(try cache.inspector.entry(url)?.sha256 == TestBytes.sha256(a2))
    }
}

/// A flag set once across threads.
final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}

/// A count across threads.
final class Counted: Sendable {
    let value = Atomic<Int>(0)
}
