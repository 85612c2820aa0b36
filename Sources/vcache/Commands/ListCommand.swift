#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache ls`: what is cached, how much of each, most recently used first.
enum ListCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "ls",
        abstract: "list cached videos: state, bytes cached, last use",
        usage: "ls [--sort lru|size|url] [--complete | --partial] [--ranges] [--json]")

    struct Options: OptionGroup {
        var sort = Option<Order>("sort", help: "order: most recently used first (default), largest first, or by URL")
        var complete = Flag("complete", help: "only complete entries")
        var partial = Flag("partial", help: "only incomplete entries")
        var ranges = Flag("ranges", help: "each entry's cached ranges (a coverage bar on a terminal)")
        var maxSize = Option("max-size", .size(), help: "show usage against this cap (default: config max-size)")
    }

    enum Order: String, CLIChoice {
        case lru, size, url
        static var noun: String { "order" }
        var help: String {
            switch self {
            case .lru: "most recently used first"
            case .size: "largest on disk first"
            case .url: "by URL"
            }
        }
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        if args.complete && args.partial {
            console.usage("--complete and --partial exclude each other; give one")
            return 2
        }
        var cap = args.maxSize
        guard let store = openStore(args, console: console, readOnly: true) else { return StoreOpening.failure }
        var entries: [CacheEntry]
        var streams: [StreamSummary] = []
        do {
            let keyRules = Settings.keyRules(store: store)
            // The staging entry of a live manifest's refetch is vcache's own, not a row of the
            // user's (Docs/reliability.md): it is the new copy of an entry listed under its URL.
            entries = try store.catalog.allEntries().filter { $0.key != CacheStore.stagingKey(of: keyRules.key(for: $0.latestURL)) }
            // A stream is one row: its members fold into it (Docs/hls.md).
            (streams, entries) = try StreamInventory(store: store, keyRules: keyRules).fold(entries)
            if cap == nil { cap = try store.catalog.config("max-size").flatMap(Units.parseSize) }
            if args.ranges {
                for i in entries.indices { entries[i].ranges = try store.catalog.entry(key: entries[i].key)?.ranges ?? RangeSet() }
            }
        } catch {
            return console.fail(error, context: "cannot list \(store.directory)")
        }
        var listed = entries.map(ListRow.entry) + streams.map(ListRow.stream)
        if args.complete { listed = listed.filter(\.isComplete) }
        if args.partial { listed = listed.filter { !$0.isComplete } }
        switch args.sort ?? .lru {
        case .size: listed.sort { ($0.diskBytes, $1.lastUsed) > ($1.diskBytes, $0.lastUsed) }
        case .url: listed.sort { $0.url < $1.url }
        case .lru: listed.sort { ($0.lastUsed, $1.key) > ($1.lastUsed, $0.key) }  // as the catalog orders entries
        }
        // Each entry once: a member several streams name is in each of their rows.
        var counted = Set<CacheKey>()
        var disk: Int64 = 0, cached: Int64 = 0
        for row in listed {
            let members: [CacheEntry] = switch row {
            case .entry(let e): [e]
            case .stream(let s): s.entries
            }
            for e in members where counted.insert(e.key).inserted {
                disk += e.diskBytes
                cached += e.cachedBytes
            }
        }
        let streamCount = listed.filter { if case .stream = $0 { true } else { false } }.count
        if args.json {
            let checks = (try? store.catalog.allExpectedDigests()) ?? [:]
            for row in listed {
                switch row {
                case .entry(let e):
                    var o = entryJSON(e)
                    if args.ranges { o["ranges"] = rangesJSON(e.ranges) }
                    if let c = checks[e.key], !c.isEmpty { o["expected_digests"] = checksumsJSON(c) }
                    console.event("entry", o)
                case .stream(let s):
                    console.event("stream", streamJSON(s))
                }
            }
            var summary: [String: Any] = ["entries": listed.count - streamCount, "streams": streamCount, "cached_bytes": cached, "disk_bytes": disk, "exit_code": 0]
            if let cap { summary["max_size_bytes"] = cap }
            console.event("summary", summary)
            return 0
        }
        guard !listed.isEmpty else {
            let filtered = args.complete || args.partial
            console.out(filtered ? "no matching entries in \(store.directory)\n" : "the cache at \(store.directory) is empty; add videos with 'vcache prefetch URL'\n")
            return 0
        }
        let showPin = listed.contains(where: \.pinned)
        var header = ["STATE", "CACHED", "TOTAL", "%", "LAST USED"]
        if showPin { header.append("PIN") }
        if args.ranges { header.append("RANGES") }
        header.append("URL")
        var rows: [[String]] = [header]
        let now = Date()
        let bar = console.stdoutIsTTY
        for row in listed {
            let e: CacheEntry
            switch row {
            case .entry(let entry): e = entry
            case .stream(let s):
                let percent = s.segments > 0 ? String(s.segmentsCached * 100 / s.segments) : "-"
                var cells = [s.isComplete ? "complete" : "partial", Units.formatSize(s.cachedBytes), "-", percent, Table.age(s.lastUsed, now: now)]
                if showPin { cells.append(s.pinned ? "pin" : "") }
                if args.ranges { cells.append("") }
                cells.append(s.url + " (" + streamLine(s) + ")")
                rows.append(cells)
                continue
            }
            let percent = e.length.map { $0 > 0 ? String(Int(Double(e.cachedBytes) * 100 / Double($0))) : "100" } ?? "-"
            var row = [e.isComplete ? "complete" : "partial", Units.formatSize(e.cachedBytes),
                       e.length.map(Units.formatSize) ?? "?", percent, Table.age(e.lastUsed, now: now)]
            if showPin { row.append(e.pinned ? "pin" : "") }
            if args.ranges { row.append(bar ? Table.coverageBar(e.ranges, length: e.length, width: 24) : Table.rangeList(e.ranges)) }
            row.append(e.latestURL)
            rows.append(row)
        }
        console.out(Table.render(rows, rightAligned: [1, 2, 3]))
        let alone = listed.count - streamCount
        var counts: [String] = []
        if alone > 0 || streamCount == 0 { counts.append("\(alone) \(alone == 1 ? "entry" : "entries")") }
        if streamCount > 0 { counts.append("\(streamCount) \(streamCount == 1 ? "stream" : "streams")") }
        var totals = counts.joined(separator: ", ") + ", \(Units.formatSize(cached)) cached, \(Units.formatSize(disk)) on disk"
        if let cap {
            // Against the cap the cache counts as evict counts it: its entries, the catalog (with
            // its WAL) and the full-disk reserve, what du counts.
            let usage = Evictor(store: store).footprint().total((try? store.catalog.allEntries()) ?? entries)
            totals += "; the cache uses \(Units.formatSize(usage)) of a \(Units.formatSize(cap)) cap (\(Checked.int(Double(usage) * 100 / Double(max(cap, 1))) ?? Int.max)%)"
        }
        console.out(totals + "\n")
        return 0
    }
}


