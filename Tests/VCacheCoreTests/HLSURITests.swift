import Testing
@testable import VCacheCore

/// RFC 3986 §5.2 reference resolution, as RFC 8216 §4.1 asks for every playlist URI: the
/// examples of §5.4 against their base, then what playlists write.
@Suite struct HLSURITests {
    static let rfcBase = "http://a/b/c/d;p?q"

    @Test(arguments: [
        // §5.4.1 normal examples
        ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"), ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q#s"), ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"),
        (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("g;x?y#s", "http://a/b/c/g;x?y#s"),
        ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
        ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        // §5.4.2 abnormal examples
        ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."), ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"), ("g#s/./x", "http://a/b/c/g#s/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"),
        ("http:g", "http:g"),
    ] as [(String, String)])
    func rfc3986Examples(_ reference: String, _ expected: String) {
        #expect(HLSURI.resolve(reference, against: Self.rfcBase) == expected, "\(reference)")
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var reference: String
        var base: String
        var expected: String
        var testDescription: String { name }
    }

    static let playlist = "https://cdn.example/live/ch1/index.m3u8?token=abc"

    static let cases: [Case] = [
        Case(name: "§5.2.3 a relative segment name replaces the playlist's last segment and its query",
             reference: "seg_001.ts", base: playlist, expected: "https://cdn.example/live/ch1/seg_001.ts"),
        Case(name: "§5.2.3 a relative path into a subfolder", reference: "720p/index.m3u8", base: playlist,
             expected: "https://cdn.example/live/ch1/720p/index.m3u8"),
        Case(name: "§5.2.4 ../ climbs out of the playlist's folder", reference: "../keys/k1.key", base: playlist,
             expected: "https://cdn.example/live/keys/k1.key"),
        Case(name: "§5.2.4 ../ above the root stays at the root", reference: "../../../../x.ts", base: playlist,
             expected: "https://cdn.example/x.ts"),
        Case(name: "§5.2.2 an absolute path keeps scheme and host", reference: "/vod/seg.ts?x=1", base: playlist,
             expected: "https://cdn.example/vod/seg.ts?x=1"),
        Case(name: "§5.2.2 query-only keeps the path, replaces the query", reference: "?token=new", base: playlist,
             expected: "https://cdn.example/live/ch1/index.m3u8?token=new"),
        Case(name: "§5.2.2 scheme-relative takes the playlist's scheme", reference: "//other.example/a/seg.ts", base: playlist,
             expected: "https://other.example/a/seg.ts"),
        Case(name: "§5.2.2 an absolute URI stands as written", reference: "http://origin.example/a/./b/../seg.ts", base: playlist,
             expected: "http://origin.example/a/seg.ts"),
        Case(name: "§4.1 of RFC 8216: resolved against the final URL, after a redirect", reference: "seg.ts",
             base: "https://edge7.cdn.example/r/abc/index.m3u8", expected: "https://edge7.cdn.example/r/abc/seg.ts"),
        Case(name: "§5.2.3 a base with authority and no path merges to /", reference: "seg.ts", base: "http://h",
             expected: "http://h/seg.ts"),
        Case(name: "§3.3 a colon after a slash is a path, not a scheme", reference: "a/b:c.ts", base: playlist,
             expected: "https://cdn.example/live/ch1/a/b:c.ts"),
        Case(name: "§3.1 a data: URI is absolute", reference: "data:text/plain;base64,AAAA", base: playlist,
             expected: "data:text/plain;base64,AAAA"),
        Case(name: "§2.1 percent-encoding is kept as written", reference: "a%20b/seg%2F1.ts", base: playlist,
             expected: "https://cdn.example/live/ch1/a%20b/seg%2F1.ts"),
        Case(name: "a raw space, no URI character, is percent-encoded as players ask for it", reference: "my folder/seg 1.ts?t=a b",
             base: playlist, expected: "https://cdn.example/live/ch1/my%20folder/seg%201.ts?t=a%20b"),
        Case(name: "§5.2.2 the base's fragment is never inherited", reference: "seg.ts", base: "http://h/p/i.m3u8#frag",
             expected: "http://h/p/seg.ts"),
    ]

    @Test(arguments: cases) func playlistReferences(_ c: Case) {
        #expect(HLSURI.resolve(c.reference, against: c.base) == c.expected)
    }

    @Test func onlyHTTPAndHTTPSAreFetchable() {
        #expect(HLSURI.isHTTP("https://a/b"))
        #expect(HLSURI.isHTTP("HTTP://a/b"))
        #expect(!HLSURI.isHTTP("skd://key-id"))
        #expect(!HLSURI.isHTTP("data:text/plain,x"))
        #expect(!HLSURI.isHTTP("seg.ts"))
    }
}
