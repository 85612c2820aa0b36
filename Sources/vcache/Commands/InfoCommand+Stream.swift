#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

extension InfoCommand {
    /// `vcache info STREAM`: the stream, its variants and renditions, and what of each is cached.
    static func infoStream(_ s: StreamSummary, args: ParsedArguments<Options>, console: Console) -> Int32 {
        if args.json {
            var o = streamJSON(s)
            o["members"] = s.record.members.map { m -> [String: Any] in
                let e = s.entries.first { $0.key == m.key }
                // A marked root (to be asked for again, unconfirmed) is still the stream's
                // manifest: role `manifest`, the mark said apart (Docs/json.md).
                var member: [String: Any] = ["key": m.key, "role": m.role.isRoot ? StreamRole.manifest.rawValue : m.role.rawValue, "cached": e != nil]
                if m.role == .manifestToAsk { member["ask_again"] = true }
                if m.role == .manifestUnconfirmed { member["unconfirmed"] = true }
                if let e {
                    member["url"] = e.latestURL
                    member["state"] = e.isComplete ? "complete" : "partial"
                    member["cached_bytes"] = e.cachedBytes
                }
                return member
            }
            console.event("stream", o)
            return 0
        }
        let named = s.record.members.count
        var rows: [(String, String)] = [
            ("url", s.url),
            ("key", s.root.hex),
            ("format", s.record.format.uppercased()),
            ("state", (s.isComplete ? "complete" : "partial") + (s.pinned ? ", pinned" : "")
                + Self.markSaid(s.record.members.first?.role)),
            ("members", "\(s.entries.count) of the \(named) it names cached"),
            ("cached", "\(s.cachedBytes) bytes (\(Units.formatSize(s.cachedBytes)))"),
            ("disk usage", Units.formatSize(s.diskBytes)),
            ("last used", Timestamp.iso8601(s.lastUsed)),
            ("plays offline", s.record.members.first?.role == .manifestUnconfirmed
                ? String(cFormat: "not until its manifest is confirmed (serve answers it offline with 502; %.1f of %.1f s cached)", s.secondsCached, s.seconds)
                : String(cFormat: "%.1f of %.1f s", s.secondsCached, s.seconds)),
        ]
        // Members by role: entries, as "members" counts them; segments as `ls` counts them (each
        // segment the cached media playlists list, a byte range of one file each) when the
        // format's playlists are read (Docs/hls.md, "Counts").
        for role in StreamRole.allCases where !role.isRoot {
            let all = s.record.members.filter { $0.role == role }
            if role == .segment && !s.playlists.isEmpty {
                rows.append(("segments", "\(s.segmentsCached) of \(s.segments) cached"))
                continue
            }
            guard !all.isEmpty else { continue }
            let cached = all.filter { m in s.entries.contains { $0.key == m.key } }.count
            rows.append((role == .initSection ? "init sections" : role.rawValue + "s", "\(cached) of \(all.count) cached"))
        }
        for p in s.playlists {
            let what = p.cached
                ? "\(p.segmentsCached)/\(p.segments) segments, " + String(cFormat: "%.1f of %.1f s", p.secondsCached, p.seconds)
                : "not cached"
            rows.append((p.kind, [p.label, what, p.url].filter { !$0.isEmpty }.joined(separator: "; ")))
        }
        let width = rows.map(\.0.count).max() ?? 0
        // Labels and URLs come from the manifest: one line each, whatever it holds.
        for (k, v) in rows { console.out(k.padded(toLength: width + 2) + Console.escaped(v) + "\n") }
        return 0
    }

    /// Why a marked root's stream is partial, in the words of its `state` row.
    static func markSaid(_ role: StreamRole?) -> String {
        switch role {
        case .manifestToAsk?: "; its master is asked for again by the next prefetch (a media playlist of it changed on the origin, was evicted or dropped by verify --fix)"
        case .manifestUnconfirmed?: "; not confirmed: a run fetching its stream has not found its manifest unchanged on the origin yet (it is asking now, was stopped or killed before it asked, or the origin did not answer): the next prefetch asks for it again"
        default: ""
        }
    }
}
