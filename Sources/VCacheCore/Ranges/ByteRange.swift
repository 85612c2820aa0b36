/// A half-open interval of byte offsets, `[lowerBound, upperBound)`.
public struct ByteRange: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var lowerBound: Int64
    public var upperBound: Int64

    public init(_ lowerBound: Int64, _ upperBound: Int64) {
        precondition(lowerBound <= upperBound, "ByteRange lower bound above upper bound")
        self.lowerBound = lowerBound
        self.upperBound = upperBound
    }

    public var count: Int64 { upperBound - lowerBound }
    public var isEmpty: Bool { lowerBound == upperBound }

    /// The HTTP form: inclusive `first-last`, as in `Range: bytes=first-last`.
    public var httpSpec: String { "\(lowerBound)-\(upperBound - 1)" }

    public var description: String { "[\(lowerBound), \(upperBound))" }

    public static func < (a: ByteRange, b: ByteRange) -> Bool {
        (a.lowerBound, a.upperBound) < (b.lowerBound, b.upperBound)
    }
}
