#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An operating-system error: the operation, the path it was on, and errno.
/// Renders as `cannot write '/x/data': No space left on device`.
public struct SystemError: Error, Equatable, CustomStringConvertible, Sendable {
    public var operation: String
    public var path: String
    public var errno: Int32

    public init(_ operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }

    /// EFBIG: a write or length past the largest file allowed (the file system's, or `ulimit -f`).
    public var isPastFileLimit: Bool { errno == EFBIG }

    public var description: String {
        "cannot \(operation) '\(path)': \(String(cString: strerror(errno)))"
    }
}
