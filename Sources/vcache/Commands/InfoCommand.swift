import Foundation
import VCacheCore

/// `vcache info URL|KEY`: everything the catalog knows of one entry.
enum InfoCommand: VCacheCommand {
    static let spec = CommandSpec(
        name: "info",
        abstract: "everything known about one cached video",
        usage: "info URL|KEY [--json]",
        options: [.flag("json", "one JSON object")],
        minPositionals: 1, maxPositionals: 1)

    static func run(_ args: ParsedArguments, console: Console) -> Int32 {
        guard let store = openStore(args, console: console) else { return 1 }
        guard let key = EntryLookup.key(for: args.positionals[0], store: store),
              let e = (try? store.catalog.entry(key: key)) ?? nil else {
            console.error("not in the cache: \(args.positionals[0]); see 'vcache ls'")
            return 1
        }
        let layout = mp4Layout(e, store: store)
        let disk = store.diskUsage(key: key)
        let iso = ISO8601DateFormatter()
        if args.flag("json") {
            var o: [String: Any] = ["key": e.key, "url": e.url, "latest_url": e.latestURL, "state": e.isComplete ? "complete" : "partial",
                                    "cached_bytes": e.cachedBytes, "disk_bytes": disk, "pinned": e.pinned,
                                    "created": iso.string(from: e.created), "last_used": iso.string(from: e.lastUsed),
                                    "ranges": e.ranges.ranges.map { [$0.lowerBound, $0.upperBound - 1] }, "mp4_layout": layout]
            if let v = e.length { o["length"] = v }
            if let v = e.etag { o["etag"] = v }
            if let v = e.lastModified { o["last_modified"] = v }
            if let v = e.contentType { o["content_type"] = v }
            if let v = e.completed { o["completed"] = iso.string(from: v) }
            if let v = e.sha256 { o["sha256"] = v }
            console.out(JSONLines.encode(o) + "\n")
            return 0
        }
        let percent = e.length.map { $0 > 0 ? " (\(Int(Double(e.cachedBytes) * 100 / Double($0)))%)" : "" } ?? ""
        var rows: [(String, String)] = [
            ("url", e.url),
            ("latest url", e.latestURL),
            ("key", e.key),
            ("state", (e.isComplete ? "complete" : "partial") + (e.pinned ? ", pinned" : "")),
            ("length", e.length.map { "\($0) bytes (\(Units.formatSize($0)))" } ?? "unknown"),
            ("cached", "\(e.cachedBytes) bytes\(percent) in \(e.ranges.ranges.count) \(e.ranges.ranges.count == 1 ? "range" : "ranges")"),
            ("ranges", e.ranges.ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ", ")),
            ("disk usage", Units.formatSize(disk)),
            ("etag", e.etag ?? "-"),
            ("last-modified", e.lastModified ?? "-"),
            ("content type", e.contentType ?? "-"),
            ("created", iso.string(from: e.created)),
            ("last used", iso.string(from: e.lastUsed)),
            ("completed", e.completed.map { iso.string(from: $0) } ?? "-"),
            ("sha-256", e.sha256 ?? "-"),
            ("mp4 layout", layout),
        ]
        if e.ranges.isEmpty { rows.removeAll { $0.0 == "ranges" } }
        let width = rows.map(\.0.count).max() ?? 0
        for (k, v) in rows { console.out(k.padding(toLength: width + 2, withPad: " ", startingAt: 0) + v + "\n") }
        return 0
    }

    /// Where `moov` sits, judged from the top-level box headers that are cached.
    static func mp4Layout(_ e: CacheEntry, store: CacheStore) -> String {
        guard let length = e.length, !e.ranges.isEmpty, let data = try? store.openDataForReading(key: e.key) else { return "unknown (nothing cached)" }
        defer { data.close() }
        struct NotCached: Error {}
        let ranges = e.ranges
        let walker = MP4Walker(length: length) { offset, count in
            guard ranges.contains(ByteRange(offset, offset + Int64(count))) else { throw NotCached() }
            var b = [UInt8](repeating: 0, count: count)
            try b.withUnsafeMutableBytes { try data.readExactly(into: $0, fromAbsoluteOffset: offset) }
            return b
        }
        var seen: [MP4Box] = []
        var at: Int64 = 0
        while at < length {
            // One header at a time: a header that is not cached yet only ends the walk.
            guard let box = try? walker.box(at: at, end: length) else { break }
            seen.append(box)
            at = box.end
        }
        let types = seen.map(\.type)
        guard types.first == "ftyp" || types.contains("moov") || types.contains("mdat") else { return "not MP4 (no ftyp box)" }
        if let m = types.firstIndex(of: "moov"), let d = types.firstIndex(of: "mdat") {
            return m < d ? MP4Walker.Layout.moovFirst.rawValue : MP4Walker.Layout.moovLast.rawValue
        }
        if types.contains("moof") { return MP4Walker.Layout.fragmented.rawValue }
        if types.contains("moov") { return MP4Walker.Layout.moovFirst.rawValue }
        if types.contains("mdat") { return MP4Walker.Layout.moovLast.rawValue }
        return "unknown (the box headers are not cached yet)"
    }
}
