/// One part of a video the user asked for, before its length is known.
public enum RangeRequest: Equatable, Sendable, CustomStringConvertible {
    /// The whole video.
    case whole
    /// The first N bytes (`--bytes N`).
    case head(Int64)
    /// `A-B` inclusive, as in HTTP; `A-` when `last` is nil.
    case span(first: Int64, last: Int64?)
    /// The last N bytes (`-N`).
    case suffix(Int64)

    /// Parses the `--range` forms `A-B`, `A-`, `-N`.
    public init?(httpSpec text: String) {
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { return nil }
        if parts[0].isEmpty {
            guard let n = Int64(parts[1]), n > 0 else { return nil }
            self = .suffix(n)
            return
        }
        guard let a = Int64(parts[0]), a >= 0 else { return nil }
        if parts[1].isEmpty {
            self = .span(first: a, last: nil)
            return
        }
        guard let b = Int64(parts[1]), b >= a else { return nil }
        self = .span(first: a, last: b)
    }

    /// The bytes this asks for in a video of `length` bytes; nil when that is nothing.
    public func resolve(length: Int64) -> ByteRange? {
        let r: ByteRange
        switch self {
        case .whole: r = ByteRange(0, length)
        case .head(let n): r = ByteRange(0, min(n, length))
        case .span(let a, let b):
            guard a < length else { return nil }
            r = ByteRange(a, min(b.map { $0 + 1 } ?? length, length))
        case .suffix(let n): r = ByteRange(max(0, length - n), length)
        }
        return r.isEmpty ? nil : r
    }

    /// The `Range` header value (without `bytes=`) for a first request, when the length is unknown.
    public var httpSpec: String? {
        switch self {
        case .whole: "0-"
        case .head(let n): n > 0 ? "0-\(n - 1)" : nil
        case .span(let a, let b): b.map { "\(a)-\($0)" } ?? "\(a)-"
        case .suffix(let n): "-\(n)"
        }
    }

    public var description: String {
        switch self {
        case .whole: "whole"
        case .head(let n): "first \(n) bytes"
        case .span(let a, let b): "\(a)-\(b.map(String.init) ?? "")"
        case .suffix(let n): "-\(n)"
        }
    }
}
