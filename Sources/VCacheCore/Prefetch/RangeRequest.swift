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
            guard parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int64(parts[1]), n > 0 else { return nil }
            self = .suffix(n)
            return
        }
        guard parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }), let a = Int64(parts[0]), a >= 0 else { return nil }
        if parts[1].isEmpty {
            self = .span(first: a, last: nil)
            return
        }
        // The last byte is at most 2^63 - 2: its end (last + 1) must be a byte offset too.
        guard let b = Int64(parts[1]), b >= a, b < Int64.max else { return nil }
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
            r = ByteRange(a, min(b.map { Checked.saturatingAdd($0, 1) } ?? length, length))
        case .suffix(let n): r = ByteRange(max(0, length - n), length)
        }
        return r.isEmpty ? nil : r
    }

    /// While the length is unknown: the first part of this request not in `have`, as a request, or
    /// nil when all of it is there. An open end (`A-`, the whole video) is never known to be there;
    /// a suffix is always asked as is.
    public func firstMissing(in have: RangeSet) -> ResponseJudge.Asked? {
        func bounded(_ r: ByteRange) -> ResponseJudge.Asked? {
            have.missing(in: r).first.map(ResponseJudge.Asked.init)
        }
        func open(from a: Int64) -> ResponseJudge.Asked {
            let start = have.contiguousEnd(from: a)
            return ResponseJudge.Asked(spec: "\(start)-", start: start, end: nil)
        }
        switch self {
        case .whole: return open(from: 0)
        case .head(let n): return n > 0 ? bounded(ByteRange(0, n)) : nil
        case .span(let a, let b?): return bounded(ByteRange(a, b + 1))
        case .span(let a, nil): return open(from: a)
        case .suffix(let n): return ResponseJudge.Asked(spec: "-\(n)", start: nil, end: nil, suffix: n)
        }
    }

    /// Where this request ends (exclusive) while the length is unknown; nil for an open end.
    public var knownEnd: Int64? {
        switch self {
        case .head(let n): n
        case .span(_, let b?): b + 1
        case .whole, .span(_, nil), .suffix: nil
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
