#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache info URL|KEY`: everything the catalog knows of one entry, or of one stream.
enum InfoCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "info",
        abstract: "everything known about one cached video",
        usage: "info URL|KEY [--probe] [--json]",
        discussion: """
        Each checksum the video is expected to have is shown with where it came from and whether
        its bytes matched. For an MP4 it also tells, from the cached bytes: where the moov is, whether the file is
        fragmented, its duration and tracks (kind, codec, timescale, samples, bitrate), and the
        bytes '--seconds 1/2/5' would cache. --probe first fetches what that needs and nothing
        more: the top-level box headers and the moov (a URL not yet cached is fine). For a
        stream (an HLS playlist's URL), its variants and renditions and what of each is cached.
        """,
        minPositionals: 1, maxPositionals: 1)

    struct Options: OptionGroup {
        var probe = Flag("probe", help: "fetch the MP4's box headers and moov first when they are not cached")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        guard let store = openStore(args, console: console, readOnly: !args.probe) else { return StoreOpening.failure }
        let target = args.positionals[0]
        if args.probe {
            let url = EntryLookup.key(for: target, store: store).flatMap { (try? store.catalog.entry(key: $0)) ?? nil }?.latestURL ?? target
            guard PrefetchItem.urlProblem(url) == nil else {
                console.error("not in the cache: \(target); give its URL to probe it", kind: "not_found")
                return 1
            }
            // Probing is not use (as ls, info and verify are not): the entry's last use stays.
            let known = EntryLookup.key(for: target, store: store).flatMap { (try? store.catalog.entry(key: $0)) ?? nil }
            defer { if let known { try? store.catalog.touch(key: known.key, now: known.lastUsed) } }
            // The first 4 KiB (ftyp and the headers after it), then one hop at a time to the moov.
            let result = Prefetcher(store: store, options: PrefetchOptions()).run([PrefetchItem(url: url, requests: [.head(4096)], mp4: .moov)])[0]
            if let error = result.error {
                return console.fail(error, context: "cannot probe \(url)")
            }
        }
        guard let key = EntryLookup.key(for: target, store: store),
              let e = (try? store.catalog.entry(key: key)) ?? nil else {
            console.error("not in the cache: \(target); see 'vcache ls', or add --probe", kind: "not_found")
            return 1
        }
        // A stream's root: the stream, its playlists and what of each is cached (InfoCommand+Stream.swift).
        if let stream = try? StreamInventory(store: store, keyRules: Settings.keyRules(store: store)).stream(root: key) {
            return infoStream(stream, args: args, console: console)
        }
        let facts = mp4Facts(e, store: store)
        var playable = facts?.duration.flatMap { d in playableSeconds(e, duration: d, store: store) }
        // A fragmented MP4's moov need not say its duration: the seconds that play are searched for.
        if (facts?.duration ?? 0) <= 0, facts?.fragmented == true, !e.isComplete { playable = playableSeconds(e, duration: nil, store: store) }
        let layout = facts?.layout ?? "unknown (nothing cached)"
        let disk = store.diskUsage(key: key)
        let checks = (try? store.catalog.expectedDigests(key: key)) ?? []
        if args.json {
            var o = entryJSON(e)
            if !checks.isEmpty { o["expected_digests"] = checksumsJSON(checks) }
            o["disk_bytes"] = disk
            o["ranges"] = rangesJSON(e.ranges)
            o["mp4_layout"] = layout
            if let v = e.etag { o["etag"] = v }
            if let v = e.lastModified { o["last_modified"] = v }
            if let v = e.contentType { o["content_type"] = v }
            if let facts, facts.moov != nil { o["mp4"] = mp4JSON(facts) }
            if let playable { o["playable_seconds"] = playable }
            console.event("entry", o)
            return 0
        }
        let percent = e.length.map { $0 > 0 ? " (\(Int(Double(e.cachedBytes) * 100 / Double($0)))%)" : "" } ?? ""
        var rows: [(String, String)] = [
            ("url", e.url),
            ("latest url", e.latestURL),
            ("key", e.key.hex),
            ("state", (e.isComplete ? "complete" : "partial") + (e.pinned ? ", pinned" : "")),
            ("length", e.length.map { "\($0) bytes (\(Units.formatSize($0)))" } ?? "unknown"),
            ("cached", "\(e.cachedBytes) bytes\(percent) in \(e.ranges.ranges.count) \(e.ranges.ranges.count == 1 ? "range" : "ranges")"),
            ("", Table.coverageBar(e.ranges, length: e.length, width: 50) + " (the video, start to end)"),
            ("ranges", e.ranges.ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ", ")),
            ("disk usage", Units.formatSize(disk)),
            ("etag", e.etag ?? "-"),
            ("last-modified", e.lastModified ?? "-"),
            ("content type", e.contentType ?? "-"),
            ("created", Timestamp.iso8601(e.created)),
            ("last used", Timestamp.iso8601(e.lastUsed)),
            ("completed", e.completed.map { Timestamp.iso8601($0) } ?? "-"),
            ("sha-256", e.sha256 ?? "-"),
            ("mp4 layout", layout),
        ]
        if e.ranges.isEmpty { rows.removeAll { $0.0 == "ranges" } }
        // Each expected digest after the SHA-256: its value, where it came from, what was found.
        let at = (rows.firstIndex { $0.0 == "sha-256" } ?? rows.count - 1) + 1
        rows.insert(contentsOf: checks.map { c in
            let outcome = switch c.matched {
            case true?: "matched"
            case false?: "did not match: its bytes gave \(c.computed ?? "?") and were dropped"
            case nil: "not checked yet (when it is complete)"
            }
            return ("expected \(c.expected.algorithm.rawValue)", "\(c.expected.hex) (\(c.expected.source.description)): \(outcome)")
        }, at: at)
        if let facts { rows += mp4Rows(facts) }
        if let playable, let d = facts?.duration, d > 0 {
            // Tenths as computed: a rounded-up figure would claim more than plays.
            rows.append(("plays offline", playable >= d ? "all \(Units.formatDuration(d)) from the cache" : "the first \(String(cFormat: "%.1fs", playable)) of \(Units.formatDuration(d)) from the cache"))
        } else if facts?.fragmented == true {
            rows.append(("plays offline", e.isComplete ? "all of it from the cache" : "the first \(String(cFormat: "%.1fs", playable ?? 0)) from the cache (fragmented: its moov does not say its duration)"))
        }
        let width = rows.map(\.0.count).max() ?? 0
        for (k, v) in rows { console.out(k.padded(toLength: width + 2) + v + "\n") }
        return 0
    }

    /// Seconds that play from the cached bytes alone (the longest ready `--seconds`).
    /// `duration` nil: not known (a fragmented MP4), searched for.
    static func playableSeconds(_ e: CacheEntry, duration: Double?, store: CacheStore) -> Double? {
        guard let data = try? store.openDataForReading(key: e.key) else { return nil }
        defer { data.close() }
        let read: MP4Walker.Read = { offset, count in try data.bytes(count, at: offset) }
        guard let duration else { return Readiness.playableSeconds(e, read: read) }
        return Readiness.playableSeconds(e, duration: duration, read: read)
    }

    /// The MP4 facts the cached bytes show; nil when nothing is cached.
    static func mp4Facts(_ e: CacheEntry, store: CacheStore) -> MP4Facts? {
        guard let length = e.length, !e.ranges.isEmpty, let data = try? store.openDataForReading(key: e.key) else { return nil }
        let ranges = e.ranges
        return MP4Facts.inspect(length: length, have: ranges) { offset, count in try data.bytes(count, at: offset) }
    }

    static func mp4Rows(_ f: MP4Facts) -> [(String, String)] {
        var rows: [(String, String)] = []
        if let moov = f.moov { rows.append(("moov", "\(Units.formatSize(moov.size)) at offset \(moov.offset)")) }
        if let fragmented = f.fragmented { rows.append(("fragmented", fragmented ? "yes (moof/mdat pairs)" : "no")) }
        if let d = f.duration, d > 0 { rows.append(("duration", String(cFormat: "%.3f s", d))) }
        for t in f.tracks {
            let rate = t.bitrate > 0 ? ", \(t.bitrate / 1000) kbit/s" : ""
            rows.append(("track \(t.id)", "\(t.kind) \(t.codec), timescale \(t.timescale), \(t.samples) samples\(rate)"))
        }
        for (s, bytes) in f.bytesForSeconds {
            rows.append(("--seconds \(Int(s))", bytes.map { "\(Units.formatSize($0)) (\($0) bytes)" } ?? "unknown until its boxes are cached (--probe)"))
        }
        if let p = f.problem { rows.append(("mp4 problem", p)) }
        return rows
    }

    static func mp4JSON(_ f: MP4Facts) -> [String: Any] {
        var o: [String: Any] = [:]
        if let m = f.moov { o["moov_offset"] = m.offset; o["moov_bytes"] = m.size }
        if let v = f.fragmented { o["fragmented"] = v }
        if let v = f.duration { o["duration_seconds"] = v }
        o["tracks"] = f.tracks.map { ["id": Int($0.id), "kind": $0.kind, "codec": $0.codec, "timescale": Int($0.timescale), "samples": $0.samples, "bitrate_bps": $0.bitrate] as [String: Any] }
        var need: [String: Any] = [:]
        for (s, b) in f.bytesForSeconds { need["\(Int(s))"] = b ?? JSONNull() }
        o["bytes_for_seconds"] = need
        if let p = f.problem { o["problem"] = p }
        return o
    }
}
