#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

@Suite struct RawFileTests {
    let dir = TempDirectory("vcache-rawfile")

    /// A second close must not close whatever file or socket got the same number meanwhile
    /// (with -j N that could be another entry's data), and a closed file refuses I/O.
    @Test func aDescriptorIsClosedExactlyOnce() throws {
        let a = try RawFile.open(dir.file("a"), flags: O_RDWR | O_CREAT)
        a.close()
        // Usually the lowest free number, the one `a` had: a second close of that number would close `b`.
        let b = try RawFile.open(dir.file("b"), flags: O_RDWR | O_CREAT)
        a.close()
        #expect(fcntl(b.fd, F_GETFD) != -1)
        try Data("still open".utf8).withUnsafeBytes { try b.write($0, toAbsoluteOffset: 0) }
        #expect(throws: SystemError("use", path: dir.file("a"), errno: EBADF)) {
            try Data("x".utf8).withUnsafeBytes { try a.write($0, toAbsoluteOffset: 0) }
        }
        #expect(try String(contentsOfFile: dir.file("b"), encoding: .utf8) == "still open")
        #expect(a.fd == -1)
    }
}
