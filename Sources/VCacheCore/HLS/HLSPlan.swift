/// What to fetch for an HLS stream, as pure values, in two steps (the media playlists must be
/// fetched in between): `playlists(for:)` says which media playlists a master's choice needs,
/// `fetches(for:)` says which segments, init sections and keys of one media playlist.
///
/// The default choice, documented in Docs/hls.md:
/// - `variant`: `.best` is the variant with the highest BANDWIDTH (ties: the higher
///   AVERAGE-BANDWIDTH, then the taller RESOLUTION, then the first listed). See `VariantChoice`.
/// - `audio`: for each chosen variant's AUDIO group, the rendition in `audio`'s language when
///   given (an error when the group has none), else the DEFAULT=YES one, else the first listed.
///   A rendition without URI is inside the variant: nothing more to fetch (RFC 8216 §4.3.4.2.1).
/// - SUBTITLES and VIDEO groups: their DEFAULT=YES rendition when it has a URI. CLOSED-CAPTIONS
///   have no URI. I-frame playlists are never fetched.
/// - `seconds`: per media playlist (an audio rendition's boundaries differ from the video's),
///   the first segments whose EXTINF durations add up to at least that; nil for all of them.
public struct HLSPlan: Equatable, Sendable {
    public var variant: VariantChoice
    /// A language (RFC 5646 tag: `en`, `pt-BR`) for the audio rendition; nil for the default.
    public var audio: String?
    /// Seconds from the start of each media playlist; nil for the whole stream.
    public var seconds: Double?

    public init(variant: VariantChoice = .best, audio: String? = nil, seconds: Double? = nil) {
        self.variant = variant
        self.audio = audio
        self.seconds = seconds
    }

    /// The media playlists to fetch next, with the variants and renditions they come from.
    public struct Playlists: Equatable, Sendable {
        public var variants: [HLSMasterPlaylist.Variant]
        /// Chosen renditions that have a URI.
        public var renditions: [HLSMasterPlaylist.Rendition]
        /// Their URLs, each once, variants first.
        public var urls: [String]
    }

    /// For a media playlist: itself. For a master: the chosen variants and their renditions.
    public func playlists(for playlist: HLSPlaylist) throws(HLSPlanError) -> Playlists {
        switch playlist {
        case .media(let m):
            return Playlists(variants: [], renditions: [], urls: [m.url])
        case .master(let m):
            let variants = try variant.choose(from: m.variants)
            var renditions: [HLSMasterPlaylist.Rendition] = []
            for v in variants {
                if let group = v.audio, let r = try audioRendition(in: group, of: m) { renditions.append(r) }
                for (group, type) in [(v.subtitles, HLSMasterPlaylist.MediaType.subtitles), (v.video, .video)] {
                    guard let group else { continue }
                    if let r = m.renditions.first(where: { $0.type == type && $0.groupID == group && $0.isDefault }) { renditions.append(r) }
                }
            }
            renditions = renditions.filter { $0.uri != nil }
            var seen = Set<String>()
            let urls = (variants.map(\.uri) + renditions.compactMap(\.uri)).filter { seen.insert($0).inserted }
            var seenLines = Set<Int>()
            return Playlists(variants: variants, renditions: renditions.filter { seenLines.insert($0.line).inserted }, urls: urls)
        }
    }

    /// The rendition of AUDIO group `group` to play; nil when the playlist lists none.
    func audioRendition(in group: String, of master: HLSMasterPlaylist) throws(HLSPlanError) -> HLSMasterPlaylist.Rendition? {
        let members = master.renditions.filter { $0.type == .audio && $0.groupID == group }
        guard let audio else { return members.first(where: \.isDefault) ?? members.first }
        if let exact = members.first(where: { $0.language?.lowercased() == audio.lowercased() }) { return exact }
        // `en` asks for `en-US` and `en-US` for `en`: the primary language subtag decides.
        let primary = Self.primaryLanguage(audio)
        if let near = members.first(where: { $0.language.map(Self.primaryLanguage) == primary }) { return near }
        throw .noSuchAudio(language: audio, group: group, available: members.compactMap(\.language))
    }

    static func primaryLanguage(_ tag: String) -> String {
        String(tag.split(separator: "-", maxSplits: 1).first ?? "").lowercased()
    }

    /// One request: a whole resource (`range` nil) or a byte range of it.
    public struct Request: Hashable, Sendable, CustomStringConvertible {
        public var url: String
        public var range: ByteRange?

        public init(url: String, range: ByteRange? = nil) {
            self.url = url
            self.range = range
        }

        public var description: String { range.map { "\(url) bytes=\($0.httpSpec)" } ?? url }
    }
}
