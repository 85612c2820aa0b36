import Testing
@testable import VCacheCore

/// `ManifestRevalidation.sameEncode`, the end-of-run check's rule (hostile probe h9b, F6): an
/// answer that differs from the copy the run read only in its URLs' queries (a signed-URL CDN's
/// tokens) or an MPD's `publishTime` is the same encode; a changed path, duration, segment list,
/// Representation set, bandwidth or codec is another.
@Suite struct EndCheckSameEncodeTests {
    static func mpd(query: String = "", publishTime: String? = nil, duration: String = "PT4S", media: String = "v/$Number$.m4s",
                    bandwidth: Int = 100000, codecs: String = "avc1.42c00d", extra: String = "", segment: Int = 2) -> [UInt8] {
        let published = publishTime.map { " publishTime=\"\($0)\"" } ?? ""
        return Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"\(published) mediaPresentationDuration="\(duration)" minBufferTime="PT2S">
          <Period>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <SegmentTemplate initialization="v/init.mp4\(query)" media="\(media)\(query)" duration="\(segment)" timescale="1" startNumber="0"/>
              <Representation id="v" bandwidth="\(bandwidth)" width="320" height="180" codecs="\(codecs)"/>\(extra)
            </AdaptationSet>
          </Period>
        </MPD>
        """.utf8)
    }

    static func media(_ uris: [String], duration: String = "2.000") -> [UInt8] {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for u in uris { text += "#EXTINF:\(duration),\n\(u)\n" }
        return Array((text + "#EXT-X-ENDLIST\n").utf8)
    }

    static let read = mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z")
    static let readPlaylist = media(["0.ts?token=aaa", "1.ts?token=aaa"])

    static let cases: [(String, [UInt8], [UInt8], Bool, Bool)] = [
        // (what, read, answer, mpd, same encode)
        ("the same bytes", read, read, true, true),
        ("a new token", read, mpd(query: "?token=bbb", publishTime: "2026-01-01T00:00:00Z"), true, true),
        ("a new publishTime", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:09Z"), true, true),
        ("both", read, mpd(query: "?token=ccc", publishTime: "2026-02-01T00:00:00Z"), true, true),
        ("no token now", read, mpd(publishTime: "2026-01-01T00:00:00Z"), true, true),
        ("another path", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", media: "v2/$Number$.m4s"), true, false),
        ("another duration", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", duration: "PT6S"), true, false),
        ("another segment list", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", segment: 4), true, false),
        ("another bandwidth", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", bandwidth: 110000), true, false),
        ("another codec", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z", codecs: "avc1.64001f"), true, false),
        ("a Representation more", read, mpd(query: "?token=aaa", publishTime: "2026-01-01T00:00:00Z",
                                            extra: "\n      <Representation id=\"w\" bandwidth=\"300000\" width=\"640\" height=\"360\" codecs=\"avc1.42c00d\"/>"), true, false),
        ("a playlist's new tokens", readPlaylist, media(["0.ts?token=bbb", "1.ts?token=bbb"]), false, true),
        ("a playlist's other segment", readPlaylist, media(["0.ts?token=aaa", "1b.ts?token=aaa"]), false, false),
        ("a playlist's other duration", readPlaylist, media(["0.ts?token=aaa", "1.ts?token=aaa"], duration: "2.500"), false, false),
        ("a playlist's segment more", readPlaylist, media(["0.ts?token=aaa", "1.ts?token=aaa", "2.ts?token=aaa"]), false, false),
    ]

    @Test(arguments: cases.indices)
    func sameEncode(_ i: Int) {
        let (what, read, answer, mpd, same) = Self.cases[i]
        #expect(ManifestRevalidation.sameEncode(answer, read, mpd: mpd, rules: CacheKeyRules()) == same, "\(what)")
    }

    /// A difference only in URL queries is decided by one member asked at its new URL (h9d F4):
    /// the query map, the member picked, and its answer judged by strong ETag, else
    /// Last-Modified and length; no validator to compare counts the queries a version.
    @Test
    func onlyQueriesDifferIsDecidedByAMembersValidators() {
        let read = Self.mpd(query: "?v=1"), answer = Self.mpd(query: "?v=2")
        #expect(ManifestRevalidation.onlyQueriesDiffer(answer, read, mpd: true, rules: CacheKeyRules()))
        #expect(!ManifestRevalidation.onlyQueriesDiffer(Self.mpd(query: "?v=1", publishTime: "2026-01-01T00:00:00Z"), read, mpd: true, rules: CacheKeyRules()))
        let changes = ManifestRevalidation.queryChanges(answer, read, mpd: true)
        #expect(changes == ["v=1": "v=2"])
        let none = ManifestRevalidation.Member(url: "http://o/s/v/0.m4s?v=1", validators: Validators(length: 10, etag: nil, lastModified: nil))
        let tagged = ManifestRevalidation.Member(url: "http://o/s/v/1.m4s?v=1", validators: Validators(length: 10, etag: "\"e1\"", lastModified: nil))
        let picked = ManifestRevalidation.membersToAsk([none, tagged], changes: changes)
        #expect(picked.map(\.0.url) == [tagged.url] && picked.map(\.1) == ["http://o/s/v/1.m4s?v=2"])
        #expect(ManifestRevalidation.membersToAsk([none], changes: changes).isEmpty)
        func head(_ status: Int, _ headers: [(String, String)]) -> ResponseHead { ResponseHead(status: status, reason: "", headers: headers, effectiveURL: "") }
        #expect(MemberProbe.same(tagged.validators, head(206, [("ETag", "\"e1\""), ("Content-Range", "bytes 0-0/10")])))
        #expect(!MemberProbe.same(tagged.validators, head(206, [("ETag", "\"e2\""), ("Content-Range", "bytes 0-0/10")])))
        #expect(!MemberProbe.same(tagged.validators, head(503, [("ETag", "\"e1\"")])))
        let dated = Validators(length: 10, etag: "W/\"w\"", lastModified: "Sun, 01 Nov 2026 00:00:00 GMT")
        #expect(MemberProbe.same(dated, head(200, [("ETag", "W/\"x\""), ("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT"), ("Content-Length", "10")])))
        #expect(!MemberProbe.same(dated, head(200, [("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT"), ("Content-Length", "11")])))
        #expect(!MemberProbe.same(none.validators, head(200, [("Content-Length", "10")])))
    }
}
