import Dispatch
import Foundation
import Testing
@testable import VCacheCore

/// What `make sanitize-thread` rests on: ThreadSanitizer sees `Locked` as a lock (no report for
/// accesses it guards), and it is really watching (the control, an unguarded counter, is reported).
@Suite struct SanitizerControlTests {
    final class Unguarded: @unchecked Sendable { var count = 0 }

    /// Runs `body` on `count` threads of their own at once and waits for all of them.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            Thread.detachNewThread {
                body()
                done.signal()
            }
        }
        for _ in 0..<count { done.wait() }
    }

    /// Eight threads add to one counter under `Locked`. Under TSan a lock it cannot see would make
    /// these accesses reported races (Synchronization's `Mutex` does).
    @Test func countsUnderLockedAddUpFromEightThreads() {
        let total = Locked(0)
        Self.onThreads(8) {
            for _ in 0..<10_000 { total.withLock { $0 += 1 } }
        }
        #expect(total.withLock { $0 } == 80_000)
    }

    /// The control: the same with no lock. Run only by `make sanitize-thread`, which expects
    /// ThreadSanitizer to report it (a run that reports nothing here was not watching).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["VCACHE_TSAN_CONTROL"] == "1", "make sanitize-thread runs it (VCACHE_TSAN_CONTROL=1)"))
    func anUnguardedCounterIsReported() {
        let counter = Unguarded()
        Self.onThreads(8) {
            for _ in 0..<10_000 { counter.count += 1 }
        }
        #expect(counter.count > 0)
    }
}
