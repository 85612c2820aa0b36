/// A master (multivariant) playlist (RFC 8216 §4.3.4): variants, renditions and I-frame
/// playlists, every URI resolved against the playlist's final URL.
public struct HLSMasterPlaylist: Equatable, Sendable {
    public struct Resolution: Hashable, Sendable, CustomStringConvertible {
        public var width: Int
        public var height: Int

        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }

        public var description: String { "\(width)x\(height)" }
    }

    /// An `EXT-X-STREAM-INF` and the URI on the line after it (§4.3.4.2).
    public struct Variant: Equatable, Sendable {
        public var uri: String
        public var rawURI: String
        /// The line of the EXT-X-STREAM-INF tag.
        public var line: Int
        /// Bits per second (REQUIRED).
        public var bandwidth: Int
        public var averageBandwidth: Int?
        public var resolution: Resolution?
        public var codecs: String?
        public var frameRate: Double?
        /// GROUP-IDs of the renditions that go with it.
        public var audio: String?
        public var video: String?
        public var subtitles: String?
        public var closedCaptions: String?
    }

    public enum MediaType: Hashable, Sendable {
        case audio, video, subtitles, closedCaptions
        case other(String)
    }

    /// An `EXT-X-MEDIA` (§4.3.4.1).
    public struct Rendition: Equatable, Sendable {
        public var type: MediaType
        public var groupID: String
        public var name: String
        public var language: String?
        public var isDefault: Bool
        public var autoselect: Bool
        /// Nil: the media is inside the variant's own stream (§4.3.4.2.1).
        public var uri: String?
        public var line: Int
    }

    /// An `EXT-X-I-FRAME-STREAM-INF` (§4.3.4.3).
    public struct IFrameStream: Equatable, Sendable {
        public var uri: String
        public var line: Int
        public var bandwidth: Int
        public var resolution: Resolution?
        public var codecs: String?
    }

    public var url: String
    public var version: Int?
    public var variants: [Variant]
    public var renditions: [Rendition]
    public var iFrameStreams: [IFrameStream]
    public var sessionKeys: [HLSKey]
    /// Tags not modelled here (EXT-X-SESSION-DATA, EXT-X-START, EXT-X-DEFINE, unknown ones), in order.
    public var otherTags: [HLSPlaylist.Tag]
}
