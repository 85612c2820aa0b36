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

    /// Found by AddressSanitizer (make sanitize-address): removeTree copied each dirent's whole
    /// 256-byte name field, reading past glibc's directory buffer after a short last name. Names
    /// of every length, nested, go; under ASan (CI runs this suite so) the read is checked.
    @Test func removeTreeRemovesNamesOfEveryLength() throws {
        let root = dir.file("tree")
        var folder = root
        for depth in 0..<3 {
            folder += "/d\(depth)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for length in [1, 2, 7, 8, 9, 31, 100, 200, 255] {
                try Data([UInt8(length)]).write(to: URL(fileURLWithPath: folder + "/" + String(repeating: "n", count: length)))
            }
        }
        FileSystem.removeTree(root)
        #expect(!FileManager.default.fileExists(atPath: root))
    }
}
