import Foundation

/// An entry's writer lock, held by this process for several storing jobs at once: `serve` keeps
/// the spans two players read far apart, each fetched by its own job, instead of streaming one of
/// them unstored. Jobs join while the lock is held, each writing its own span of `data` and
/// committing its own ranges (commits merge). Only a job that is alone may drop the entry's
/// version (`beginExclusive`): a drop replaces `data`, and another job still writing the old file
/// would then claim bytes the new one lacks. No job joins while a drop runs. The lock is released
/// when the last job leaves.
public final class SharedWriterLock: @unchecked Sendable {
    // @unchecked: every field is guarded by `mutex`.
    private let mutex = NSLock()
    private var lock: EntryLock?
    private var jobs = 0
    private var exclusive = false

    public init(_ lock: EntryLock) { self.lock = lock }

    /// A new job writes under this lock; false when the lock is gone or a drop runs.
    public func join() -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard lock != nil, !exclusive else { return false }
        jobs += 1
        return true
    }

    /// The lock is held by this process now (some job still writes under it).
    public var isHeld: Bool {
        mutex.lock()
        defer { mutex.unlock() }
        return lock != nil
    }

    /// A job ended; the last one releases the lock.
    public func leave() {
        mutex.lock()
        defer { mutex.unlock() }
        jobs -= 1
        if jobs <= 0, let l = lock {
            l.release()
            lock = nil
        }
    }

    /// The calling job may drop the entry's version: it is the only one writing.
    public func beginExclusive() -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard jobs == 1, !exclusive else { return false }
        exclusive = true
        return true
    }

    public func endExclusive() {
        mutex.lock()
        exclusive = false
        mutex.unlock()
    }
}
