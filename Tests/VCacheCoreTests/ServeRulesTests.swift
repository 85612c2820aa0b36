import Foundation
import Testing
@testable import VCacheCore

/// serve's decisions and HTTP rules as pure values: no origin, no process.
@Suite struct ServeRulesTests {
    typealias Step = ServeDecision.Step
    static let mib: Int64 = 1 << 20

    struct ReadCase: CustomTestStringConvertible, Sendable {
        var name: String
        var read: ServeDecision.Read
        var expected: Step
        var testDescription: String { name }
    }

    static func read(at p: Int64, end: Int64 = 16 * mib, justified: [ByteRange] = [], refreshed: Bool = true, hasFile: Bool = true,
                     jobs: [ServeDecision.Job] = [], started: Int = 0, mayStore: Bool = true) -> ServeDecision.Read {
        ServeDecision.Read(position: p, end: end, justified: RangeSet(justified), refreshed: refreshed, hasFile: hasFile, jobs: jobs,
                           jobsStarted: started, mayStore: mayStore)
    }

    static let readCases: [ReadCase] = [
        ReadCase(name: "justified bytes are read, up to where they end",
                 read: read(at: 0, justified: [ByteRange(0, 4 * mib)]), expected: .read(upTo: 4 * mib)),
        ReadCase(name: "never past the response's end",
                 read: read(at: 0, end: mib, justified: [ByteRange(0, 4 * mib)]), expected: .read(upTo: mib)),
        ReadCase(name: "no file: claims justify nothing (a file evicted meanwhile is not read)",
                 read: read(at: 0, justified: [ByteRange(0, 4 * mib)], hasFile: false), expected: .startJob(ByteRange(0, 16 * mib))),
        ReadCase(name: "at a gap not yet checked: the catalog is read again (another process may have committed it)",
                 read: read(at: 4 * mib, justified: [ByteRange(0, 4 * mib)], refreshed: false), expected: .refresh),
        ReadCase(name: "a job of this process writing this file just behind: wait for it",
                 read: read(at: 4 * mib, jobs: [.init(start: 0, end: 16 * mib, position: 3 * mib + 512 << 10, writesReadersFile: true)]),
                 expected: .wait),
        ReadCase(name: "a job far behind: a job of its own",
                 read: read(at: 8 * mib, jobs: [.init(start: 0, end: 16 * mib, position: 2 * mib, writesReadersFile: true)]),
                 expected: .startJob(ByteRange(8 * mib, 16 * mib))),
        ReadCase(name: "a job writing another file (it dropped the version): never waited for",
                 read: read(at: 4 * mib, jobs: [.init(start: 0, end: 16 * mib, position: 4 * mib, writesReadersFile: false)]),
                 expected: .startJob(ByteRange(4 * mib, 16 * mib))),
        ReadCase(name: "a job that stopped before this point: not waited for",
                 read: read(at: 8 * mib, jobs: [.init(start: 0, end: 8 * mib, position: 8 * mib, writesReadersFile: true)]),
                 expected: .startJob(ByteRange(8 * mib, 16 * mib))),
        ReadCase(name: "three jobs started already: the rest streams",
                 read: read(at: 4 * mib, started: 3), expected: .stream(ByteRange(4 * mib, 16 * mib))),
        ReadCase(name: "storing not allowed: the rest streams",
                 read: read(at: 4 * mib, mayStore: false), expected: .stream(ByteRange(4 * mib, 16 * mib))),
        ReadCase(name: "no file and nothing may be stored: streams from the start",
                 read: read(at: 0, hasFile: false, mayStore: false), expected: .stream(ByteRange(0, 16 * mib))),
    ]

    @Test(arguments: readCases) func readStep(_ c: ReadCase) {
        #expect(c.read.step == c.expected)
    }

    struct OpenCase: CustomTestStringConvertible, Sendable {
        var name: String
        var open: ServeDecision.Open
        var expected: ServeDecision.Start
        var testDescription: String { name }
    }

