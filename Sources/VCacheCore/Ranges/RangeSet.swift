/// A set of byte offsets kept as sorted, non-overlapping, non-adjacent half-open ranges
/// (rclone's `lib/ranges`: "kept sorted and coalesced"). Value type; all operations keep
/// the invariant `ranges[i].upperBound < ranges[i+1].lowerBound` and no range is empty.
public struct RangeSet: Hashable, Sendable, CustomStringConvertible {
    public private(set) var ranges: [ByteRange]

    public init() { ranges = [] }

    public init<S: Sequence>(_ ranges: S) where S.Element == ByteRange {
        self.ranges = []
        for r in ranges { insert(r) }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    /// Number of bytes covered.
    public var count: Int64 { ranges.reduce(0) { $0 + $1.count } }

    public var description: String { "{" + ranges.map(\.description).joined(separator: ", ") + "}" }

    /// Index of the first range whose upper bound is >= `offset` (binary search).
    private func firstIndex(endingAtOrAfter offset: Int64) -> Int {
        var lo = 0, hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ranges[mid].upperBound < offset { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    public mutating func insert(_ r: ByteRange) {
        guard !r.isEmpty else { return }
        // Fast paths for the streaming case (each write extends the last range): no search, no
        // allocation. Every other range ends before `last.lowerBound`, so `r` cannot touch them.
        if let last = ranges.last {
            if r.lowerBound >= last.lowerBound && r.lowerBound <= last.upperBound {
                ranges[ranges.count - 1].upperBound = max(last.upperBound, r.upperBound)
                return
            }
            if r.lowerBound > last.upperBound {
                ranges.append(r)
                return
            }
        } else {
            ranges.append(r)
            return
        }
        var lower = r.lowerBound, upper = r.upperBound
        let start = firstIndex(endingAtOrAfter: lower)
        var end = start
        while end < ranges.count && ranges[end].lowerBound <= upper {
            lower = min(lower, ranges[end].lowerBound)
            upper = max(upper, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(start..<end, with: [ByteRange(lower, upper)])
    }

    public mutating func formUnion(_ other: RangeSet) {
        for r in other.ranges { insert(r) }
    }

    public mutating func remove(_ r: ByteRange) {
        guard !r.isEmpty else { return }
        var result: [ByteRange] = []
        result.reserveCapacity(ranges.count + 1)
        for x in ranges {
            if x.upperBound <= r.lowerBound || x.lowerBound >= r.upperBound {
                result.append(x)
                continue
            }
            if x.lowerBound < r.lowerBound { result.append(ByteRange(x.lowerBound, r.lowerBound)) }
            if x.upperBound > r.upperBound { result.append(ByteRange(r.upperBound, x.upperBound)) }
        }
        ranges = result
    }

    /// True when every byte of `r` is in the set.
    public func contains(_ r: ByteRange) -> Bool {
        if r.isEmpty { return true }
        let i = firstIndex(endingAtOrAfter: r.lowerBound + 1)
        return i < ranges.count && ranges[i].lowerBound <= r.lowerBound && ranges[i].upperBound >= r.upperBound
    }

    /// True when every byte of `other` is in the set.
    public func contains(_ other: RangeSet) -> Bool {
        other.ranges.allSatisfy { contains($0) }
    }

    /// The parts of `r` not in the set, in order: what a fetch still has to get.
    public func missing(in r: ByteRange) -> [ByteRange] {
        var gaps: [ByteRange] = []
        var cursor = r.lowerBound
        var i = firstIndex(endingAtOrAfter: r.lowerBound + 1)
        while cursor < r.upperBound {
            if i >= ranges.count || ranges[i].lowerBound >= r.upperBound {
                gaps.append(ByteRange(cursor, r.upperBound))
                break
            }
            let x = ranges[i]
            if x.lowerBound > cursor { gaps.append(ByteRange(cursor, x.lowerBound)) }
            cursor = max(cursor, x.upperBound)
            i += 1
        }
        return gaps
    }

    /// Bytes of `r` that are in the set.
    public func coverage(of r: ByteRange) -> Int64 {
        r.count - missing(in: r).reduce(0) { $0 + $1.count }
    }

    /// End of the contiguous run of cached bytes starting at `offset` (`offset` itself when that byte is missing).
    public func contiguousEnd(from offset: Int64) -> Int64 {
        let i = firstIndex(endingAtOrAfter: offset + 1)
        guard i < ranges.count, ranges[i].lowerBound <= offset else { return offset }
        return ranges[i].upperBound
    }
}

extension RangeSet {
    /// Gaps closer than `gap` bytes merged into one request, so that a few small cached
    /// islands don't turn one GET into many. The result covers every input range.
    public static func coalesce(_ gaps: [ByteRange], within gap: Int64) -> [ByteRange] {
        var out: [ByteRange] = []
        for g in gaps.sorted() {
            if let last = out.last, g.lowerBound - last.upperBound < gap {
                out[out.count - 1] = ByteRange(last.lowerBound, max(last.upperBound, g.upperBound))
            } else {
                out.append(g)
            }
        }
        return out
    }
}
