/// A media playlist (RFC 8216 §4.3.3): its segments in order, each with the key and init
/// section in force for it, every URI resolved against the playlist's final URL.
public struct HLSMediaPlaylist: Equatable, Sendable {
    /// An `EXT-X-MAP` (§4.3.2.5): a Media Initialization Section, in force until the next one.
    public struct Map: Hashable, Sendable {
        public var uri: String
        /// Nil: the whole resource.
        public var byteRange: ByteRange?

        public init(uri: String, byteRange: ByteRange? = nil) {
            self.uri = uri
            self.byteRange = byteRange
        }

        /// Written in the playlist itself (`URI="data:..."`, RFC 2397): nothing to fetch, cache
        /// or export; the playlist carries it.
        public var isInline: Bool { HLSURI.Parts(uri).scheme?.lowercased() == "data" }
    }

    public struct Segment: Equatable, Sendable {
        /// Resolved against the playlist's final URL.
        public var uri: String
        /// As written on its line.
        public var rawURI: String
        /// The 1-based line of the URI.
        public var line: Int
        /// Its media sequence number (§4.3.3.2: EXT-X-MEDIA-SEQUENCE plus its index).
        public var sequence: Int
        /// EXTINF, in seconds.
        public var duration: Double
        public var title: String
        /// EXT-X-BYTERANGE with the implicit offset filled in; nil: the whole resource.
        public var byteRange: ByteRange?
        /// The keys in force (several only for several KEYFORMATs); empty: not encrypted.
        public var keys: [HLSKey]
        public var map: Map?
        /// An EXT-X-DISCONTINUITY precedes it.
        public var discontinuity: Bool
        public var discontinuitySequence: Int

        /// Its init section when it is a resource to fetch (not an inline `data:` one).
        public var fetchedMap: Map? { map.flatMap { $0.isInline ? nil : $0 } }
    }

    public enum PlaylistType: Hashable, Sendable {
        case vod, event
        case other(String)
    }

    /// The final URL (after redirects) every URI was resolved against.
    public var url: String
    public var version: Int?
    /// EXT-X-TARGETDURATION in seconds (an integer by the RFC; a decimal is tolerated).
    public var targetDuration: Double?
    public var mediaSequence: Int
    public var discontinuitySequence: Int
    public var playlistType: PlaylistType?
    public var hasEndList: Bool
    public var iFramesOnly: Bool
    public var segments: [Segment]
    /// Tags not modelled here (EXT-X-PROGRAM-DATE-TIME, EXT-X-PART, EXT-X-DEFINE, unknown ones),
    /// in order.
    public var otherTags: [HLSPlaylist.Tag]

    /// No EXT-X-ENDLIST: the playlist changes and must be fetched again (§4.3.3.4, §6.3.4).
    public var isLive: Bool { !hasEndList }

    /// The sum of the EXTINF durations, in seconds.
    public var duration: Double { segments.reduce(0) { $0 + $1.duration } }
}
