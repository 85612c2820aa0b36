import Foundation
import Synchronization
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// The serve shell (`EntryBoard` and `ReadThrough.startJob`) between an action decided under the
/// board's lock and the next event: a job start's effects run outside the lock while the server
/// stops, jobs end, other readers come. Each moment is made exact with a pause point's hook.
@Suite struct ServeShellRaceTests {
    /// `shutdown` waits for every storing job. A start admitted just before the server closed
    /// (its flock taken, `data` adopted, the job on the board, its thread not spawned yet) is one:
    /// `shutdown` must not return before it has ended (serve exits right after, flock and all).
    // No `.timeLimit` (see EntryBoardShellTests): every wait below is bounded.
    @Test
    func shutdownWaitsForAJobAdmittedButNotYetRunning() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let body = TestBytes.make(4_000_000, seed: 341)
        origin.setResource("/s.mp4", .init(body: body, etag: "\"s1\""))
        let url = origin.url("/s.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        let video = try readThrough.open(url)
        let key = video.key

        let admitted = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        let countedAtShutdown = Atomic<Int>(-1)
        let shutdownReturned = Atomic<Bool>(false), jobEndedAfterShutdown = Atomic<Bool>(false)
        TestSeam.setHook("serve-start-admitted", key: key) { _ in
            admitted.signal()
            _ = go.wait(timeout: .now() + 60)
        }
        defer { TestSeam.setHook("serve-start-admitted", key: key, nil) }
        // Boards closed (the admitted job was told to stop), about to wait for the jobs.
        TestSeam.setHook("serve-shutdown-waiting", key: cache.store.directory) { _ in
            countedAtShutdown.store(readThrough.storingJobs, ordering: .relaxed)
            go.signal()
        }
        defer { TestSeam.setHook("serve-shutdown-waiting", key: cache.store.directory, nil) }
        TestSeam.setHook("serve-job-before-leave", key: key) { _ in
            if shutdownReturned.load(ordering: .relaxed) { jobEndedAfterShutdown.store(true, ordering: .relaxed) }
        }
        defer { TestSeam.setHook("serve-job-before-leave", key: key, nil) }

        let reader = readThrough.reader(video, range: ByteRange(1_000_000, 3_000_000))
        let readerDone = DispatchSemaphore(value: 0)
        let sent = Box<Data>()
        Thread.detachNewThread {
            sent.value = ServeTrustRaceTests.drain(reader)
            reader.finished(completed: false)
            readerDone.signal()
        }
        #expect(admitted.wait(timeout: .now() + 30) == .success, "no job start")
        readThrough.shutdown(timeout: 20)
        shutdownReturned.store(true, ordering: .relaxed)
        let left = readThrough.storingJobs
        go.signal()  // in case shutdown never called the hook
        #expect(readerDone.wait(timeout: .now() + 30) == .success)

        let counted = countedAtShutdown.load(ordering: .relaxed)
        #expect(counted == 1, "shutdown began waiting with \(counted) storing jobs while a job was admitted")
        #expect(left == 0, "shutdown returned with \(left) storing jobs")
        let endedAfter = jobEndedAfterShutdown.load(ordering: .relaxed)
        #expect(!endedAfter, "the job ended after shutdown had returned")
        // Whatever went out is the origin's.
        let got = sent.value ?? Data()
        #expect(ServeTrustRaceTests.firstWrong(got, body, from: 1_000_000) == nil)
        // The flock is free again.
        let lock = try #require(try cache.store.tryLockWriter(key: key))
        lock.release()
    }
}
