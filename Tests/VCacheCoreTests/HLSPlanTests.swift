import Testing
@testable import VCacheCore

/// What `HLSPlan` fetches: the variant and rendition choice (RFC 8216 §4.3.4), then segments,
/// init sections and keys for N seconds of each media playlist (§4.3.2).
@Suite struct HLSPlanTests {
    static let base = "https://cdn.example/v/master.m3u8"

    static let master = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en-US",NAME="English",DEFAULT=NO,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="fr",NAME="Français",DEFAULT=YES,URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="nodefault",LANGUAGE="de",NAME="Deutsch",URI="audio/de.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="nodefault",LANGUAGE="it",NAME="Italiano",URI="audio/it.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="muxed",LANGUAGE="en",NAME="Main",DEFAULT=YES
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",DEFAULT=YES,URI="subs/en.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Français",URI="subs/fr.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360,AUDIO="aac"
        360p.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,AVERAGE-BANDWIDTH=2000000,RESOLUTION=1280x720,AUDIO="aac"
        720p-a.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,AVERAGE-BANDWIDTH=2400000,RESOLUTION=1280x720,AUDIO="aac",SUBTITLES="subs"
        720p-b.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,AUDIO="nodefault"
        1080p.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.2",AUDIO="muxed"
        audio-only.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,URI="iframes.m3u8"
        """

    struct ChoiceCase: CustomTestStringConvertible, Sendable {
        var name: String
        var plan: HLSPlan
        /// Playlist URLs relative to https://cdn.example/v/, or the error.
        var expected: Result<[String], HLSPlanError>
        var testDescription: String { name }
    }

    static let choiceCases: [ChoiceCase] = [
        ChoiceCase(name: "best: the highest BANDWIDTH; §4.3.4.2.1 its AUDIO group has no DEFAULT=YES: the first rendition",
                   plan: HLSPlan(), expected: .success(["1080p.m3u8", "audio/de.m3u8"])),
        ChoiceCase(name: "§4.3.4.2.1 the AUDIO group's DEFAULT=YES rendition", plan: HLSPlan(variant: .height(360)),
                   expected: .success(["360p.m3u8", "audio/fr.m3u8"])),
        ChoiceCase(name: "worst: the lowest BANDWIDTH; an audio rendition without URI is in the variant",
                   plan: HLSPlan(variant: .worst), expected: .success(["audio-only.m3u8"])),
        ChoiceCase(name: "720p: equal BANDWIDTH, the higher AVERAGE-BANDWIDTH; §4.3.4.1 its DEFAULT=YES subtitles",
                   plan: HLSPlan(variant: .height(720)), expected: .success(["720p-b.m3u8", "audio/fr.m3u8", "subs/en.m3u8"])),
        ChoiceCase(name: "<=720p: the best at most 720 high", plan: HLSPlan(variant: .atMostHeight(720)),
                   expected: .success(["720p-b.m3u8", "audio/fr.m3u8", "subs/en.m3u8"])),
        ChoiceCase(name: "<=480p: the best at most 480 high", plan: HLSPlan(variant: .atMostHeight(480)),
                   expected: .success(["360p.m3u8", "audio/fr.m3u8"])),
        ChoiceCase(name: "a BANDWIDTH number: the variant declaring exactly it", plan: HLSPlan(variant: .bandwidth(1_280_000)),
                   expected: .success(["360p.m3u8", "audio/fr.m3u8"])),
        ChoiceCase(name: "audio language: the rendition in that language, not the default", plan: HLSPlan(variant: .height(360), audio: "en-us"),
                   expected: .success(["360p.m3u8", "audio/en.m3u8"])),
        ChoiceCase(name: "audio language: the primary subtag matches (en asks for en-US)", plan: HLSPlan(variant: .height(360), audio: "en"),
                   expected: .success(["360p.m3u8", "audio/en.m3u8"])),
        ChoiceCase(name: "audio language the group lacks: an error naming what it has", plan: HLSPlan(variant: .height(360), audio: "pt"),
                   expected: .failure(.noSuchAudio(language: "pt", group: "aac", available: ["en-US", "fr"]))),
        ChoiceCase(name: "a height no variant has: an error naming the variants", plan: HLSPlan(variant: .height(480)),
                   expected: .failure(.noSuchVariant(wanted: "480p", available: ["360p 1280000", "720p 2560000", "720p 2560000", "1080p 5000000", "64000"]))),
        ChoiceCase(name: "all: every variant, each needed rendition once; §4.3.4.3 never the I-frame playlists", plan: HLSPlan(variant: .all),
                   expected: .success(["360p.m3u8", "720p-a.m3u8", "720p-b.m3u8", "1080p.m3u8", "audio-only.m3u8",
                                       "audio/fr.m3u8", "subs/en.m3u8", "audio/de.m3u8"])),
    ]

    @Test(arguments: choiceCases) func choosesPlaylists(_ c: ChoiceCase) throws {
        let playlist = try HLSPlaylist.parse(text: Self.master, url: Self.base)
        let got = Result { () throws(HLSPlanError) -> [String] in
            try c.plan.playlists(for: playlist).urls.map { String($0.dropFirst("https://cdn.example/v/".count)) }
        }
        #expect(got == c.expected)
    }

    @Test func aMediaPlaylistIsItsOwnPlan() throws {
        let p = try HLSPlaylist.parse(text: "#EXTM3U\n#EXTINF:4,\na.ts\n", url: "https://h/x/p.m3u8")
        #expect(try HLSPlan(variant: .height(1080)).playlists(for: p).urls == ["https://h/x/p.m3u8"])
    }

    @Test func aMasterWithoutVariantsIsAnError() throws {
        let p = try HLSPlaylist.parse(text: "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"a\",URI=\"a.m3u8\"\n", url: Self.base)
        #expect(throws: HLSPlanError.noVariants) { try HLSPlan().playlists(for: p) }
    }

    @Test(arguments: [
        ("best", HLSPlan.VariantChoice.best), ("WORST", .worst), ("all", .all), ("720p", .height(720)), ("720P", .height(720)),
        ("<=720p", .atMostHeight(720)), ("2560000", .bandwidth(2_560_000)),
    ] as [(String, HLSPlan.VariantChoice)])
    func readsVariantArguments(_ text: String, _ expected: HLSPlan.VariantChoice) {
        #expect(HLSPlan.VariantChoice(argument: text) == expected)
    }

    @Test(arguments: ["", "p", "<=p", "720px", "<720p", "-1", "99999999999999999999", "high", "0", "0p", "<=0p", " 720p"])
    func refusesOtherVariantArguments(_ text: String) {
        #expect(HLSPlan.VariantChoice(argument: text) == nil)
    }
}
