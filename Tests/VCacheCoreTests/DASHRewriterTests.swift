import Foundation
import Testing
import VCacheTestSupport
@testable import VCacheCore

/// An MPD as serve answers it (`DASHRewriter`): every URL a player can form from it resolves to
/// the proxy (none to the origin) and, through `ProxyURL.lookup`, to exactly the origin URL the
/// original names; templates still substitute; namespaces and unknown parts stay.
@Suite struct DASHRewriterTests {
    static let proxy = "http://127.0.0.1:8089"

    /// Every URL of every Representation's plan: init, index, segments.
    static func urls(_ mpd: MPD) throws -> [String] {
        var out: [String] = []
        for (p, _, rep) in mpd.representations {
            let plan = try rep.plan(periodDuration: mpd.periods[p].duration)
            out += [plan.initialization?.url, plan.index?.url].compactMap { $0 } + plan.segments.map(\.url)
        }
        return out
    }

    /// Each URL the rewritten MPD gives a player, mapped back by the proxy as it would be
    /// requested (the server decodes the path), equals the original's, and none names the origin.
    static func expectProxied(_ original: [UInt8], url: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let rewritten = try DASHRewriter(url: url, proxy: proxy).rewrite(original)
        let text = String(decoding: rewritten, as: UTF8.self)
        let before = try urls(MPD.parse(original, url: url))
        // The player resolves against the MPD's proxy URL.
        let after = try urls(MPD.parse(rewritten, url: ProxyURL.make(origin: url, base: proxy)))
        expectMapped(before, after, sourceLocation: sourceLocation)
        return text
    }

    static func expectMapped(_ before: [String], _ after: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(before.count == after.count && !after.isEmpty, sourceLocation: sourceLocation)
        for (b, a) in zip(before, after) {
            #expect(a.hasPrefix(proxy + "/d/") || a.hasPrefix(proxy + "/v/"), "\(a)", sourceLocation: sourceLocation)
            let path = String(a.dropFirst(proxy.count)).removingPercentEncoding ?? ""
            #expect(ProxyURL.lookup(path: path) == .origin(b), "\(a) does not map to \(b)", sourceLocation: sourceLocation)
        }
    }

