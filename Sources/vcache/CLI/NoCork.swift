#if canImport(Glibc)
import Glibc
#endif
#if os(Linux)
/// libmicrohttpd (`serve`) corks the socket (TCP_CORK) for the whole of a sendfile response and
/// uncorks it after the last chunk. Measured on Linux loopback with a cached 1 GiB file (Docs/performance.md):
/// 0.62-0.66x nginx's throughput corked, 1.0x with the cork refused; the receiving side spent five
/// times as long copying the same bytes. libmicrohttpd has no option for it, so this process's
/// `setsockopt` refuses TCP_CORK and passes everything else to the C library's. Nothing else here
/// corks (libcurl never does, vcache's own code never does). It takes effect because the
/// executable exports this symbol and a shared library's call binds to the executable's
/// definition before the C library's; on macOS (two-level namespaces) it is not compiled. It lives
/// in the executable, not in VCacheCore, so an app that links the library keeps its own
/// setsockopt.
@_cdecl("setsockopt")
public func refuseTCPCork(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: UnsafeRawPointer?, _ length: socklen_t) -> Int32 {
    if level == Int32(IPPROTO_TCP) && name == TCP_CORK { return 0 }
    return systemSetsockopt(fd, level, name, value, length)
}

/// The C library's setsockopt: the next definition after this executable's (RTLD_NEXT is -1).
private let systemSetsockopt: @convention(c) (Int32, Int32, Int32, UnsafeRawPointer?, socklen_t) -> Int32 = {
    guard let p = dlsym(UnsafeMutableRawPointer(bitPattern: -1), "setsockopt") else {
        fatalError("the C library has no setsockopt")
    }
    return unsafeBitCast(p, to: (@convention(c) (Int32, Int32, Int32, UnsafeRawPointer?, socklen_t) -> Int32).self)
}()
#endif
