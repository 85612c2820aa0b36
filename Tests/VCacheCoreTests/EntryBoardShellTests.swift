import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// The board's shell runs a job start's effects (the flock, eviction for room, `data`, the
/// thread) outside its lock: while one player's job start is held there, other players of the
/// same entry open it, get a reader and read what is cached. (Before issue 34 the start ran under
/// the board's lock, and every other player of the entry waited behind its eviction.)
@Suite struct EntryBoardShellTests {
    // No `.timeLimit`: Swift Testing starts its clock when the test is scheduled, not when its
    // body gets one of the pool's threads, so in the full suite (the pool busy with end-to-end
    // tests) a short limit failed this test before it had run. Every wait below is bounded.
    @Test
    func aJobStartHeldInItsEffectsHoldsNoOtherPlayerOfTheEntry() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let body = TestBytes.make(8_000_000, seed: 34)
        origin.setResource("/s.mp4", .init(body: body, etag: "\"s\""))
        let url = origin.url("/s.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }
        let video = try readThrough.open(url)  // stores the head: [0, 64 KiB) is cached

        let reached = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        TestSeam.setHook("serve-job-start-effects", key: video.key) { _ in
            reached.signal()
            _ = go.wait(timeout: .now() + 60)
        }
        defer { TestSeam.setHook("serve-job-start-effects", key: video.key, nil) }
        // A player far into the video needs a job: its start is held in its effects.
        let far = Box<Data>()
        let farDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let r = readThrough.reader(video, range: ByteRange(6_000_000, 6_500_000))
            far.value = ServeTrustRaceTests.drain(r)
            r.finished(completed: true)
            farDone.signal()
        }
        #expect(reached.wait(timeout: .now() + 30) == .success, "the job start never reached its effects")

        // Meanwhile another player opens the video and reads its cached head: the board is free.
        let near = Box<Data>()
        let nearDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            guard let v = try? readThrough.open(url) else {
                nearDone.signal()
                return
            }
            let r = readThrough.reader(v, range: ByteRange(0, 65_536))
            near.value = ServeTrustRaceTests.drain(r)
            r.finished(completed: true)
            nearDone.signal()
        }
        let nearInTime = nearDone.wait(timeout: .now() + 20) == .success
        go.signal()
        #expect(nearInTime, "a player of the entry waited behind another's job start")
        #expect(near.value == body[0..<65_536])
        #expect(farDone.wait(timeout: .now() + 60) == .success)
        #expect(far.value == body[6_000_000..<6_500_000])
    }
}
