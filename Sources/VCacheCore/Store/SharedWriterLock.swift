import Foundation

/// An entry's writer lock, held by this process for several storing jobs at once: `serve` keeps
/// the spans two players read far apart, each fetched by its own job, instead of streaming one of
/// them unstored. Jobs join while the lock is held, each writing its own span of `data` and
/// committing its own ranges (commits merge). A drop replaces `data`: a job still writing the old
/// file would then claim bytes the new one lacks. So a job drops only when it is alone
/// (`beginExclusive`, `dropAlone`), and no job joins while a drop runs; a drop that cannot wait
/// for the job to run it (a completion that does not hash as the first) is handed to the last job
/// to leave, and no job joins from then on. The lock is released when the last job leaves.
public final class SharedWriterLock: @unchecked Sendable {
    // @unchecked: every field is guarded by `mutex`.
    private let mutex = NSLock()
    private var lock: EntryLock?
    private var jobs = 0
    private var exclusive = false
    /// A drop handed over by a job that was not alone: run by the last job to leave.
    private var pendingDrop: (@Sendable () throws -> Void)?

    public init(_ lock: EntryLock) { self.lock = lock }

    /// A new job writes under this lock; false when the lock is gone or a drop runs or waits.
    public func join() -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard lock != nil, !exclusive, pendingDrop == nil else { return false }
        jobs += 1
        return true
    }

    /// The lock is held by this process now (some job still writes under it).
    public var isHeld: Bool {
        mutex.lock()
        defer { mutex.unlock() }
        return lock != nil
    }

    /// A job ended; the last one runs a drop handed over (no job joins meanwhile), then releases
    /// the lock. The drop's error is returned for the caller to report: the claims stay as they
    /// were, and the next completion finds the same mismatch and drops again.
    @discardableResult
    public func leave() -> Error? {
        mutex.lock()
        jobs -= 1
        guard jobs <= 0, let l = lock else {
            mutex.unlock()
            return nil
        }
        let drop = pendingDrop
        pendingDrop = nil
        exclusive = drop != nil
        mutex.unlock()
        var failure: Error?
        do { try drop?() } catch { failure = error }
        mutex.lock()
        l.release()
        lock = nil
        exclusive = false
        mutex.unlock()
        return failure
    }

    /// The calling job may drop the entry's version: it is the only one writing.
    public func beginExclusive() -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard jobs == 1, !exclusive, pendingDrop == nil else { return false }
        exclusive = true
        return true
    }

    public func endExclusive() {
        mutex.lock()
        exclusive = false
        mutex.unlock()
    }

    /// Runs `drop` now when the calling job is alone (no job joins while it runs; its error is
    /// thrown); otherwise hands it to the last job to leave. True when it ran now.
    @discardableResult
    public func dropAlone(_ drop: @escaping @Sendable () throws -> Void) throws -> Bool {
        guard beginExclusive() else {
            mutex.lock()
            if pendingDrop == nil { pendingDrop = drop }
            mutex.unlock()
            return false
        }
        defer { endExclusive() }
        try drop()
        return true
    }
}