    static let strong = Validators(length: 1000, etag: "\"a\"", lastModified: nil)
    static let weak = Validators(length: 1000, etag: "W/\"a\"", lastModified: nil)
    static let none = Validators(length: 1000, etag: nil, lastModified: nil)

    static func open(_ v: Validators, span: ByteRange = ByteRange(0, 1000), claims: [ByteRange] = [], own: Bool = false,
                     canTake: Bool = true) -> ServeDecision.Open {
        ServeDecision.Open(validators: v, span: span, claims: RangeSet(claims), claimsAreOwn: own, canTakeEntry: canTake)
    }

    static let openCases: [OpenCase] = [
        OpenCase(name: "a strong validator: read through, parts combine",
                 open: open(strong, claims: [ByteRange(0, 100)]), expected: .readThrough(weakPartsCombine: false)),
        OpenCase(name: "weak, nothing cached: read through, this run's parts combine",
                 open: open(weak), expected: .readThrough(weakPartsCombine: true)),
        OpenCase(name: "weak, cached by this process: read through, parts combine",
                 open: open(weak, claims: [ByteRange(0, 100)], own: true), expected: .readThrough(weakPartsCombine: true)),
        OpenCase(name: "weak, another run's bytes cover the span: from the cache alone",
                 open: open(weak, span: ByteRange(0, 50), claims: [ByteRange(0, 100)]), expected: .readThrough(weakPartsCombine: false)),
        OpenCase(name: "weak, another run's bytes do not cover the span: start over",
                 open: open(weak, claims: [ByteRange(0, 100)]), expected: .startOver),
        OpenCase(name: "no validator at all, another run's bytes do not cover the span: one origin response for the whole span",
                 open: open(none, claims: [ByteRange(0, 100)]), expected: .streamWhole),
        OpenCase(name: "no validator, this process's own bytes do not cover the span: one origin response (its jobs are separate responses)",
                 open: open(none, claims: [ByteRange(0, 100)], own: true), expected: .streamWhole),
        OpenCase(name: "no validator, nothing cached: one origin response, not stored",
                 open: open(none), expected: .streamWhole),
        OpenCase(name: "no validator, the entry busy: one origin response for the whole span",
                 open: open(none, claims: [ByteRange(0, 100)], own: true, canTake: false), expected: .streamWhole),
        OpenCase(name: "no validator, the cached bytes cover the span: from the cache alone",
                 open: open(none, span: ByteRange(0, 50), claims: [ByteRange(0, 100)], own: true), expected: .readThrough(weakPartsCombine: false)),
        OpenCase(name: "weak, another run's bytes, the entry busy elsewhere: one origin response for the whole span",
                 open: open(weak, claims: [ByteRange(0, 100)], canTake: false), expected: .streamWhole),
    ]

    @Test(arguments: openCases) func openStart(_ c: OpenCase) {
        #expect(c.open.start == c.expected)
    }

    @Test func aPromisedVersionAdmitsOnlyItself() {
        #expect(Self.strong.admits(Validators(length: 1000, etag: "\"a\"", lastModified: "x")))
        #expect(!Self.strong.admits(Validators(length: 1000, etag: "\"b\"", lastModified: nil)))
        #expect(!Self.strong.admits(Validators(length: 999, etag: "\"a\"", lastModified: nil)))
        #expect(Self.weak.admits(Self.weak))
        #expect(!Self.weak.admits(Validators(length: 1000, etag: "W/\"b\"", lastModified: nil)))
        #expect(!Self.weak.admits(Validators(length: 1001, etag: "W/\"a\"", lastModified: nil)))
        #expect(Self.none.admits(Self.none))
        #expect(!Self.none.admits(Validators(length: 999, etag: nil, lastModified: nil)))
        #expect(!Self.none.admits(Self.weak))
    }

    // MARK: - Range and If-Range (RFC 9110 §14.2, §13.1.5)

