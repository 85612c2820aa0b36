/// What to fetch of a DASH presentation, as pure values (Docs/dash.md), with the same choice
/// options as HLS (`HLSPlan.VariantChoice`, `--audio LANG`):
/// - video: per Period, among the video AdaptationSets players use (not trick-mode, no unknown
///   EssentialProperty), the Representation `variant` picks: `best` the highest `@bandwidth`
///   (ties: the taller), `worst`, `all`, `720p`, `<=720p`, or a bandwidth;
/// - audio: never video without audio (ExoPlayer #3976): per Period, the audio AdaptationSet in
///   `audio`'s language (an error when there is none), else the one whose Role is `main`, else
///   the first; its highest-bandwidth Representation;
/// - text: every text AdaptationSet's highest-bandwidth Representation (every language);
/// - `seconds`: per Representation (an audio segment's boundaries differ from the video's),
///   the init segment and every segment that starts before N, Period by Period.
public struct DASHPlan: Equatable, Sendable {
    public var variant: HLSPlan.VariantChoice
    public var audio: String?
    public var seconds: Double?

    public init(variant: HLSPlan.VariantChoice = .best, audio: String? = nil, seconds: Double? = nil) {
        self.variant = variant
        self.audio = audio
        self.seconds = seconds
    }

    public struct Chosen: Equatable, Sendable {
        public var period: Int
        public var set: Int
        public var representation: MPD.Representation
        public var kind: MPD.Kind
    }

    /// The Representations to fetch, Period by Period (those that start before `seconds`).
    public func choose(_ mpd: MPD) throws(HLSPlanError) -> [Chosen] {
        var out: [Chosen] = []
        for (p, period) in mpd.periods.enumerated() {
            if let seconds, period.start >= seconds, p > 0 { break }
            let usable = period.adaptationSets.enumerated().filter { !$0.element.isSkipped }
            let video = usable.filter { $0.element.kind == .video }.flatMap { a in a.element.representations.map { (a.offset, $0) } }
            if !video.isEmpty {
                for (set, rep) in try pickVideo(video) { out.append(Chosen(period: p, set: set, representation: rep, kind: .video)) }
            }
            let audioSets = usable.filter { $0.element.kind == .audio }
            if !audioSets.isEmpty {
                let chosen: (offset: Int, element: MPD.AdaptationSet)
                if let audio {
                    let primary = HLSPlan.primaryLanguage(audio)
                    guard let found = audioSets.first(where: { $0.element.language?.lowercased() == audio.lowercased() })
                            ?? audioSets.first(where: { $0.element.language.map(HLSPlan.primaryLanguage) == primary })
                            ?? audioSets.first(where: { $0.element.language.map { Self.iso639(HLSPlan.primaryLanguage($0)) } == Self.iso639(primary) }) else {
                        throw .noSuchAudio(language: audio, group: "Period \(p + 1)", available: audioSets.compactMap(\.element.language), dash: true)
                    }
                    chosen = found
                } else {
                    chosen = audioSets.first { $0.element.isMain } ?? audioSets[0]
                }
                if let rep = Self.highest(chosen.element.representations) { out.append(Chosen(period: p, set: chosen.offset, representation: rep, kind: .audio)) }
            }
            for t in usable where t.element.kind == .text {
                if let rep = Self.highest(t.element.representations) { out.append(Chosen(period: p, set: t.offset, representation: rep, kind: .text)) }
            }
        }
        return out
    }

    func pickVideo(_ reps: [(Int, MPD.Representation)]) throws(HLSPlanError) -> [(Int, MPD.Representation)] {
        func rank(_ r: MPD.Representation) -> (Int64, Int) { (r.bandwidth, r.height ?? 0) }
        func best(_ c: [(Int, MPD.Representation)]) -> [(Int, MPD.Representation)] {
            c.reduce(nil) { kept, v in kept.map { rank(v.1) > rank($0.1) ? v : $0 } ?? v }.map { [$0] } ?? []
        }
        let found: [(Int, MPD.Representation)]
        switch variant {
        case .all: return reps
        case .best: found = best(reps)
        case .worst: found = reps.reduce(nil) { kept, v in kept.map { rank(v.1) < rank($0.1) ? v : $0 } ?? v }.map { [$0] } ?? []
        case .height(let h): found = best(reps.filter { $0.1.height == h })
        case .atMostHeight(let h): found = best(reps.filter { ($0.1.height ?? Int.max) <= h })
        case .bandwidth(let b): found = reps.first { $0.1.bandwidth == Int64(b) }.map { [$0] } ?? []
        }
        guard !found.isEmpty else {
            throw .noSuchVariant(wanted: variant.description, available: reps.map { ($0.1.height.map { "\($0)p " } ?? "") + "\($0.1.bandwidth)" }, dash: true)
        }
        return found
    }

    static func highest(_ reps: [MPD.Representation]) -> MPD.Representation? {
        reps.reduce(nil) { kept, r in kept.map { r.bandwidth > $0.bandwidth ? r : $0 } ?? r }
    }

    /// ffmpeg writes ISO 639-2 (`eng`), players and users say `en`: the common ones meet.
    static func iso639(_ code: String) -> String {
        ["eng": "en", "fra": "fr", "fre": "fr", "deu": "de", "ger": "de", "spa": "es", "ita": "it", "por": "pt", "jpn": "ja",
         "zho": "zh", "chi": "zh", "rus": "ru", "ara": "ar", "nld": "nl", "dut": "nl", "kor": "ko", "hin": "hi"][code] ?? code
    }
}

extension MPD.AdaptationSet {
    /// A Role of `main` (urn:mpeg:dash:role:2011).
    var isMain: Bool { roles.contains("main") }
}
