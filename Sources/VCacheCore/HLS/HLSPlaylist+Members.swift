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
