import Testing
@testable import VCacheCore

/// `HLSPlaylist.sameUnderKeyRules`: the one rule prefetch's revalidation and serve's
/// `dropIfChanged` apply to a playlist answered in other bytes (they used to disagree on a comment).
@Suite struct HLSPlaylistSameStreamTests {
    static let base = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"i.mp4?token=1\"\n#EXTINF:2.0,\ns0.m4s?token=1\n#EXTINF:2.0,\ns1.m4s?token=1\n#EXT-X-ENDLIST\n"

    /// (what changed, the new playlist, the same stream?)
    static let cases: [(String, String, Bool)] = [
        ("nothing", base, true),
        ("CRLF line endings", base.replacingOccurrences(of: "\n", with: "\r\n"), true),
        ("blank lines and trailing spaces", base.replacingOccurrences(of: "#EXTINF", with: "\n#EXTINF").replacingOccurrences(of: "s1.m4s?token=1", with: "s1.m4s?token=1  "), true),
        ("a token the key rules strip", base.replacingOccurrences(of: "token=1", with: "token=2"), true),
        ("a comment added", base.replacingOccurrences(of: "#EXT-X-MAP", with: "# packaged 2026-11-29\n#EXT-X-MAP"), true),
        ("an EXTINF title", base.replacingOccurrences(of: "#EXTINF:2.0,\ns1", with: "#EXTINF:2.0,chapter 2\ns1"), true),
        ("a date tag", base.replacingOccurrences(of: "#EXTINF:2.0,\ns0", with: "#EXT-X-PROGRAM-DATE-TIME:2026-11-29T03:00:00Z\n#EXTINF:2.0,\ns0"), true),
        ("a duration", base.replacingOccurrences(of: "#EXTINF:2.0,\ns1", with: "#EXTINF:2.5,\ns1"), false),
        ("a segment renamed", base.replacingOccurrences(of: "s1.m4s", with: "t1.m4s"), false),
        ("another init section", base.replacingOccurrences(of: "i.mp4", with: "j.mp4"), false),
        ("a query parameter the rules keep", base.replacingOccurrences(of: "s0.m4s?token=1", with: "s0.m4s?token=1&v=2"), false),
        ("a tag added", base.replacingOccurrences(of: "#EXTINF:2.0,\ns1", with: "#EXT-X-DISCONTINUITY\n#EXTINF:2.0,\ns1"), false),
        ("a key added", base.replacingOccurrences(of: "#EXTINF:2.0,\ns0", with: "#EXT-X-KEY:METHOD=AES-128,URI=\"k.bin\"\n#EXTINF:2.0,\ns0"), false),
        ("a segment dropped", base.replacingOccurrences(of: "#EXTINF:2.0,\ns1.m4s?token=1\n", with: ""), false),
        ("not UTF-8", "#EXTM3U\n\u{FFFD}", false),
    ]

    @Test(arguments: cases)
    func theSameStreamOrNot(_ what: String, _ new: String, _ same: Bool) {
        let rules = CacheKeyRules(stripParameters: ["token"])
        var bytes = Array(new.utf8)
        if what == "not UTF-8" { bytes = [0x23, 0x45, 0xFF, 0xFE] }
        #expect(HLSPlaylist.sameUnderKeyRules(bytes, Array(Self.base.utf8), rules: rules) == same, "\(what)")
        // Both ways round, and prefetch's entry point says the same.
        #expect(HLSPlaylist.sameUnderKeyRules(Array(Self.base.utf8), bytes, rules: rules) == same, "\(what)")
        #expect(ManifestRevalidation.sameUnderKeyRules(bytes, Array(Self.base.utf8), mpd: false, rules: rules) == same, "\(what)")
    }

    /// A master's variant entry counts (a re-encode under the same URI), its comments do not.
    @Test func aMasterComparedByTheSameRule() {
        let rules = CacheKeyRules()
        let m = Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\nv.m3u8\n".utf8)
        #expect(HLSPlaylist.sameUnderKeyRules(Array("#EXTM3U\n## ladder 1\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=320x180\nv.m3u8\n".utf8), m, rules: rules))
        #expect(!HLSPlaylist.sameUnderKeyRules(Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000,RESOLUTION=640x360\nv.m3u8\n".utf8), m, rules: rules))
    }
}
