#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension HLSPlaylist {
    /// What this playlist names, as members of a stream (`StreamRole`), each absolute URL once in
    /// order of appearance: a master's variant, rendition and I-frame playlists; a media
    /// playlist's segments, init sections and the keys vcache can fetch.
    public var members: [(url: String, role: StreamRole)] {
        var out: [(url: String, role: StreamRole)] = []
        var seen = Set<String>()
        func add(_ url: String, _ role: StreamRole) {
            if seen.insert(url).inserted { out.append((url, role)) }
        }
        switch self {
        case .master(let m):
            for v in m.variants { add(v.uri, .playlist) }
            for r in m.renditions { if let u = r.uri { add(u, .playlist) } }
            for i in m.iFrameStreams { add(i.uri, .playlist) }
        case .media(let m):
            for s in m.segments {
                if let map = s.fetchedMap { add(map.uri, .initSection) }
                for k in s.keys where k.isFetchable { if let u = k.uri { add(u, .key) } }
                add(s.uri, .segment)
            }
        }
        return out
    }
}

extension HLSMediaPlaylist {
    /// What the bytes of the resources this playlist names must be, seen through `key` (the
    /// cache's key rules): per segment its resource, byte range, duration and sequence, its init
    /// section and the keys in force (method, resource, IV, format). Two playlists of equal shape
    /// describe the same media at the same cache entries, whatever else differs between them:
    /// a token the key rules strip, a comment, an EXTINF title, a date tag, line endings.
    public func shape(key: (String) -> String) -> [SegmentShape] {
        segments.map { s in
            SegmentShape(resource: key(s.uri), byteRange: s.byteRange, duration: s.duration, sequence: s.sequence,
                         map: s.map.map { SegmentShape.Part(resource: key($0.uri), byteRange: $0.byteRange) },
                         keys: s.keys.map { SegmentShape.Key(method: $0.method, resource: $0.uri.map(key), iv: $0.iv, keyFormat: $0.keyFormat) })
        }
    }

    /// One segment as `shape` sees it.
    public struct SegmentShape: Hashable, Sendable {
        public struct Part: Hashable, Sendable {
            public var resource: String
            public var byteRange: ByteRange?
        }
        public struct Key: Hashable, Sendable {
            public var method: HLSKey.Method
            public var resource: String?
            public var iv: String?
            public var keyFormat: String
        }
        public var resource: String
        public var byteRange: ByteRange?
        public var duration: Double
        public var sequence: Int
        public var map: Part?
        public var keys: [Key]
    }
}
