import Foundation
import Testing
@testable import VCacheCore

/// What a request path names (`ProxyURL.lookup`): exactly one origin URL, or a refusal. Never
/// the resource a token names under a name that is not its own (issue 35: ffmpeg resolving
/// `init-stream0.m4s` against `/v/<MPD>/manifest.mpd` was answered with the MPD's bytes).
@Suite struct ProxyURLLookupTests {
    static let mpd = "http://127.0.0.1:8080/dash/num/manifest.mpd"
    static let folder = "http://127.0.0.1:8080/dash/num/"

    static func v(_ origin: String, _ name: String) -> String { "/v/" + ProxyURL.base64url(origin) + "/" + name }
    static func d(_ folder: String, _ rest: String) -> String { "/d/" + ProxyURL.base64url(folder) + "/" + rest }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var path: String
        var expected: ProxyURL.Lookup?  // nil: refused (any reason)
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "the origin's own name", path: v(mpd, "manifest.mpd"), expected: .origin(mpd)),
        Case(name: "a name resolved against the MPD's proxy URL names another resource: refused",
             path: v(mpd, "init-stream0.m4s"), expected: nil),
        Case(name: "another extension of the same stem (an HLS member named by what it is)",
             path: v("http://h/seg/3", "3.ts"), expected: .origin("http://h/seg/3")),
        Case(name: "the own name with an extension added", path: v("http://h/a.bin", "a.bin.ts"), expected: .origin("http://h/a.bin")),
        Case(name: "make's default for a name without extension", path: v("http://h/video", "video.mp4"), expected: .origin("http://h/video")),
        Case(name: "a query is no part of the name", path: v("http://h/a.mp4?sig=1", "a.mp4"), expected: .origin("http://h/a.mp4?sig=1")),
        Case(name: "a name that only begins like the stem: refused", path: v(mpd, "m.mpd"), expected: nil),
        Case(name: "a longer extension than 8: refused", path: v(mpd, "manifest.verylongext"), expected: nil),
        Case(name: "an empty path: video-video.mp4 (make's name for it)", path: v("http://h/", "video-video.mp4"), expected: .origin("http://h/")),
        Case(name: "a folder path joins the folder", path: d(folder, "chunk-stream0-00001.m4s"), expected: .origin(folder + "chunk-stream0-00001.m4s")),
        Case(name: "a folder path keeps sub-folders", path: d(folder, "0/seg-1.m4s"), expected: .origin(folder + "0/seg-1.m4s")),
        Case(name: "a decoded ? in a folder path is the origin's query", path: d(folder, "s.m4s?tok=a/b"), expected: .origin(folder + "s.m4s?tok=a/b")),
        Case(name: "a .. segment would leave the folder: refused", path: d(folder, "../secret.mp4"), expected: nil),
        Case(name: "a .. segment inside: refused", path: d(folder, "a/../../x"), expected: nil),
        Case(name: "an encoded .. segment: refused", path: d(folder, "%2E%2e/x"), expected: nil),
        Case(name: "a . segment: refused", path: d(folder, "./x"), expected: nil),
        Case(name: "an empty first segment: refused", path: d(folder, "/x"), expected: nil),
        Case(name: "a backslash: refused", path: d(folder, "a\\..\\x"), expected: nil),
        Case(name: "nothing after the folder: refused", path: d(folder, ""), expected: nil),
        Case(name: "a folder that is no folder (no final /): refused", path: d("http://h/a.mp4", "x"), expected: nil),
        Case(name: "a folder of another scheme: refused", path: d("file:///etc/", "passwd"), expected: nil),
        Case(name: "a folder with a query: refused", path: d("http://h/a/?x=1/", "s.m4s"), expected: nil),
        Case(name: "a token that is no base64: refused", path: "/d/***/x.m4s", expected: nil),
        Case(name: "a folder with a .. segment: refused", path: d("http://h/a/../", "x.m4s"), expected: nil),
    ]

    @Test(arguments: cases)
    func eachPathNamesOneOriginOrIsRefused(_ c: Case) {
        let got = ProxyURL.lookup(path: c.path)
        if let expected = c.expected {
            #expect(got == expected)
        } else if case .refused = got {
        } else {
            Issue.record("\(c.path) was \(got), not refused")
        }
    }

    @Test func otherPathsAreNotOurs() {
        #expect(ProxyURL.lookup(path: "/") == .notOurs)
        #expect(ProxyURL.lookup(path: "/x/abc/def") == .notOurs)
    }

    /// Every name `make` gives a URL fits it, so no proxy URL serve hands out is refused.
    @Test(arguments: ["http://h/a.mp4", "http://h/dir/", "http://h/x%20y.mp4", "http://h/seg/3?x=1", "http://h/" + String(repeating: "é", count: 150) + ".mp4",
                      "http://h/" + String(repeating: "n", count: 300), "http://h/.hidden", "http://h/a.b.c.m3u8"])
    func everyNameMakeGivesFits(_ origin: String) throws {
        let made = ProxyURL.make(origin: origin, base: "")
        let decoded = try #require(made.removingPercentEncoding)
        #expect(ProxyURL.lookup(path: decoded) == .origin(origin), "\(made)")
    }

    /// The answers remembered for recent paths are the answers: asked again, and after more
    /// paths than are remembered have been asked in between (the memory emptied and refilled).
    @Test func rememberedAnswersAreTheAnswers() {
        let first = Self.v(Self.mpd, "manifest.mpd"), wrong = Self.v(Self.mpd, "init.m4s")
        let long = Self.v("http://h/" + String(repeating: "n", count: ProxyURL.recentPathBytes), "x")
        for round in 0..<2 {
            #expect(ProxyURL.lookup(path: first) == .origin(Self.mpd), "round \(round)")
            if case .refused = ProxyURL.lookup(path: wrong) {} else { Issue.record("\(wrong) was not refused in round \(round)") }
            if case .refused = ProxyURL.lookup(path: long) {} else { Issue.record("the long path was not refused in round \(round)") }
            for i in 0..<(ProxyURL.recentCount + 10) {
                let origin = "http://h/v\(i).mp4"
                #expect(ProxyURL.lookup(path: Self.v(origin, "v\(i).mp4")) == .origin(origin))
                #expect(ProxyURL.lookup(path: Self.d(Self.folder, "s\(i).m4s")) == .origin(Self.folder + "s\(i).m4s"))
            }
        }
    }

    @Test func aFolderReferenceDecodesToItself() {
        #expect(ProxyURL.folderReference("a%20b/seg-$Number%05d$.m4s?t=1#frag") == "a%2520b/seg-$Number%05d$.m4s%3Ft=1")
        let made = ProxyURL.makeFolder(Self.folder, base: "") + ProxyURL.folderReference("a%20b/seg-5.m4s?t=1")
        #expect(ProxyURL.lookup(path: made.removingPercentEncoding ?? "") == .origin(Self.folder + "a%20b/seg-5.m4s?t=1"))
    }
}
