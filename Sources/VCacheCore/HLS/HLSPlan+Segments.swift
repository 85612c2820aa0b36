extension HLSPlan {
    /// Half a millisecond: EXTINF values are rounded, so a sum a hair short of `seconds` is there.
    static let durationSlack = 0.0005

    /// What one media playlist needs fetched.
    public struct MediaFetch: Equatable, Sendable {
        public var playlist: String
        /// No EXT-X-ENDLIST: these are the segments present now; the playlist must be fetched
        /// again for more (RFC 8216 §6.3.4).
        public var isLive: Bool
        /// In playlist order.
        public var segments: [HLSMediaPlaylist.Segment]
        /// The sum of their EXTINF durations.
        public var seconds: Double
        /// They are every segment of the playlist (as read).
        public var isWholePlaylist: Bool
        /// The init sections (EXT-X-MAP) those segments need, each once.
        public var initSections: [HLSMediaPlaylist.Map]
        /// The keys in force for them that vcache can fetch (`HLSKey.isFetchable`), each once.
        public var keys: [HLSKey]
        /// Keys in force it cannot fetch (DRM KEYFORMATs, non-http URIs): no offline play.
        public var unfetchableKeys: [HLSKey]
        /// All of it as requests: each URL once, a whole resource or its byte ranges with
        /// adjacent and overlapping ranges merged; URLs in order of first need.
        public var requests: [Request]
    }

    /// The segments of `playlist` that `seconds` needs (all when nil; at least one when there is
    /// one), with their init sections and keys.
    public func fetches(for playlist: HLSMediaPlaylist) -> MediaFetch {
        var chosen: [HLSMediaPlaylist.Segment] = []
        var sum = 0.0
        for s in playlist.segments {
            if let seconds, !chosen.isEmpty, sum + Self.durationSlack >= seconds { break }
            chosen.append(s)
            sum += s.duration
        }
        var maps: [HLSMediaPlaylist.Map] = []
        var keys: [HLSKey] = []
        var unfetchable: [HLSKey] = []
        var wanted: [Request] = []
        for s in chosen {
            if let m = s.fetchedMap, !maps.contains(m) {
                maps.append(m)
                wanted.append(Request(url: m.uri, range: m.byteRange))
            }
            for k in s.keys where !keys.contains(k) && !unfetchable.contains(k) {
                if k.isFetchable, let uri = k.uri {
                    keys.append(k)
                    wanted.append(Request(url: uri))
                } else {
                    unfetchable.append(k)
                }
            }
            wanted.append(Request(url: s.uri, range: s.byteRange))
        }
        return MediaFetch(playlist: playlist.url, isLive: playlist.isLive, segments: chosen, seconds: sum,
                          isWholePlaylist: chosen.count == playlist.segments.count, initSections: maps, keys: keys,
                          unfetchableKeys: unfetchable, requests: Self.merged(wanted))
    }

    /// Each URL once, in order of first appearance: whole when any request wants it whole, else
    /// its ranges sorted, with adjacent and overlapping ones merged (`RangeSet`).
    public static func merged(_ requests: [Request]) -> [Request] {
        var order: [String] = []
        var whole = Set<String>()
        var ranges: [String: RangeSet] = [:]
        for r in requests {
            if ranges[r.url] == nil && !whole.contains(r.url) { order.append(r.url) }
            if let range = r.range, !whole.contains(r.url) {
                ranges[r.url, default: RangeSet()].insert(range)
            } else {
                whole.insert(r.url)
                ranges[r.url] = nil
            }
        }
        return order.flatMap { url -> [Request] in
            if whole.contains(url) { return [Request(url: url)] }
            return (ranges[url]?.ranges ?? []).map { Request(url: url, range: $0) }
        }
    }
}
