#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The thread a fetch loop runs on: the first thread that uses the loop (registers work on it,
/// runs it, or checks it) becomes its thread for good. Everything the loop owns is touched on that
/// thread only, and `precondition()` checks it at run time, as swift-nio's
/// `preconditionInEventLoop()` does: one atomic load and a compare.
public final class LoopThread: Sendable {
    /// The owner's pthread identity as a number; 0 while no thread has used the loop.
    private let owner = Atomic<UInt>(0)

    public init() {}

    /// The calling thread's pthread identity (never 0 for a live thread).
    static var current: UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }

    /// The calling thread is the loop's (it becomes so when the loop has none yet).
    public var isCurrent: Bool {
        let me = Self.current
        let seen = owner.load(ordering: .relaxed)
        if seen == me { return true }
        guard seen == 0 else { return false }
        let (bound, now) = owner.compareExchange(expected: 0, desired: me, ordering: .relaxed)
        return bound || now == me
    }

    /// Traps unless called on the loop's thread: loop-owned state touched from another thread is a
    /// data race, found here rather than as a corrupt range set later.
    public func precondition(file: StaticString = #fileID, line: UInt = #line) {
        Swift.precondition(isCurrent, "loop-owned state used off its fetch loop's thread", file: file, line: line)
    }
}