/// The keys an entry has in `ls --json` and `info --json` (Docs/json.md, event `entry`).
func entryJSON(_ e: CacheEntry) -> [String: Any] {
    var o: [String: Any] = ["key": e.key, "url": e.url, "latest_url": e.latestURL, "state": e.isComplete ? "complete" : "partial",
                            "cached_bytes": e.cachedBytes, "disk_bytes": e.diskBytes, "pinned": e.pinned,
                            "created": Timestamp.iso8601(e.created), "last_used": Timestamp.iso8601(e.lastUsed)]
    if let v = e.length { o["length_bytes"] = v }
    if let v = e.sha256 { o["sha256"] = v }
    if let v = e.completed { o["completed"] = Timestamp.iso8601(v) }
    return o
}

/// An entry's expected digests (Docs/json.md, `expected_digests`): each with where it came from
/// and whether the complete entry matched it (null: not checked yet).
func checksumsJSON(_ checks: [DigestCheck]) -> [[String: Any]] {
    checks.map { c in
        var o: [String: Any] = ["algorithm": c.expected.algorithm.rawValue, "value": c.expected.hex,
                                "source": c.expected.source.description, "matched": c.matched.map { $0 as Any } ?? JSONNull()]
        if let v = c.computed { o["computed"] = v }
        return o
    }
}

/// Cached ranges as `[first, last]` byte pairs, both inclusive (as in an HTTP Range).
func rangesJSON(_ r: RangeSet) -> [[Int64]] { r.ranges.map { [$0.lowerBound, $0.upperBound - 1] } }
