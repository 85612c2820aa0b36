/// What a URI of a playlist names, by the tag that names it (`HLSRewriter`): how a member whose
/// URL's own name does not say what it is gets named in a rewritten playlist (serve's proxy
/// URLs, an export's files). Players pick a format by the name: ffmpeg's HLS reader refuses a
/// segment whose extension does not fit what it detects (`allowed_extensions`), so a TS segment
/// at `/segment/3` must not be called `3.mp4`.
public enum HLSURIContext: Sendable, Equatable {
    /// A variant's, a rendition's or an I-frame media playlist.
    case playlist
    /// A media segment; `fragmented` when an EXT-X-MAP is in force (fMP4), else MPEG-TS or
    /// packed audio or WebVTT; `encrypted` under an AES-128 key (its bytes tell nothing).
    case segment(fragmented: Bool, encrypted: Bool = false)
    /// An EXT-X-MAP.
    case initSection(encrypted: Bool = false)
    /// An EXT-X-KEY or EXT-X-SESSION-KEY.
    case key
    /// Any other tag's URI: named as any file is.
    case other

    /// Extensions that already say what a member is: its own name is kept.
    public static let tellingExtensions: Set<String> = [
        "ts", "m2t", "m2ts", "mts", "mpg", "mpeg", "mpegts", "m4s", "mp4", "m4v", "m4a", "mov", "cmfv", "cmfa", "cmft",
        "aac", "ac3", "ec3", "eac3", "mp3", "mp2", "vtt", "webvtt", "key", "m3u8", "m3u",
    ]

    /// The extension for a member whose own name says nothing: by its first bytes when they are
    /// known and tell (asked only for a segment or an init section) (`HLSSegmentCheck.kind`; ciphertext tells nothing), else by the tag. Nil
    /// for `other`.
    public func fileExtension(firstBytes: () -> [UInt8]?) -> String? {
        switch self {
        case .other: return nil
        case .playlist: return "m3u8"
        case .key: return "key"
        case .initSection(let encrypted), .segment(_, let encrypted):
            let isInit: Bool = if case .initSection = self { true } else { false }
            if !encrypted, let b = firstBytes(), let kind = HLSSegmentCheck.kind(firstBytes: b) {
                switch kind {
                case .mpegTS: return "ts"
                case .fragmentedMP4: return isInit ? "mp4" : "m4s"
                case .webVTT: return "vtt"
                case .packedAudio:
                    // An ADTS frame (layer bits 00) or an ID3 tag (HLS packs AAC behind one) is AAC;
                    // another MPEG audio frame is MP3.
                    return b.count >= 2 && b[0] == 0xFF && b[1] & 0x06 != 0 ? "mp3" : "aac"
                }
            }
            if case .segment(let fragmented, _) = self { return fragmented ? "m4s" : "ts" }
            return "mp4"
        }
    }
}