    @Test(arguments: [
        ("bytes=0-99", RangeHeader.span(ByteRange(0, 100))),
        ("bytes=900-", .span(ByteRange(900, 1000))),
        ("bytes=-100", .span(ByteRange(900, 1000))),
        ("bytes=0-0,-1", .span(ByteRange(0, 1000))),
        ("bytes=5000-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=", .whole),
        ("bytes=,", .whole),
        ("bytes=--5", .whole),
        ("bytes=+5-10", .whole),
        ("bytes=5-+10", .whole),
        ("bytes=99999999999999999999-", .whole),
        ("bytes=10-5", .whole),
        ("items=0-5", .whole),
        ("bytes=0-99, ,200-299", .span(ByteRange(0, 300))),
    ] as [(String, RangeHeader)])
    func rangeHeaders(_ header: String, _ expected: RangeHeader) {
        #expect(RangeHeader(header, length: 1000) == expected, "\(header)")
    }

    @Test func ifRangeMatchesOnlyTheSameStrongValidator() {
        let lm = "Mon, 02 Nov 2026 10:00:00 GMT"
        #expect(IfRange.matches("\"a\"", etag: "\"a\"", lastModified: lm))
        #expect(!IfRange.matches("\"b\"", etag: "\"a\"", lastModified: lm))
        #expect(!IfRange.matches("W/\"a\"", etag: "W/\"a\"", lastModified: nil))
        #expect(!IfRange.matches("\"a\"", etag: "W/\"a\"", lastModified: nil))
        #expect(IfRange.matches(lm, etag: "\"a\"", lastModified: lm))
        #expect(!IfRange.matches("Tue, 03 Nov 2026 10:00:00 GMT", etag: nil, lastModified: lm))
        #expect(!IfRange.matches(lm, etag: nil, lastModified: nil))
    }

    // MARK: - Who may ask, and what may be contacted

    @Test func hostHeadersNameThisProxyOnly() {
        let names = ServerNames(listening: "127.0.0.1", port: 8089, extra: ["kiosk.lan"])
        for ok in ["127.0.0.1:8089", "localhost:8089", "LOCALHOST:8089", "[::1]:8089", "kiosk.lan:8089", "localhost.:8089"] {
            #expect(names.accepts(ok), "\(ok)")
        }
        for bad in ["evil.example:8089", "127.0.0.1:8090", "127.0.0.1", "localhost", "[::1]", "127.0.0.1:80x", "[::1", "attacker.localhost:8089"] {
            #expect(!names.accepts(bad), "\(bad)")
        }
        #expect(ServerNames(listening: "0.0.0.0", port: 80).accepts("localhost"))
    }

    @Test func theAllowListIsCheckedOnWhatLibcurlContacts() {
        var allowed = AllowedOrigins()
        allowed.add(host: "allowed.test", port: nil)
        allowed.add(host: "127.0.0.1", port: 8080)
        func ok(_ url: String) -> Bool { OriginTarget.of(url).map(allowed.allows) ?? false }
        #expect(ok("http://allowed.test/v.mp4"))
        #expect(ok("https://allowed.test:8443/v.mp4"))
        #expect(ok("http://ALLOWED.test./v.mp4"))
        #expect(ok("http://127.0.0.1:8080/v.mp4"))
        #expect(!ok("http://127.0.0.1:8081/v.mp4"))  // another port of an allowed host
        #expect(!ok("http://127.0.0.1/v.mp4"))       // port 80
        #expect(!ok("http://127.0.0.2:18081\u{0}@allowed.test/v.mp4"))
        #expect(!ok("http://allowed.test@127.0.0.2/v.mp4"))
        #expect(!ok("http://127.0.0.2/x\r\nHost: allowed.test"))
        #expect(!ok("http://[::ffff:127.0.0.2]/v.mp4"))
        #expect(!ok("http://allowed.test.evil/v.mp4"))
        #expect(OriginTarget.of("http://127.0.0.2:18081\u{0}@allowed.test/v.mp4") == nil)
        #expect(OriginTarget.of("http://allowed.test@127.0.0.2:81/v.mp4") == OriginTarget(host: "127.0.0.2", port: 81))
        #expect(OriginTarget.of("http://[::1]:81/v.mp4") == OriginTarget(host: "::1", port: 81))
        // An IPv6 zone names the link: a link-local address allowed on one is not on another.
        var linkLocal = AllowedOrigins()
        linkLocal.add(host: "fe80::1%eth0", port: 80)
        #expect(OriginTarget.of("http://[fe80::1%25eth0]/v.mp4") == OriginTarget(host: "fe80::1%eth0", port: 80))
        #expect(OriginTarget.of("http://[fe80::1%25eth0]/v.mp4").map(linkLocal.allows) == true)
        #expect(OriginTarget.of("http://[fe80::1%25eth1]/v.mp4").map(linkLocal.allows) == false)
        #expect(OriginTarget.of("http://[fe80::1]/v.mp4").map(linkLocal.allows) == false)
        var anyLink = AllowedOrigins()
        anyLink.add(host: "fe80::1", port: 80)
        #expect(OriginTarget.of("http://[fe80::1%25eth1]/v.mp4").map(anyLink.allows) == false)
        #expect(AllowedOrigins.rule("[fe80::1%eth0]:80")! == ("fe80::1%eth0", 80))
        #expect(AllowedOrigins.rule("cdn.example:443")! == ("cdn.example", 443))
        #expect(AllowedOrigins.rule("[::1]:80")! == ("::1", 80))
        #expect(AllowedOrigins.rule("cdn.example:99999") == nil)
        #expect(AllowedOrigins.rule("a@b") == nil)
    }

