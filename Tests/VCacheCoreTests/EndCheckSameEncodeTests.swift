import Testing
@testable import VCacheCore

/// `ManifestRevalidation.sameEncode`, the one rule of the start of a run, a new choice and the
/// end-of-run check (hostile probes h9b F6, h10a F1-F12): member URLs are compared as their keys
/// under the key rules, so a query difference the rules keep (a new token the rules do not
/// strip, a cache-busting `?v=2`) is another encode and one they strip is not; an MPD's
/// `publishTime` and the query of a URL that names no member (h10a F10) are put aside; a changed
/// path, duration, segment list, Representation set, bandwidth or codec is another encode.
@Suite struct EndCheckSameEncodeTests {
    static func mpd(query: String = "", publishTime: String? = nil, duration: String = "PT4S", media: String = "v/$Number$.m4s",
                    bandwidth: Int = 100000, codecs: String = "avc1.42c00d", extra: String = "", segment: Int = 2, head: String = "") -> [UInt8] {
        let published = publishTime.map { " publishTime=\"\($0)\"" } ?? ""
        return Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"\(published) mediaPresentationDuration="\(duration)" minBufferTime="PT2S">\(head)
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="v/init.mp4\(query)" media="\(media)\(query)" duration="\(segment)" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="\(bandwidth)" width="320" height="180" codecs="\(codecs)"/>\(extra)
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    static func media(_ uris: [String], duration: String = "2.000", head: String = "") -> [UInt8] {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n" + head
        for u in uris { text += "#EXTINF:\(duration),\n\(u)\n" }
        return Array((text + "#EXT-X-ENDLIST\n").utf8)
    }

    static let read = mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z")
    static let readPlaylist = media(["0.ts?token=aaa", "1.ts?token=aaa"])

    static let strip = CacheKeyRules(stripParameters: ["token"])
    static func info(_ q: String) -> String {
        "\n  <ProgramInformation moreInformationURL=\"http://o/info.html?\(q)\"/>\n  <Location>http://o/s/m.mpd?\(q)</Location>"
    }

    static let cases: [(String, [UInt8], [UInt8], Bool, CacheKeyRules, Bool)] = [
        // (what, read, answer, mpd, key rules, same encode)
        ("the same bytes", read, read, true, CacheKeyRules(), true),
        ("a new token the key rules keep", read, mpd(query: "?token=bbb", publishTime: "2026-01-01T00:00:00Z"), true, CacheKeyRules(), false),
        ("a new token the key rules strip", read, mpd(query: "?token=bbb", publishTime: "2026-01-01T00:00:00Z"), true, strip, true),
        ("a new token, key-ignore-query", read, mpd(query: "?token=bbb", publishTime: "2026-01-01T00:00:00Z"), true, CacheKeyRules(ignoreQuery: true), true),
        ("a cache-busting ?v=2", mpd(query: "?v=1"), mpd(query: "?v=2"), true, strip, false),
        ("a new token and ?v=2, token stripped", mpd(query: "?v=1&amp;token=a"), mpd(query: "?v=2&amp;token=b"), true, strip, false),
        ("a new publishTime", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:09Z"), true, CacheKeyRules(), true),
        ("both, token stripped", read, mpd(query: "?token=ccc", publishTime: "2026-02-01T00:00:00Z"), true, strip, true),
        ("both, token kept", read, mpd(query: "?token=ccc", publishTime: "2026-02-01T00:00:00Z"), true, CacheKeyRules(), false),
        ("no token now, token stripped", read, mpd(publishTime: "2026-01-01T00:00:00Z"), true, strip, true),
        ("a query of URLs naming no member", mpd(head: info("t=1")), mpd(head: info("t=2")), true, CacheKeyRules(), true),
        ("another URL naming no member", mpd(head: info("t=1")), mpd(head: "\n  <ProgramInformation moreInformationURL=\"http://o/other.html?t=1\"/>\n  <Location>http://o/s/m.mpd?t=1</Location>"),
         true, CacheKeyRules(), false),
        ("another path", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", media: "v2/$Number$.m4s"), true, strip, false),
        ("another duration", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", duration: "PT6S"), true, strip, false),
        ("another segment list", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", segment: 4), true, strip, false),
        ("another bandwidth", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", bandwidth: 110000), true, strip, false),
        ("another codec", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", codecs: "avc1.64001f"), true, strip, false),
        ("a Representation more", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z",
                                            extra: "\n      <Representation id=\"w\" bandwidth=\"300000\" width=\"640\" height=\"360\" codecs=\"avc1.42c00d\"/>"), true, strip, false),
        ("a playlist's new tokens the key rules keep", readPlaylist, media(["0.ts?token=bbb", "1.ts?token=bbb"]), false, CacheKeyRules(), false),
        ("a playlist's new tokens the key rules strip", readPlaylist, media(["0.ts?token=bbb", "1.ts?token=bbb"]), false, strip, true),
        ("a playlist's session data query", media(["0.ts"], head: "#EXT-X-SESSION-DATA:DATA-ID=\"a\",URI=\"http://o/d.json?s=1\"\n"),
         media(["0.ts"], head: "#EXT-X-SESSION-DATA:DATA-ID=\"a\",URI=\"http://o/d.json?s=2\"\n"), false, CacheKeyRules(), true),
        ("a playlist's other session data", media(["0.ts"], head: "#EXT-X-SESSION-DATA:DATA-ID=\"a\",URI=\"http://o/d.json?s=1\"\n"),
         media(["0.ts"], head: "#EXT-X-SESSION-DATA:DATA-ID=\"a\",URI=\"http://o/e.json?s=1\"\n"), false, CacheKeyRules(), false),
        ("a playlist's ?v=2", media(["0.ts?v=1", "1.ts?v=1"]), media(["0.ts?v=2", "1.ts?v=2"]), false, strip, false),
        ("a playlist's other segment", readPlaylist, media(["0.ts?token=aaa", "1b.ts?token=aaa"]), false, strip, false),
        ("a playlist's other duration", readPlaylist, media(["0.ts?token=aaa", "1.ts?token=aaa"], duration: "2.500"), false, strip, false),
        ("a playlist's segment more", readPlaylist, media(["0.ts?token=aaa", "1.ts?token=aaa", "2.ts?token=aaa"]), false, strip, false),
    ]

    @Test(arguments: cases.indices)
    func sameEncode(_ i: Int) {
        let (what, read, answer, mpd, rules, same) = Self.cases[i]
        #expect(ManifestRevalidation.sameEncode(answer, read, mpd: mpd, rules: rules) == same, "\(what)")
    }

    /// Another encode only by query parameters of member URLs the key rules keep: their names
    /// (what the error tells the user to strip); none when anything else differs too.
    @Test
    func keptQueryParametersNameWhatTheKeyRulesKeep() {
        let none = CacheKeyRules()
        let (a, b) = ("a1b2c3d4e5", "f6a7b8c9d0")  // token-like: 8 characters or more
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?v=2&amp;t=\(b)"), Self.mpd(query: "?v=2&amp;t=\(a)"), mpd: true, rules: none) == ["t"])
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?s=\(b)&amp;t=\(b)"), Self.mpd(query: "?s=\(a)&amp;t=\(a)"), mpd: true, rules: none) == ["s", "t"])
        // A short value that differs is a version (h10c F5): no hint, even beside a token.
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?v=2&amp;t=\(b)"), Self.mpd(query: "?v=1&amp;t=\(a)"), mpd: true, rules: none).isEmpty)
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?v=2&amp;t=\(b)"), Self.mpd(query: "?v=1&amp;t=\(a)"), mpd: true, rules: CacheKeyRules(stripParameters: ["t"])).isEmpty)
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?t=b"), Self.mpd(query: "?t=a"), mpd: true, rules: none).isEmpty)
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?t=\(b)", bandwidth: 1), Self.mpd(query: "?t=\(a)"), mpd: true, rules: none).isEmpty)
        #expect(ManifestRevalidation.keptQueryParameters(Self.mpd(query: "?token=\(b)"), Self.mpd(query: "?token=\(a)"), mpd: true, rules: Self.strip).isEmpty)
        #expect(ManifestRevalidation.keptQueryParameters(Self.media(["0.ts?t=\(b)"]), Self.media(["0.ts?t=\(a)"]), mpd: false, rules: none) == ["t"])
        #expect(PrefetchError.manifestChangedDuringRun(dropped: 2, busy: 0, differing: ["t"], stripped: ["token"]).description.hasSuffix(
            "so they were dropped: only the query parameter t of its member URLs differs: if the origin signs URLs anew on each answer, "
            + "'vcache config set key-strip-param token,t' keys them as one; if it re-encoded, run the prefetch again"))
    }
}
