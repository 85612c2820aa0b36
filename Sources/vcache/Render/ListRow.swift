#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// One row of `ls`: an entry of no stream, or a whole stream (its members folded).
enum ListRow {
    case entry(CacheEntry)
    case stream(StreamSummary)

    var key: CacheKey {
        switch self {
        case .entry(let e): e.key
        case .stream(let s): s.root
        }
    }
    var lastUsed: Date {
        switch self {
        case .entry(let e): e.lastUsed
        case .stream(let s): s.lastUsed
        }
    }
    var diskBytes: Int64 {
        switch self {
        case .entry(let e): e.diskBytes
        case .stream(let s): s.diskBytes
        }
    }
    var cachedBytes: Int64 {
        switch self {
        case .entry(let e): e.cachedBytes
        case .stream(let s): s.cachedBytes
        }
    }
    var url: String {
        switch self {
        case .entry(let e): e.latestURL
        case .stream(let s): s.url
        }
    }
    var isComplete: Bool {
        switch self {
        case .entry(let e): e.isComplete
        case .stream(let s): s.isComplete
        }
    }
    var pinned: Bool {
        switch self {
        case .entry(let e): e.pinned
        case .stream(let s): s.pinned
        }
    }
}

/// "2 variants (1 cached), 4/4 segments, 4.0 of 4.0 s": what `ls` says of a stream.
func streamLine(_ s: StreamSummary) -> String {
    let v = s.variants
    var parts: [String] = ["\(s.record.format.uppercased())"]
    if v.count > 1 || v.first?.kind == "variant" {
        parts.append("\(v.count) \(v.count == 1 ? "variant" : "variants") (\(v.filter(\.cached).count) cached)")
    }
    let renditions = s.playlists.count - v.count
    if renditions > 0 { parts.append("\(renditions) \(renditions == 1 ? "rendition" : "renditions")") }
    parts.append("\(s.segmentsCached)/\(s.segments) segments")
    parts.append(String(cFormat: "%.1f of %.1f s", s.secondsCached, s.seconds))
    parts.append("\(s.entries.count) entries")
    // Why a stream whose members are all cached reads partial (h9d F15).
    switch s.record.members.first?.role {
    case .manifestUnconfirmed?: parts.append("unconfirmed: the next prefetch asks for its manifest again")
    case .manifestToAsk?: parts.append("the next prefetch asks for its master again")
    default: break
    }
    return parts.joined(separator: ", ")
}

/// The keys a stream has in `ls --json` and `info --json` (Docs/json.md, event `stream`).
func streamJSON(_ s: StreamSummary) -> [String: Any] {
    var o: [String: Any] = ["key": s.root, "url": s.url, "format": s.record.format, "state": s.isComplete ? "complete" : "partial",
                            "cached_bytes": s.cachedBytes, "disk_bytes": s.diskBytes, "pinned": s.pinned,
                            "last_used": Timestamp.iso8601(s.lastUsed), "entries": s.entries.count,
                            "variants": s.variants.count, "variants_cached": s.variants.filter(\.cached).count,
                            "segments": s.segments, "segments_cached": s.segmentsCached,
                            "seconds": s.seconds, "seconds_cached": s.secondsCached]
    // Why a stream whose members are all cached reads partial, as the text line says (h10a F11).
    switch s.record.members.first?.role {
    case .manifestUnconfirmed?: o["unconfirmed"] = true
    case .manifestToAsk?: o["ask_again"] = true
    default: break
    }
    o["playlists"] = s.playlists.map { p -> [String: Any] in
        ["url": p.url, "key": p.key, "kind": p.kind, "label": p.label, "cached": p.cached, "segments": p.segments,
         "segments_cached": p.segmentsCached, "seconds": p.seconds, "seconds_cached": p.secondsCached]
    }
    return o
}