    /// `*.DOMAIN`: every name under DOMAIN (a CDN's edges), not DOMAIN itself, never an address.
    @Test func aWildcardRuleAllowsTheNamesUnderItsDomain() {
        #expect(AllowedOrigins.rule("*.cdn.example")! == ("*.cdn.example", nil))
        #expect(AllowedOrigins.rule("*.CDN.example.:443")! == ("*.CDN.example.", 443))  // add() lower-cases it
        for bad in ["*", "*.", "*.:80", "edge*.cdn.example", "*.*.cdn.example", "cdn.*.example", "**.cdn.example", "*..cdn.example", "*.[::1]", "*.0.1", "*.1"] {
            #expect(AllowedOrigins.rule(bad) == nil, "\(bad)")
        }
        var allowed = AllowedOrigins()
        let rule = AllowedOrigins.rule("*.CDN.example.")!
        allowed.add(host: rule.host, port: rule.port)
        let port = AllowedOrigins.rule("*.edge.test:8080")!
        allowed.add(host: port.host, port: port.port)
        func ok(_ url: String) -> Bool { OriginTarget.of(url).map(allowed.allows) ?? false }
        #expect(ok("http://edge7.cdn.example/v.mp4"))
        #expect(ok("https://a.b.CDN.example./v.mp4"))
        #expect(!ok("http://cdn.example/v.mp4"))
        #expect(!ok("http://evilcdn.example/v.mp4"))
        #expect(!ok("http://edge7.cdn.example.evil/v.mp4"))
        #expect(!ok("http://cdn.example@127.0.0.2/v.mp4"))
        #expect(!ok("http://127.0.0.1:8080/v.mp4"))  // an address is never a name under a domain
        #expect(ok("http://x.edge.test:8080/v.mp4") && !ok("http://x.edge.test:8081/v.mp4"))
        var numeric = AllowedOrigins()
        numeric.add(host: "*.0.1", port: nil)
        for (host, address) in [("127.0.0.1", true), ("::1", true), ("x.0x7f", true), ("a.2130706433", true), ("edge7.cdn.example", false),
                                ("0x7f.example", false), ("1.example", false)] {
            #expect(OriginTarget(host: host, port: 80).isAddress == address, "\(host)")
        }
        // Nor an address written another way (libcurl reads these as 127.0.0.1).
        for other in ["0x7f.0.0.1", "0177.0.0.1", "2130706433", "127.1", "0x7f000001"] {
            #expect(OriginTarget.of("http://\(other)/v.mp4").map(numeric.allows) == false, "\(other)")
        }
    }

