#if canImport(Glibc)
import Glibc
import Testing
@testable import vcache

/// `serve` refuses libmicrohttpd's TCP_CORK (NoCork.swift says why): in the vcache process a
/// setsockopt(TCP_CORK) succeeds and leaves the socket uncorked, while every other option still
/// reaches the C library.
@Suite struct SocketOptionTests {
    @Test func corkIsRefusedAndOtherOptionsStillApply() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var one: Int32 = 1
        var value: Int32 = -1
        var size = socklen_t(MemoryLayout<Int32>.size)
        #expect(setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &one, size) == 0)
        #expect(getsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, &size) == 0)
        #expect(value == 0)
        #expect(setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, size) == 0)
        #expect(getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &size) == 0)
        #expect(value == 1)
        // Errors still come from the C library.
        #expect(setsockopt(-1, Int32(IPPROTO_TCP), TCP_NODELAY, &one, size) == -1)
        #expect(errno == EBADF)
    }
}
#endif
