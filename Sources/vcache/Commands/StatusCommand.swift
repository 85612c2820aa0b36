#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache status`: the box at a glance: the cache against its cap and the disk, entries by
/// state, and a running serve's counters (asked on its loopback port).
enum StatusCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "status",
        abstract: "the cache against its cap and the disk, entries by state, and serve's counters",
        usage: "status [--port N] [--json]",
        discussion: """
        Reads only (it works on a read-only file system). serve is asked for its counters at
        http://127.0.0.1:PORT/status (default \(ServeCommand.defaultPort)); when nothing answers,
        status says serve is not running there. Exit 0, or 1 when there is no cache.
        """,
        minPositionals: 0, maxPositionals: 0)

    struct Options: OptionGroup {
        var port = Option("port", .port(1...65535), help: "the port serve listens on (default \(ServeCommand.defaultPort))")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        let port = args.port ?? ServeCommand.defaultPort
        guard let store = openStore(args, console: console, readOnly: true) else { return StoreOpening.failure }
        let entries: [CacheEntry]
        let cap: Int64?
        do {
            entries = try store.catalog.allEntries()
            cap = try store.catalog.config("max-size").flatMap(Units.parseSize)
        } catch {
            return console.fail(error, context: "cannot read \(store.directory)")
        }
        let gauges = ServeMetrics.Gauges.measure(store, cap: cap, entries: entries)
        let pinned = entries.filter(\.pinned).count
        // Streams (HLS and DASH): how many, and the entries that are their members.
        let streams = (try? store.catalog.streams()) ?? []
        let memberEntries = Set(streams.flatMap { $0.members.map(\.key) }).intersection(entries.map(\.key)).count
        let serve = SmallGet.get("http://127.0.0.1:\(port)/status", timeout: 2)
            .flatMap { $0.status == 200 ? (try? JSONDecoder().decode(JSONValue.self, from: $0.body))?.object : nil }
        if args.json {
            var o: [String: Any] = ["cache_dir": store.directory, "sharing": store.sharing.rawValue, "cache_bytes": gauges.cacheBytes,
                                    "complete_entries": gauges.completeEntries, "partial_entries": gauges.partialEntries,
                                    "pinned_entries": pinned, "streams": streams.count, "stream_member_entries": memberEntries, "serve_port": port, "serve_running": serve != nil, "exit_code": 0]
            if let cap { o["cap_bytes"] = cap }
            if let free = gauges.diskFreeBytes { o["disk_free_bytes"] = free }
            if let serve { o["serve"] = serve }
            console.event("status", o)
            return 0
        }
        var rows: [[String]] = []
        rows.append(["cache", store.directory + (store.sharing == .group ? " (shared by its group)" : "")])
        var size = Units.formatSize(gauges.cacheBytes)
        if let cap { size += " of a \(Units.formatSize(cap)) cap (\(Checked.int(Double(gauges.cacheBytes) * 100 / Double(max(cap, 1))) ?? Int.max)%)" } else { size += " (no cap: vcache config set max-size SIZE)" }
        if let free = gauges.diskFreeBytes { size += "; \(Units.formatSize(free)) free on its disk" }
        rows.append(["size", size])
        rows.append(["entries", "\(gauges.completeEntries) complete, \(gauges.partialEntries) partial, \(pinned) pinned"])
        if !streams.isEmpty { rows.append(["streams", "\(streams.count) (\(memberEntries) of the entries are their manifests (playlists, MPDs), segments, init sections and keys)"]) }
        if let serve {
            let requests = serve["requests"] as? Int ?? 0
            let ratio = (serve["byte_hit_ratio"] as? Double ?? (serve["byte_hit_ratio"] as? Int).map(Double.init)).map { String(cFormat: "%.0f%%", $0 * 100) } ?? "-"
            let byCache = serve["responses_by_cache"] as? [String: Int] ?? [:]
            rows.append(["serve", "running on 127.0.0.1:\(port) since \(serve["started"] as? String ?? "?"): \(requests) requests "
                         + "(HIT \(byCache["hit"] ?? 0), PARTIAL \(byCache["partial"] ?? 0), MISS \(byCache["miss"] ?? 0)), \(ratio) of the bytes from the cache, "
                         + "\(serve["storing_jobs"] as? Int ?? 0) storing, \(serve["open_connections"] as? Int ?? 0) connections"])
        } else {
            rows.append(["serve", "not running on 127.0.0.1:\(port) (or not answering)"])
        }
        console.out(Table.render(rows))
        return 0
    }
}
