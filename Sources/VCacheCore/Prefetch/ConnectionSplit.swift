/// How `--connections N` shares one entry's missing bytes among its connections. Pure.
///
/// The missing bytes (the gaps of what was asked, in order) are cut into at most N pieces of
/// about the same number of bytes, none smaller than `minimumPiece`: a 2 MiB head stays one
/// request, and 10 MiB over four connections is two pieces. A piece is a set of gaps (bytes
/// consecutive among the missing ones), cut at a multiple of `alignment` where that stays inside
/// the gap, so each connection's writes stay whole aligned blocks (`StagedWrite`).
enum ConnectionSplit {
    /// No piece is smaller than this (Docs/performance.md, "Several connections").
    static let minimumPiece: Int64 = 4 << 20
    static let alignment: Int64 = 64 << 10

    /// The pieces, in file order (the first starts at the first missing byte); one piece, all the
    /// missing bytes, when splitting them is not worth it; none when nothing is missing.
    static func pieces(_ missing: [ByteRange], connections: Int, minimum: Int64 = minimumPiece) -> [RangeSet] {
        let gaps = missing.filter { !$0.isEmpty }
        guard !gaps.isEmpty else { return [] }
        // Saturating: the sum of the gaps of one file never passes its length, itself below 2^63.
        let total = gaps.reduce(Int64(0)) { $0 &+ $1.count }
        let n = Int64(max(1, min(connections, Int(min(total / max(1, minimum), 64)))))
        guard n > 1 else { return [RangeSet(gaps)] }
        var pieces: [RangeSet] = []
        var piece = RangeSet()
        var left = total / n + (total % n > 0 ? 1 : 0)  // bytes the current piece still takes
        for gap in gaps {
            var from = gap.lowerBound
            while from < gap.upperBound {
                if Int64(pieces.count) == n - 1 {
                    // The last piece takes the rest.
                    piece.insert(ByteRange(from, gap.upperBound))
                    break
                }
                var cut = gap.upperBound - from <= left ? gap.upperBound : from + left
                if cut < gap.upperBound {
                    let aligned = cut - cut % alignment
                    if aligned > from { cut = aligned }
                }
                piece.insert(ByteRange(from, cut))
                left -= cut - from
                from = cut
                if left <= 0 || cut < gap.upperBound {
                    pieces.append(piece)
                    piece = RangeSet()
                    let i = Int64(pieces.count)
                    left = total / n + (total % n > i ? 1 : 0)
                }
            }
        }
        if !piece.isEmpty { pieces.append(piece) }
        return pieces
    }
}
