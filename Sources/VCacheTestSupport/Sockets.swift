#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The few socket constants that differ between Glibc and Darwin.
enum Sockets {
    #if canImport(Glibc)
    static let stream = Int32(SOCK_STREAM.rawValue)
    static let noSignal = Int32(MSG_NOSIGNAL)
    #else
    static let stream = SOCK_STREAM
    static let noSignal: Int32 = 0  // Darwin: SIGPIPE is ignored per socket with SO_NOSIGPIPE
    #endif

    /// send(2) without SIGPIPE.
    static func send(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int {
        #if canImport(Glibc)
        return Glibc.send(fd, p, n, noSignal)
        #else
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        return Darwin.send(fd, p, n, 0)
        #endif
    }

    /// The path of the running executable.
    static var executablePath: String {
        #if os(Linux)
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        #else
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
        #endif
    }
}