    static let hostile = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!-- a comment kept -->
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:x="urn:example:x"
             type="static" mediaPresentationDuration="PT6S" profiles="urn:mpeg:dash:profile:isoff-live:2011" x:custom="kept">
          <ProgramInformation><Title>t</Title></ProgramInformation>
          <Location>https://cdn.example/live/manifest.mpd?sig=1</Location>
          <x:Unknown attr="kept"><x:Inner/></x:Unknown>
          <BaseURL>https://cdn.example/content/</BaseURL>
          <Period id="p0" duration="PT6S">
            <BaseURL>period/</BaseURL>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <cenc:pssh>AAAA</cenc:pssh>
              <SegmentTemplate timescale="1" duration="2" startNumber="1" media="$RepresentationID$/seg-$Number%05d$.m4s" initialization="$RepresentationID$/init.mp4"/>
              <Representation id="v1" bandwidth="300000" width="320" height="180"/>
              <Representation id="v2" bandwidth="100000" width="160" height="90"><BaseURL>../other/</BaseURL></Representation>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4">
              <Representation id="a1" bandwidth="64000">
                <SegmentTemplate timescale="1" duration="2" media="../up/a-$Number$.m4s?tok=x%20y" initialization="https://edge.example/a/init.mp4"/>
              </Representation>
            </AdaptationSet>
            <AdaptationSet contentType="text" mimeType="application/mp4">
              <Representation id="t1" bandwidth="1000">
                <SegmentList timescale="1" duration="3">
                  <Initialization sourceURL="/abs/t-init.mp4"/>
                  <SegmentURL media="t1.m4s?sig=a/b"/>
                  <SegmentURL media="t2.m4s"/>
                </SegmentList>
              </Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """

    @Test func everyURLOfAHandMadeMPDResolvesToTheProxyAndMapsBackExactly() throws {
        let url = "https://cdn.example/dir/manifest.mpd?session=9"
        let text = try Self.expectProxied(Array(Self.hostile.utf8), url: url)
        #expect(!text.contains("https://cdn.example") && !text.contains("https://edge.example"), "\(text)")
        // Templates still substitute: their identifiers are left for the player.
        #expect(text.contains("$RepresentationID$/seg-$Number%05d$.m4s\""), "\(text)")
        #expect(text.contains("a-$Number$.m4s%3Ftok=x%2520y"), "\(text)")
        // Namespaces, prefixes, unknown elements and attributes, comments: as they were.
        for kept in ["xmlns:cenc=\"urn:mpeg:cenc:2013\"", "<cenc:pssh>AAAA</cenc:pssh>", "x:custom=\"kept\"", "<x:Unknown attr=\"kept\"><x:Inner/></x:Unknown>",
                     "<!-- a comment kept -->", "<Title>t</Title>"] {
            #expect(text.contains(kept), "\(kept) lost:\n\(text)")
        }
        // Location: the proxy URL of the MPD it names.
        #expect(text.contains("<Location>" + ProxyURL.make(origin: "https://cdn.example/live/manifest.mpd?sig=1", base: Self.proxy) + "</Location>"), "\(text)")
    }

    @Test func anMPDWithoutBaseURLGetsOneForItsOwnFolder() throws {
        let mpd = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S"><Period><AdaptationSet contentType="video">
            <Representation id="0" bandwidth="1"><SegmentTemplate timescale="1" duration="2" media="chunk-$Number$.m4s" initialization="init.m4s"/></Representation>
            </AdaptationSet></Period></MPD>
            """
        let text = try Self.expectProxied(Array(mpd.utf8), url: "http://o.test/a/b/manifest.mpd")
        #expect(text.contains("<BaseURL>\(ProxyURL.makeFolder("http://o.test/a/b/", base: Self.proxy))</BaseURL>"), "\(text)")
        #expect(text.contains("media=\"chunk-$Number$.m4s\""), "\(text)")
    }

    /// An AdaptationSet's (or Period's) template that must be made absolute is, for a
    /// Representation with a BaseURL of its own, resolved against that Representation's base (it
    /// is what the player resolves it against), pushed down into the Representation.
    @Test func anInheritedTemplateResolvesAgainstTheRepresentationsOwnBaseURL() throws {
        let mpd = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S"><Period duration="PT4S">
            <SegmentTemplate timescale="1" duration="2" index="../idx/$RepresentationID$.sidx"/>
            <AdaptationSet contentType="video">
            <SegmentTemplate media="../$RepresentationID$/c-$Number$.m4s" initialization="../$RepresentationID$/init.m4s"/>
            <Representation id="0" bandwidth="2"><BaseURL>../deep/er/</BaseURL></Representation>
            <Representation id="1" bandwidth="1"/>
            <Representation id="2" bandwidth="1"><BaseURL>https://other.example/x/y/</BaseURL><SegmentTemplate startNumber="5"/></Representation>
            </AdaptationSet></Period></MPD>
            """
        let text = try Self.expectProxied(Array(mpd.utf8), url: "http://o.test/a/b/manifest.mpd")
        #expect(!text.contains("other.example/"), "\(text)")
    }

    /// A template that starts with `$RepresentationID$` whose id is an absolute URL, a `//host`, a
    /// `..` or anything but a plain name: the id is substituted in the rewrite, per
    /// Representation, so no URL a player forms from it leaves the proxy.
    @Test func aRepresentationIDThatIsAURLIsSubstitutedNeverLeftToThePlayer() throws {
        let mpd = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S"><Period duration="PT4S">
            <AdaptationSet contentType="video">
            <SegmentTemplate timescale="1" duration="2" media="$RepresentationID$/c-$Number$.m4s" initialization="$RepresentationID$/init.m4s"/>
            <Representation id="https://evil.example/v" bandwidth="5"/>
            <Representation id="//evil.example/w" bandwidth="4"/>
            <Representation id="../../../../up" bandwidth="3"/>
            <Representation id="a$b%41?c" bandwidth="2"/>
            <Representation id="plain-1" bandwidth="1"/>
            <Representation id="http://evil.example/own" bandwidth="1"><SegmentTemplate media="$RepresentationID$-$Number$.m4s"/></Representation>
            </AdaptationSet></Period></MPD>
            """
        let text = try Self.expectProxied(Array(mpd.utf8), url: "http://o.test/a/b/manifest.mpd")
        // Each Representation but the plain one has its own template, its id in it, under the proxy.
        let values = text.matches(of: /(media|initialization)="([^"]*)"/).map { String($0.output.2) }
        #expect(values.count == 12 && values.filter { $0.hasPrefix(Self.proxy + "/d/") }.count == 10, "\(values)")
        // A plain id is still the player's to substitute: the template as it was, not pushed down.
        #expect(text.contains("media=\"$RepresentationID$/c-$Number$.m4s\""), "\(text)")
        #expect(text.contains("<Representation id=\"plain-1\" bandwidth=\"1\"/>"), "\(text)")
    }

    /// A remote Period (`xlink:href`) is fetched through the proxy and answered rewritten: put in
    /// the MPD's place as a player puts it, every URL it gives resolves to the proxy and maps back
    /// to what the Period inline would have named.
    @Test func aRemotePeriodIsAnsweredRewrittenSoItsURLsStayOnTheProxy() throws {
        let url = "http://o.test/a/manifest.mpd", remoteURL = "http://o.test/a/ad-period.xml"
        let period = """
            <Period xmlns="urn:mpeg:dash:schema:mpd:2011" id="ad" duration="PT4S"><BaseURL>https://ads.example/c/</BaseURL>
            <AdaptationSet contentType="video"><SegmentTemplate timescale="1" duration="2" media="$RepresentationID$/$Number$.m4s" initialization="../i/$RepresentationID$.mp4"/>
            <Representation id="v" bandwidth="1"/><Representation id="//evil.example/x" bandwidth="2"/></AdaptationSet>
            <AdaptationSet contentType="audio"><Representation id="a" bandwidth="1"><BaseURL>sub/</BaseURL><SegmentList timescale="1" duration="2">
            <Initialization sourceURL="/root/a-init.mp4"/><SegmentURL media="a1.m4s"/><SegmentURL media="https://evil.example/a2.m4s"/></SegmentList></Representation></AdaptationSet>
            </Period>
            """
        #expect(DASHRewriter.looksLikeRemoteElement(Array(("<?xml version=\"1.0\"?>\n" + period).utf8)))
        #expect(!DASHRewriter.looksLikeRemoteElement(Array("<Period><BaseURL>x</BaseURL></Period>".utf8)))
        let head = "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" type=\"static\" mediaPresentationDuration=\"PT4S\">"
        let inline = head + period + "</MPD>"
        let linked = head + "<Period xlink:href=\"ad-period.xml\" xlink:actuate=\"onLoad\"/></MPD>"
        let mpd = String(decoding: try DASHRewriter(url: url, proxy: Self.proxy).rewrite(Array(linked.utf8)), as: UTF8.self)
        let href = try #require(mpd.firstMatch(of: /xlink:href="([^"]*)"/)).output.1
        #expect(ProxyURL.lookup(path: String(href.dropFirst(Self.proxy.count))) == .origin(remoteURL), "\(href)")
        // What the proxy answers for it, put in the Period's place.
        let remote = String(decoding: try DASHRewriter(url: remoteURL, proxy: Self.proxy).rewriteRemote(Array(period.utf8)), as: UTF8.self)
        #expect(!remote.contains("https://ads.example") && !remote.contains("\"https://evil"), "\(remote)")
        let body = remote.replacing(/<\?xml[^>]*\?>\s*/, with: "")
        let combined = mpd.replacing(/<Period [^>]*xlink:href[^>]*\/>/, with: body)
        let before = try Self.urls(MPD.parse(Array(inline.utf8), url: url))
        let after = try Self.urls(MPD.parse(Array(combined.utf8), url: ProxyURL.make(origin: url, base: Self.proxy)))
        Self.expectMapped(before, after)
    }

    @Test(.requires(.dashTools)) func everyURLOfFFmpegsStreamsResolvesToTheProxy() throws {
        let dir = TempDirectory("vcache-dashrewrite")
        try Fixtures.makeDASHStreams(into: dir.path)
        for stream in ["num", "tl", "list", "sb", "multi"] {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: dir.file(stream + "/manifest.mpd"))))
            let text = try Self.expectProxied(bytes, url: "http://127.0.0.1:9/dash/\(stream)/manifest.mpd")
            #expect(!text.contains("127.0.0.1:9"), "\(stream): \(text)")
        }
    }
}

