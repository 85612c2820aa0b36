#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The few socket constants that differ between Glibc and Darwin.
public enum Sockets {
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

    /// A TCP connection to 127.0.0.1:`port`, or -1.
    public static func connectLoopback(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, stream, 0)
        guard fd >= 0 else { return -1 }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let ok = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        if ok != 0 { close(fd); return -1 }
        return fd
    }

    /// Sends `text` on `fd` (errors ignored: the peer may have closed it).
    public static func say(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count) }
    }

    /// Sends `text` to 127.0.0.1:`port` on a new connection and returns everything the server
    /// sends back until it closes (a raw request, for heads no client library would send).
    public static func exchange(_ port: Int, _ text: String) -> Data {
        let fd = connectLoopback(port)
        guard fd >= 0 else { return Data() }
        defer { close(fd) }
        say(fd, text)
        var received = Data()
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { return received }
            received.append(contentsOf: buf[0..<n])
        }
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

/// A port taken and never listened on: connections to it are refused, and no other test's
/// server can bind it meanwhile (a stopped origin's port, reused by a parallel test, answered
/// 404 where an offline origin was meant). Released when the value is closed.
public final class RefusingPort: @unchecked Sendable {
    private let fd: Int32
    public init?(_ port: Int) {
        let fd = socket(AF_INET, Sockets.stream, 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let ok = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard ok == 0 else { close(fd); return nil }
        self.fd = fd
    }
    deinit { close(fd) }
}

/// A `NOTIFY_SOCKET` as systemd makes one (an AF_UNIX datagram socket): what a `Type=notify`
/// service sends, one message per `receive()`.
public final class NotifySocket: @unchecked Sendable {
    // Used from one test thread.
    public let path: String
    private let fd: Int32

    public init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let ok = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard ok == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        chmod(path, 0o777)  // a service run as another user may send too
        var wait = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next message, or nil after 20 s without one.
    public func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
