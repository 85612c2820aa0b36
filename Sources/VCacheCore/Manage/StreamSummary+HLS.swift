#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension StreamInventory {
    /// An HLS stream's media playlists as its cached root names them (a master's variants and
    /// renditions; a lone media playlist itself), each with the segments and seconds cached.
    func hlsPlaylists(_ s: StreamSummary, _ byKey: [CacheKey: CacheEntry]) -> [StreamSummary.Playlist] {
        guard let root = s.rootEntry, let playlist = parse(root) else { return [] }
        switch playlist {
        case .media(let media):
            var p = StreamSummary.Playlist(url: root.latestURL, key: root.key, kind: "playlist", label: "", cached: true)
            count(media, into: &p, byKey)
            return [p]
        case .master(let master):
            var out: [StreamSummary.Playlist] = []
            var seen = Set<String>()
            func add(_ url: String, kind: String, label: String) {
                guard seen.insert(url).inserted else { return }
                let key = keyRules.key(for: url)
                var p = StreamSummary.Playlist(url: url, key: key, kind: kind, label: label, cached: false)
                if let e = byKey[key] ?? ((try? store.catalog.entry(key: key)) ?? nil), e.isComplete, case .media(let media)? = parse(e) {
                    p.cached = true
                    count(media, into: &p, byKey)
                }
                out.append(p)
            }
            for v in master.variants {
                var label = "\(v.bandwidth / 1000) kbit/s"
                if let r = v.resolution { label += ", \(r)" }
                if let a = v.audio { label += ", audio \"\(a)\"" }
                add(v.uri, kind: "variant", label: label)
            }
            for r in master.renditions {
                guard let uri = r.uri else { continue }
                let kind = switch r.type {
                case .audio: "audio"
                case .video: "video"
                case .subtitles: "subtitles"
                case .closedCaptions: "closed-captions"
                case .other(let t): t.lowercased()
                }
                add(uri, kind: kind, label: "\"\(r.name)\" group \"\(r.groupID)\"" + (r.language.map { ", \($0)" } ?? ""))
            }
            return out
        }
    }

    /// A complete playlist entry's cached text, parsed.
    func parse(_ e: CacheEntry) -> HLSPlaylist? {
        store.cachedPlaylist(e, keyRules: keyRules)?.playlist
    }

    /// The entries of every member a media playlist names (segments, init sections, keys), by
    /// URL: `byKey`'s, the rest in one read of the catalog (a member cached outside the stream's
    /// record, or not at all). One read, not one a member: a playlist of 150,000 segments was as
    /// many transactions. A URL is keyed once however often it is named (an init section).
    private func memberEntries(_ media: HLSMediaPlaylist, _ byKey: [CacheKey: CacheEntry]) -> [String: CacheEntry?] {
        var keyOf: [String: CacheKey] = [:]
        func note(_ url: String) { if keyOf[url] == nil { keyOf[url] = keyRules.key(for: url) } }
        for seg in media.segments {
            note(seg.uri)
            if let m = seg.fetchedMap { note(m.uri) }
            for k in seg.keys where k.isFetchable { if let u = k.uri { note(u) } }
        }
        let unknown = Set(keyOf.values.filter { byKey[$0] == nil })
        // A read that fails counts those members as not held, as each failed read did before.
        let read = unknown.isEmpty ? [:] : ((try? store.catalog.entries(keys: Array(unknown))) ?? [:])
        return keyOf.mapValues { byKey[$0] ?? read[$0] }
    }

    /// Whether a member's bytes are held: its range, or the whole resource.
    static func holds(_ url: String, _ range: ByteRange?, _ entries: [String: CacheEntry?]) -> Bool {
        guard let found = entries[url], let e = found else { return false }
        if let range { return e.ranges.contains(range) }
        return e.isComplete
    }

    private func count(_ media: HLSMediaPlaylist, into p: inout StreamSummary.Playlist, _ byKey: [CacheKey: CacheEntry]) {
        let entries = memberEntries(media, byKey)
        func holds(_ url: String, _ range: ByteRange?) -> Bool { Self.holds(url, range, entries) }
        var leading = true
        for seg in media.segments {
            p.segments += 1
            p.seconds += seg.duration
            // A segment is cached when its own bytes are (as `info` counts its segment members);
            // it plays when its init section and key are too.
            let cached = holds(seg.uri, seg.byteRange)
            var plays = cached
            if let m = seg.fetchedMap, !holds(m.uri, m.byteRange) { plays = false }
            for k in seg.keys where k.isFetchable { if let u = k.uri, !holds(u, nil) { plays = false } }
            if cached { p.segmentsCached += 1 }
            if plays { p.segmentsPlaying += 1 }
            if !plays { leading = false }
            if plays && leading { p.secondsCached += seg.duration }
        }
    }
}
