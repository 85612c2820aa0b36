#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A thread of its own for `body` (`pthread_create`, detached), named for `ps -L` and debuggers
/// when `name` is given: Foundation's `Thread.detachNewThread` without Foundation.
package enum DetachedThread {
    /// What the new thread runs; passed to it retained, released by it.
    fileprivate final class Start: Sendable {
        let body: @Sendable () -> Void
        let name: String?
        init(_ body: @escaping @Sendable () -> Void, name: String?) { self.body = body; self.name = name }

        func run() {
            if let name { DetachedThread.setName(String(decoding: name.utf8.prefix(15), as: UTF8.self)) }
            body()
        }
    }

    /// `pthread_setname_np` (glibc's Swift module does not declare it: it is `_GNU_SOURCE`).
    fileprivate static func setName(_ name: String) {
        #if canImport(Glibc)
        typealias SetName = @convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_setname_np") else { return }
        _ = unsafeBitCast(symbol, to: SetName.self)(pthread_self(), name)
        #else
        _ = pthread_setname_np(name)
        #endif
    }

    package static func start(name: String? = nil, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(body, name: name)).toOpaque()
        #if canImport(Glibc)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let rc = pthread_create(&thread, nil, detachedThreadEntry, start)
        precondition(rc == 0, "pthread_create failed")
        #if canImport(Glibc)
        _ = pthread_detach(thread)
        #else
        if let thread { _ = pthread_detach(thread) }
        #endif
    }
}

#if canImport(Glibc)
private func detachedThreadEntry(_ raw: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    if let raw { Unmanaged<DetachedThread.Start>.fromOpaque(raw).takeRetainedValue().run() }
    return nil
}
#else
private func detachedThreadEntry(_ raw: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
    Unmanaged<DetachedThread.Start>.fromOpaque(raw).takeRetainedValue().run()
    return nil
}
#endif