/// Offline, the MPD lists only what plays from the cache (`DASHPlayable`, `DASHRewriter.keepOnly`).
@Suite struct DASHOfflineMPDTests {
    static let url = "http://o.test/s/manifest.mpd"
    static let mpd = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S"><Period id="p" duration="PT8S">
        <AdaptationSet contentType="video"><SegmentTemplate timescale="10" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Time$.m4s">
        <SegmentTimeline><S t="0" d="20" r="-1"/></SegmentTimeline></SegmentTemplate>
        <Representation id="hi" bandwidth="2"/><Representation id="lo" bandwidth="1"/></AdaptationSet>
        <AdaptationSet contentType="audio" lang="en"><Representation id="a" bandwidth="1"><SegmentList timescale="1" duration="2">
        <Initialization sourceURL="a/init.mp4"/><SegmentURL media="a/1.m4s"/><SegmentURL media="a/2.m4s"/><SegmentURL media="a/3.m4s"/><SegmentURL media="a/4.m4s"/>
        </SegmentList></Representation></AdaptationSet>
        <AdaptationSet contentType="audio" lang="fr"><Representation id="f" bandwidth="1"><SegmentTemplate timescale="1" duration="2" initialization="f/i.mp4" media="f/$Number$.m4s"/></Representation></AdaptationSet>
        </Period></MPD>
        """

    /// `hi` and `a` cached for 4 s (two segments), `lo` for 2 s, nothing of `f`.
    static let cached: Set<String> = ["hi/init.mp4", "hi/0.m4s", "hi/20.m4s", "lo/init.mp4", "lo/0.m4s", "a/init.mp4", "a/1.m4s", "a/2.m4s"]

    @Test func onlyTheCachedRepresentationsAndTimeAreListed() throws {
        let bytes = Array(Self.mpd.utf8)
        let mpd = try MPD.parse(bytes, url: Self.url)
        let playable = DASHPlayable(mpd) { u, _ in Self.cached.contains(String(u.dropFirst("http://o.test/s/".count))) }
        #expect(playable.plays(mpd))
        let out = try DASHRewriter(url: Self.url, proxy: "http://127.0.0.1:1").rewrite(bytes) { DASHRewriter.keepOnly(playable, of: mpd, in: $0) }
        let after = try MPD.parse(out, url: Self.url)
        // The less-warmed `lo` and the uncached `fr` set go; 4 s, two segments each.
        #expect(after.representations.map(\.representation.id) == ["hi", "a"])
        #expect(after.duration == 4 && after.periods[0].duration == 4)
        for (p, _, rep) in after.representations {
            #expect(try rep.plan(periodDuration: after.periods[p].duration).segments.count == 2, "\(rep.id)")
        }
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains("<S t=\"0\" d=\"20\" r=\"1\"/>") && !text.contains("a/3.m4s"), "\(text)")
    }

    @Test func videoWithoutItsAudioIsNotOfferedAlone() throws {
        let mpd = try MPD.parse(Array(Self.mpd.utf8), url: Self.url)
        let playable = DASHPlayable(mpd) { u, _ in u.contains("/hi/") }
        #expect(!playable.plays(mpd))
    }
}

/// A hostile `$RepresentationID$` (a scheme of its own once substituted) or an `xlink:href` to
/// `file:`/`data:`: the rewrite never writes a URL that lands off the proxy. The Representation
/// (or element) that would need one is taken out; the plain ones stay, mapping back exactly.
@Suite struct DASHRewriterHostileIDTests {
    static let proxy = DASHRewriterTests.proxy
    static let url = "http://o.test/a/b/manifest.mpd"
    static let ids = ["javascript:alert(1)", "data:text/html,hi", "http://evil.example/x", "mailto:a@b", "x:", "C:\\w", "JavaScript:x"]

    /// Three layouts the probe used: the id after a prefix, the id first, the template on the
    /// AdaptationSet (pushed down per Representation).
    static func mpd(_ id: String, layout: Int) -> String {
        let escaped = id.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing("\"", with: "&quot;")
        let template = [
            #"<SegmentTemplate timescale="1" duration="2" startNumber="1" initialization="init-stream$RepresentationID$.m4s" media="chunk-stream$RepresentationID$-$Number%05d$.m4s"/>"#,
            #"<SegmentTemplate timescale="1" duration="2" startNumber="1" initialization="$RepresentationID$.m4s" media="$RepresentationID$/$Number$.m4s"/>"#,
            #"<SegmentTemplate timescale="1" duration="2" startNumber="1" initialization="$RepresentationID$/init.m4s" media="$RepresentationID$/$Number$.m4s"/>"#,
        ][layout]
        let reps = layout == 2
            ? "\(template)<Representation id=\"\(escaped)\" bandwidth=\"2\"/><Representation id=\"ok\" bandwidth=\"1\"/><Representation id=\"\(escaped)\" bandwidth=\"3\"><BaseURL>sub/</BaseURL></Representation>"
            : "<Representation id=\"\(escaped)\" bandwidth=\"2\">\(template)</Representation><Representation id=\"ok\" bandwidth=\"1\">\(template)</Representation>"
        return """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:xlink="http://www.w3.org/1999/xlink" type="static" mediaPresentationDuration="PT4S">
            <Period duration="PT4S"><AdaptationSet contentType="video">\(reps)</AdaptationSet>
            <AdaptationSet xlink:href="file:///etc/passwd" xlink:actuate="onLoad"/><AdaptationSet xlink:href="data:application/xml,&lt;x/&gt;"/>
            <AdaptationSet xlink:href="urn:mpeg:dash:resolve-to-zero:2013"/></Period></MPD>
            """
    }

    /// Every URL a player can form from `text` (its Representations' init, index and segments,
    /// BaseURLs, `xlink:href`, `Location`), resolved against the MPD's proxy URL.
    static func formed(_ text: String) throws -> [String] {
        let proxied = ProxyURL.make(origin: url, base: proxy)
        var out = try DASHRewriterTests.urls(MPD.parse(Array(text.utf8), url: proxied))
        for m in text.matches(of: /xlink:href="([^"]*)"/) where m.output.1 != "urn:mpeg:dash:resolve-to-zero:2013" {
            out.append(HLSURI.resolve(String(m.output.1), against: proxied))
        }
        for m in text.matches(of: /<(BaseURL|Location)>([^<]*)</) { out.append(HLSURI.resolve(String(m.output.2), against: proxied)) }
        return out
    }

    @Test(arguments: 0..<3)
    func noHostileRepresentationIDMakesAURLOffTheProxy(layout: Int) throws {
        for id in Self.ids {
            let original = Self.mpd(id, layout: layout)
            let text = String(decoding: try DASHRewriter(url: Self.url, proxy: Self.proxy).rewrite(Array(original.utf8)), as: UTF8.self)
            let formed = try Self.formed(text)
            #expect(!formed.isEmpty)
            for u in formed {
                #expect(u.hasPrefix(Self.proxy + "/d/") || u.hasPrefix(Self.proxy + "/v/"), "id \(id), layout \(layout): \(u) is not on the proxy\n\(text)")
            }
            #expect(!text.contains("file:") && !text.contains("data:"), "id \(id), layout \(layout): \(text)")
            // The plain Representation stays and maps back to what the original names.
            #expect(text.contains("id=\"ok\""), "\(text)")
            let plain = { (mpd: MPD) in mpd.representations.filter { $0.2.id == "ok" } }
            // (From an MPD without the hostile Representation: prefetch leaves it out of the original too.)
            let before = try plain(MPD.parse(Array(Self.mpd("other", layout: layout).utf8), url: Self.url)).flatMap { r in
                let p = try r.2.plan(periodDuration: 4)
                return [p.initialization?.url].compactMap { $0 } + p.segments.map(\.url)
            }
            let after = try plain(MPD.parse(Array(text.utf8), url: ProxyURL.make(origin: Self.url, base: Self.proxy))).flatMap { r in
                let p = try r.2.plan(periodDuration: 4)
                return [p.initialization?.url].compactMap { $0 } + p.segments.map(\.url)
            }
            DASHRewriterTests.expectMapped(before, after)
        }
    }

    /// A BaseURL, SegmentURL or Location of another scheme, and the same in a remote element.
    @Test func otherSchemesElsewhereTakeOutTheirElement() throws {
        let original = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S"><Location>data:text/plain,x</Location>
            <Period duration="PT4S"><AdaptationSet contentType="video">
            <Representation id="f" bandwidth="3"><BaseURL>file:///etc/</BaseURL><SegmentTemplate timescale="1" duration="2" media="$Number$.m4s"/></Representation>
            <Representation id="l" bandwidth="2"><SegmentList timescale="1" duration="2"><SegmentURL media="a.m4s"/><SegmentURL media="javascript:alert(1)"/></SegmentList></Representation>
            <Representation id="ok" bandwidth="1"><SegmentTemplate timescale="1" duration="2" media="$Number$.m4s"/></Representation>
            </AdaptationSet></Period></MPD>
            """
        let text = String(decoding: try DASHRewriter(url: Self.url, proxy: Self.proxy).rewrite(Array(original.utf8)), as: UTF8.self)
        for u in try Self.formed(text) { #expect(u.hasPrefix(Self.proxy + "/d/") || u.hasPrefix(Self.proxy + "/v/"), "\(u)\n\(text)") }
        #expect(!text.contains("id=\"f\"") && !text.contains("id=\"l\"") && text.contains("id=\"ok\"") && !text.contains("<Location>"), "\(text)")
        let remote = """
            <Period xmlns="urn:mpeg:dash:schema:mpd:2011" duration="PT4S"><AdaptationSet contentType="video">
            <Representation id="javascript:x" bandwidth="2"><SegmentTemplate timescale="1" duration="2" media="$RepresentationID$/$Number$.m4s"/></Representation>
            <Representation id="ok" bandwidth="1"><SegmentTemplate timescale="1" duration="2" media="$RepresentationID$/$Number$.m4s"/></Representation>
            </AdaptationSet></Period>
            """
        let r = String(decoding: try DASHRewriter(url: "http://o.test/a/ad.xml", proxy: Self.proxy).rewriteRemote(Array(remote.utf8)), as: UTF8.self)
        #expect(!r.contains("javascript:") && r.contains("id=\"ok\""), "\(r)")
    }
}
