#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex and a condition variable whose timed waits count on the monotonic clock.
///
/// Foundation's `NSCondition.wait(until: Date)` counts on the wall clock (`CLOCK_REALTIME`): a
/// clock stepped back by an NTP correction made serve's one-second waits for a storing job, its
/// head-deadline watchdog and its shutdown wait last as long as the step (found by a hostile
/// review). Here a timed wait is `pthread_cond_timedwait` on a condition set to
/// `CLOCK_MONOTONIC` (Darwin: `pthread_cond_timedwait_relative_np`, relative, so no clock at all).
/// ThreadSanitizer sees it as the pthread primitives it is.
public final class MonotonicCondition: @unchecked Sendable {
    // @unchecked: the pointers never change; pthread guards what they point at.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        cond = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        #if canImport(Glibc)
        var attr = pthread_condattr_t()
        precondition(pthread_condattr_init(&attr) == 0, "pthread_condattr_init failed")
        precondition(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0, "pthread_condattr_setclock failed")
        precondition(pthread_cond_init(cond, &attr) == 0, "pthread_cond_init failed")
        _ = pthread_condattr_destroy(&attr)  // cannot fail on an initialised attribute
        #else
        precondition(pthread_cond_init(cond, nil) == 0, "pthread_cond_init failed")
        #endif
    }

    deinit {
        _ = pthread_cond_destroy(cond)  // nobody waits at deinit
        _ = pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    public func lock() { precondition(pthread_mutex_lock(mutex) == 0, "pthread_mutex_lock failed") }
    public func unlock() { precondition(pthread_mutex_unlock(mutex) == 0, "pthread_mutex_unlock failed") }
    public func signal() { _ = pthread_cond_signal(cond) }  // fails only on an invalid condition
    public func broadcast() { _ = pthread_cond_broadcast(cond) }

    /// Waits (the lock held) until signalled (or woken spuriously, as every condition may be).
    public func wait() { precondition(pthread_cond_wait(cond, mutex) == 0, "pthread_cond_wait failed") }

    /// Waits (the lock held) at most `seconds` of monotonic time; false when that time ran out.
    public func wait(seconds: Double) -> Bool {
        let ns = Int64(max(0, min(seconds, 86_400 * 365)) * 1e9)
        #if canImport(Glibc)
        var now = timespec()
        precondition(clock_gettime(CLOCK_MONOTONIC, &now) == 0, "clock_gettime failed")
        let total = Int64(now.tv_nsec) + ns % 1_000_000_000
        var deadline = timespec(tv_sec: now.tv_sec + Int(ns / 1_000_000_000 + total / 1_000_000_000), tv_nsec: Int(total % 1_000_000_000))
        let rc = pthread_cond_timedwait(cond, mutex, &deadline)
        #else
        var relative = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        let rc = pthread_cond_timedwait_relative_np(cond, mutex, &relative)
        #endif
        precondition(rc == 0 || rc == ETIMEDOUT, "pthread_cond_timedwait failed: \(rc)")
        return rc == 0
    }
}
