import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The lock every shared state of vcache sits behind.
//
// In every build but one it is Synchronization's `Mutex` itself (a type alias: no cost). The one
// exception is `make sanitize-thread`, which compiles with `-DVCACHE_TSAN`: there it is a pthread
// mutex. ThreadSanitizer learns about locking by intercepting `pthread_mutex_lock`; a `Mutex`
// waits with futex system calls inside an uninstrumented library, so under it TSan sees no order
// between two holders and reports every guarded access as a race (Docs/reliability.md,
// Sanitizers). With the pthread mutex those false reports go and the real ones stay visible.

#if VCACHE_TSAN
public struct Locked<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    public init(_ initial: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        value = .allocate(capacity: 1)
        value.initialize(to: initial)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        _ = pthread_mutex_destroy(mutex)  // a destroy can only fail on a held mutex; none is held at deinit
        mutex.deallocate()
    }

    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        precondition(pthread_mutex_lock(mutex) == 0, "pthread_mutex_lock failed")
        defer { precondition(pthread_mutex_unlock(mutex) == 0, "pthread_mutex_unlock failed") }
        return try body(&value.pointee)
    }
}
#else
public typealias Locked<Value: ~Copyable> = Mutex<Value>
#endif
