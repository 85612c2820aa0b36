import Dispatch
import Foundation
import Testing
@testable import VCacheCore

/// `MonotonicCondition`: a timed wait ends when its time has passed on the monotonic clock (and
/// says so), and a signal ends it at once. (What it is for, a wall clock stepped back, cannot be
/// shown here without stepping this machine's clock.)
@Suite struct MonotonicConditionTests {
    final class Flag: @unchecked Sendable { var set = false }

    @Test func aTimedWaitEndsWhenItsTimeHasPassed() {
        let c = MonotonicCondition()
        let start = ContinuousClock.now
        c.lock()
        let signalled = c.wait(seconds: 0.2)
        c.unlock()
        #expect(!signalled)
        #expect(start.duration(to: .now) >= .milliseconds(200))
        c.lock()
        #expect(!c.wait(seconds: 0))  // a wait of nothing returns at once
        c.unlock()
    }

    @Test func aSignalEndsTheWaitAtOnce() {
        let c = MonotonicCondition()
        let flag = Flag()
        let start = ContinuousClock.now
        Thread.detachNewThread {
            c.lock()
            flag.set = true
            c.signal()
            c.unlock()
        }
        c.lock()
        while !flag.set { if !c.wait(seconds: 60) { break } }
        let set = flag.set
        c.unlock()
        #expect(set)
        #expect(start.duration(to: .now) < .seconds(60))
    }
}
