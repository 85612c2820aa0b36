// Shared by the fuzz targets built against VCacheCore: the input's bytes as text lines (a field
// each), and numbers taken from the bytes when a line does not spell one.
struct FuzzInput {
    let bytes: [UInt8]
    let lines: [String]

    init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: size))
        lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// Line `i`, or "" past the end.
    func line(_ i: Int) -> String { i < lines.count ? lines[i] : "" }

    /// Line `i` as a number when it is one, else a number made from the input's bytes.
    func number(_ i: Int, in range: ClosedRange<Int64>) -> Int64 {
        if let n = Int64(line(i)), range.contains(n) { return n }
        let h = bits(i)
        // The span in UInt64 (`upper - lower` in Int64 overflows for the whole range).
        let span = UInt64(bitPattern: range.upperBound &- range.lowerBound)
        return range.lowerBound &+ Int64(bitPattern: span == UInt64.max ? h : h % (span + 1))
    }

    /// 64 bits made from the input's bytes, different for each `i`.
    func bits(_ i: Int) -> UInt64 {
        var h: UInt64 = 1469598103934665603
        for b in bytes { h = (h ^ UInt64(b)) &* 1099511628211 }
        return h &+ UInt64(i) &* 0x9E3779B97F4A7C15
    }
}
