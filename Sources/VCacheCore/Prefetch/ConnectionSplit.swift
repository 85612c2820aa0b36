/// How `--connections N` shares one entry's missing bytes among its connections. Pure.
///
/// The missing bytes (the gaps of what was asked, in order) are cut into at most N pieces of
/// about the same number of bytes, none smaller than `minimumPiece`: a 2 MiB head stays one
/// request, and 10 MiB over four connections is two pieces. A piece is a set of gaps (bytes
/// consecutive among the missing ones); each cut is moved up to a multiple of `alignment` (or the
/// end of its gap), so each connection's writes stay whole aligned blocks (`StagedWrite`).
enum ConnectionSplit {
    /// No piece is smaller than this (Docs/performance.md, "Several connections for one file").
    static let minimumPiece: Int64 = 4 << 20
    static let alignment: Int64 = 64 << 10

    /// The pieces, in file order (the first starts at the first missing byte); one piece, all the
    /// missing bytes, when splitting them is not worth it; none when nothing is missing.
    static func pieces(_ missing: [ByteRange], connections: Int, minimum: Int64 = minimumPiece) -> [RangeSet] {
        let gaps = missing.filter { !$0.isEmpty }
        guard !gaps.isEmpty else { return [] }
        // Saturating: the gaps of one file never add up past its length, itself below 2^63.
        let total = gaps.reduce(Int64(0)) { Int64.max - $0 < $1.count ? .max : $0 + $1.count }
        // A cut moves up by less than `alignment`: each piece keeps at least `minimum`.
        let n = Int64(max(1, min(connections, Int(min(total / (minimum + alignment), 64)))))
        guard n > 1 else { return [RangeSet(gaps)] }
        // Where each piece after the first begins, counted in missing bytes (the i-th of n equal
        // shares, its file offset moved up to the alignment), strictly increasing.
        let base = total / n, rest = total % n
        var cuts: [Int64] = []
        var before: Int64 = 0  // missing bytes in the gaps before `gap`
        var i: Int64 = 1
        for gap in gaps {
            while i < n {
                let share = base * i + min(i, rest)
                guard share < before + gap.count else { break }
                let at = gap.lowerBound + (share - before)
                let up = at % alignment == 0 ? 0 : alignment - at % alignment
                let cut = before + (min(at + min(up, gap.upperBound - at), gap.upperBound) - gap.lowerBound)
                if cut > (cuts.last ?? 0) && cut < total { cuts.append(cut) }
                i += 1
            }
            before += gap.count
        }
        var pieces: [RangeSet] = []
        var from: Int64 = 0
        for end in cuts + [total] {
            pieces.append(slice(gaps, from, end))
            from = end
        }
        return pieces
    }

    /// The file ranges of missing bytes `from` to `to` (counted through `gaps`).
    private static func slice(_ gaps: [ByteRange], _ from: Int64, _ to: Int64) -> RangeSet {
        var out = RangeSet()
        var before: Int64 = 0
        for gap in gaps {
            let a = max(from, before), b = min(to, before + gap.count)
            if a < b { out.insert(ByteRange(gap.lowerBound + (a - before), gap.lowerBound + (b - before))) }
            before += gap.count
            if before >= to { break }
        }
        return out
    }
}