    @Test func onlyInertTypesPassAsThemselves() {
        for passed in ["video/mp4", "audio/mp4", "video/mp2t", "application/vnd.apple.mpegurl", "audio/mpegurl", "image/jpeg", "text/vtt",
                       "video/webm; codecs=vp9"] {
            #expect(ProxyURL.safeContentType(passed) == passed)
        }
        for active in ["text/html", "text/html; charset=utf-8", "image/svg+xml", "application/xhtml+xml", "text/javascript",
                       "application/pdf", "text/xml", "video/x-whatever+xml", ""] {
            #expect(ProxyURL.safeContentType(active) == "application/octet-stream", "\(active)")
        }
    }

    /// Found by the ProxyRules fuzzer: NSString's pathExtension traps on `L///v//`, a file name a
    /// proxy URL can carry percent-encoded (`/v/ORIGIN/L%2F%2F%2Fv%2F%2F`); serve died on it.
    @Test func aFileNameOfSlashesHasNoExtensionAndNoTrap() {
        #expect(ProxyURL.contentType(origin: nil, name: "L///v//") == "application/octet-stream")
        #expect(ProxyURL.contentType(origin: "application/octet-stream", name: "a///b.mp4//") == "video/mp4")
        #expect(ProxyURL.contentType(origin: nil, name: "x.m3u8") == "application/vnd.apple.mpegurl")
        #expect(ProxyURL.contentType(origin: nil, name: ".mp4") == "application/octet-stream")
        let page = ResponseHead(status: 200, reason: "OK", headers: [("Content-Type", "text/html")], effectiveURL: "http://o/a///b.mp4//")
        #expect(ResponseJudge.notMedia(page) == "origin answered a web page (Content-Type: text/html) for a .mp4 video")
    }
}

@Suite struct OriginURLTests {
    @Test func internationalisedHostsBecomeASCII() {
        setlocale(LC_CTYPE, "C.UTF-8")  // as the vcache executable does
        #expect(OriginTarget.asciiHost("http://bücher.example/x.mp4") == "http://xn--bcher-kva.example/x.mp4")
        #expect(OriginTarget.asciiHost("http://example.com/ü.mp4") == "http://example.com/ü.mp4" || OriginTarget.asciiHost("http://example.com/ü.mp4").hasPrefix("http://example.com/"))
        #expect(OriginTarget.asciiHost("http://plain.example/x.mp4") == "http://plain.example/x.mp4")
    }

    /// A live media playlist is answered from its last fetch for half its target duration, then
    /// fetched again; VOD playlists and masters are never kept.
    @Test func livePlaylistsAreKeptForHalfTheirTargetDuration() throws {
        let memo = LivePlaylists()
        let t0 = ContinuousClock.now
        func answer(_ text: String) -> SmallGet.Answer {
            SmallGet.Answer(status: 200, body: Data(text.utf8), finalURL: "http://o/l.m3u8", contentType: nil)
        }
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\ns0.ts\n"
        memo.keep("u", answer(live), playlist: try HLSPlaylist.parse(text: live, url: "http://o/l.m3u8"), now: t0)
        #expect(memo.fresh("u", now: t0 + .milliseconds(2999))?.body == Data(live.utf8))
        #expect(memo.fresh("u", now: t0 + .seconds(3)) == nil)
        let vod = live + "#EXT-X-ENDLIST\n"
        memo.keep("u", answer(vod), playlist: try HLSPlaylist.parse(text: vod, url: "http://o/l.m3u8"), now: t0)
        #expect(memo.fresh("u", now: t0) == nil)
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\nl.m3u8\n"
        memo.keep("m", answer(master), playlist: try HLSPlaylist.parse(text: master, url: "http://o/m.m3u8"), now: t0)
        #expect(memo.fresh("m", now: t0) == nil)
        // Bounded: the oldest goes first.
        for i in 0...LivePlaylists.capacity {
            memo.keep("k\(i)", answer(live), playlist: try HLSPlaylist.parse(text: live, url: "http://o/l.m3u8"), now: t0 + .milliseconds(i))
        }
        #expect(memo.fresh("k0", now: t0 + .seconds(1)) == nil)
        #expect(memo.fresh("k\(LivePlaylists.capacity)", now: t0 + .seconds(1)) != nil)
    }
}
