#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// Plain-text tables and the small renderings `ls` and friends share.
enum Table {
    /// Columns padded to their widest cell; the last column is never padded.
    /// A cell holding origin text (a URL, a reason quoting a manifest) stays on its line: its
    /// control characters escaped (`Console.oneLine`).
    static func render(_ table: [[String]], rightAligned: Set<Int> = []) -> String {
        let rows = table.map { $0.map(Console.oneLine) }
        guard let first = rows.first else { return "" }
        var widths = Array(repeating: 0, count: first.count)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        var out = ""
        for r in rows {
            var cells: [String] = []
            for (i, c) in r.enumerated() {
                if i == r.count - 1 { cells.append(c); continue }
                let pad = String(repeating: " ", count: widths[i] - c.count)
                cells.append(rightAligned.contains(i) ? pad + c : c + pad)
            }
            var line = cells.joined(separator: "  ")
            while line.last == " " { line.removeLast() }
            out += line + "\n"
        }
        return out
    }

    /// `0-1048575,2097152-3145727` (inclusive, as in HTTP); `-` when nothing is cached.
    static func rangeList(_ set: RangeSet) -> String {
        set.isEmpty ? "-" : set.ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
    }

    /// `[██▌       ██]`: each cell a slice of the video, full, partly or not cached.
    static func coverageBar(_ set: RangeSet, length: Int64?, width: Int) -> String {
        guard let length, length > 0 else { return "[" + String(repeating: " ", count: width) + "]" }
        var cells = ""
        // length * i / width without the product (a length near 2^63 would overflow it).
        let w = Int64(width), q = length / w, r = length % w
        func edge(_ i: Int64) -> Int64 { q * i + r * i / w }
        for i in 0..<Int64(width) {
            let a = edge(i), b = max(a + 1, edge(i + 1))
            let have = set.coverage(of: ByteRange(a, min(b, length)))
            cells += have == 0 ? " " : have >= b - a ? "█" : "▌"
        }
        return "[" + cells + "]"
    }

    /// `just now`, `5m ago`, `3h ago`, `2d ago`.
    static func age(_ date: Date, now: Date) -> String {
        let s = max(0, now.timeIntervalSince(date))
        if s < 60 { return "just now" }
        if s < 3600 { return "\(Int(s / 60))m ago" }  // s is finite and under an hour
        if s < 86400 { return "\(Int(s / 3600))h ago" }
        return "\(Checked.int(s / 86400) ?? Int.max)d ago"
    }
}
