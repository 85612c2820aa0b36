#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Tells systemd how a `Type=notify` service is doing (sd_notify(3) without libsystemd): one
/// datagram to the socket named by `$NOTIFY_SOCKET` ("@name" is in the abstract namespace).
/// Nothing happens when the variable is not set (not run by systemd).
enum ServiceManager {
    /// `READY=1` once listening, `RELOADING=1` + `MONOTONIC_USEC` around a reload, `STOPPING=1`,
    /// `STATUS=...` for `systemctl status`.
    static func notify(_ state: String) {
        guard let name = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !name.isEmpty,
              name.hasPrefix("/") || name.hasPrefix("@") else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var path = Array(name.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard path.count < capacity else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        let bytes = Array(state.utf8)
        _ = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
            }
        }
    }

    /// CLOCK_MONOTONIC in microseconds, as `RELOADING=1` wants it beside (systemd 253+).
    static var monotonicMicroseconds: UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}
