import Dispatch
import Foundation
import Synchronization
import Testing
@testable import VCacheCore

/// Loop confinement is checked at run time, not only promised in a comment.
@Suite struct LoopThreadTests {
    /// Whether `loop` counts the calling thread as its own, asked from a new thread.
    static func isCurrentElsewhere(_ loop: LoopThread) -> Bool {
        let seen = Locked<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            seen.withLock { $0 = loop.isCurrent }
            done.signal()
        }
        done.wait()
        return seen.withLock { $0 } ?? true
    }

    @Test func theFirstThreadToUseALoopOwnsItForGood() {
        let loop = LoopThread()
        #expect(loop.isCurrent)
        #expect(!Self.isCurrentElsewhere(loop))
        #expect(loop.isCurrent)
    }

    @Test func aLoopNobodyUsedYetGoesToWhoeverComesFirst() {
        let loop = LoopThread()
        #expect(Self.isCurrentElsewhere(loop))
        #expect(!loop.isCurrent)
    }

    @Test func aLoopBoundValueOpensOnItsLoop() {
        let loop = LoopThread()
        var bound = LoopBound([1, 2], loop: loop)
        bound.value.append(3)
        #expect(bound.value == [1, 2, 3])
    }

    @Test func aLoopBoundValueOpenedOnAnotherThreadTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = LoopThread()
            let bound = LoopBound(7, loop: loop)
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                _ = bound.value
                done.signal()
            }
            done.wait()
        }
    }

    @Test func aFetcherUsedFromAnotherThreadTraps() async {
        await #expect(processExitsWith: .failure) {
            let fetcher = Fetcher()
            fetcher.after(0) {}
            nonisolated(unsafe) let shared = fetcher
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                shared.after(0) {}
                done.signal()
            }
            done.wait()
        }
    }
}
