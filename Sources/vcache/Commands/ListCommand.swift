import Foundation
import VCacheCore

/// `vcache ls`: what is cached, how much of each, most recently used first.
enum ListCommand: VCacheCommand {
    static let spec = CommandSpec(
        name: "ls",
        abstract: "list cached videos: state, bytes cached, last use",
        usage: "ls [--json]",
        options: [.flag("json", "one JSON object per entry, then a totals object")])

    static func run(_ args: ParsedArguments, console: Console) -> Int32 {
        guard let store = openStore(args, console: console) else { return 1 }
        let entries: [CacheEntry]
        do {
            entries = try store.catalog.allEntries()
        } catch {
            console.error("cannot list \(store.directory): \(error)")
            return 1
        }
        let disk = entries.reduce(Int64(0)) { $0 + $1.diskBytes }
        let cached = entries.reduce(Int64(0)) { $0 + $1.cachedBytes }
        if args.flag("json") {
            for e in entries {
                var o: [String: Any] = ["key": e.key, "url": e.url, "latest_url": e.latestURL, "state": e.isComplete ? "complete" : "partial",
                                        "cached_bytes": e.cachedBytes, "disk_bytes": e.diskBytes,
                                        "last_used": ISO8601DateFormatter().string(from: e.lastUsed), "pinned": e.pinned]
                if let l = e.length { o["length"] = l }
                if let s = e.sha256 { o["sha256"] = s }
                console.out(JSONLines.encode(o) + "\n")
            }
            console.out(JSONLines.encode(["totals": ["entries": entries.count, "cached_bytes": cached, "disk_bytes": disk]]) + "\n")
            return 0
        }
        guard !entries.isEmpty else {
            console.out("the cache at \(store.directory) is empty; add videos with 'vcache prefetch URL'\n")
            return 0
        }
        var rows: [[String]] = [["STATE", "CACHED", "TOTAL", "%", "LAST USED", "URL"]]
        let now = Date()
        for e in entries {
            let percent = e.length.map { $0 > 0 ? String(Int(Double(e.cachedBytes) * 100 / Double($0))) : "100" } ?? "-"
            rows.append([e.isComplete ? "complete" : "partial", Units.formatSize(e.cachedBytes),
                         e.length.map(Units.formatSize) ?? "?", percent, Table.age(e.lastUsed, now: now), e.latestURL])
        }
        console.out(Table.render(rows, rightAligned: [1, 2, 3]))
        console.out("\(entries.count) \(entries.count == 1 ? "entry" : "entries"), \(Units.formatSize(cached)) cached, \(Units.formatSize(disk)) on disk\n")
        return 0
    }
}

enum Table {
    /// Columns padded to their widest cell; the last column is never padded.
    static func render(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
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
            out += cells.joined(separator: "  ") + "\n"
        }
        return out
    }

    /// `just now`, `5m ago`, `3h ago`, `2d ago`.
    static func age(_ date: Date, now: Date) -> String {
        let s = max(0, now.timeIntervalSince(date))
        if s < 60 { return "just now" }
        if s < 3600 { return "\(Int(s / 60))m ago" }
        if s < 86400 { return "\(Int(s / 3600))h ago" }
        return "\(Int(s / 86400))d ago"
    }
}
