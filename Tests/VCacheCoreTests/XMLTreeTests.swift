import Foundation
import Testing
@testable import VCacheCore

/// The libxml2 reader behind `XMLTree`: the tree it builds, and what hostile XML it refuses.
@Suite struct XMLTreeTests {
    static func parse(_ s: String, limits: XMLTree.Limits = XMLTree.Limits()) throws(XMLTree.Error) -> XMLElement {
        try XMLTree.parse(Array(s.utf8), limits: limits)
    }

    @Test func buildsElementsAttributesTextAndNamespaces() throws {
        let root = try Self.parse("""
            <?xml version="1.0" encoding="UTF-8"?>
            <!-- a comment first -->
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="static">
              <BaseURL> http://a/b/ </BaseURL>
              <Period><AdaptationSet cenc:default_KID="k" lang="en &amp; fr"/></Period>
              <BaseURL><![CDATA[x&y]]></BaseURL>
            </MPD>
            """)
        #expect(root.name == "MPD")
        #expect(root.namespace == MPD.namespace)
        #expect(root.attributes == [.init(name: "type", namespace: nil, value: "static")])
        #expect(root.children("BaseURL").map(\.text) == [" http://a/b/ ", "x&y"])
        let set = try #require(root.child("Period")?.child("AdaptationSet"))
        #expect(set[attribute: "lang"] == "en & fr")
        #expect(set[attribute: "default_KID"] == nil)
        #expect(set.attributes.contains(.init(name: "default_KID", namespace: "urn:mpeg:cenc:2013", value: "k")))
    }

    @Test(arguments: [
        ("a DOCTYPE", "<!DOCTYPE MPD><MPD/>", XMLTree.Error.doctype),
        ("billion laughs", "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;\">]><MPD>&b;</MPD>", .doctype),
        ("an external entity", "<!DOCTYPE m [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><MPD>&x;</MPD>", .doctype),
        ("an undeclared entity", "<MPD>&x;</MPD>", .malformed(line: 1, message: "Entity 'x' not defined")),
        ("an unclosed tag", "<MPD><Period></MPD>", .malformed(line: 1, message: "Opening and ending tag mismatch: Period line 1 and MPD")),
        ("trailing content", "<MPD/><MPD/>", .malformed(line: 1, message: "Extra content at the end of the document")),
        ("nothing", "", .empty),
    ] as [(String, String, XMLTree.Error)])
    func refusesHostileOrBrokenXML(_ what: String, _ xml: String, _ expected: XMLTree.Error) {
        #expect(throws: expected, "\(what)") { try Self.parse(xml) }
        // `check` (what `edit` runs before libxml2 builds its tree) refuses the same.
        #expect(throws: expected, "\(what), check") { try XMLTree.check(Array(xml.utf8)) }
    }

    /// A static MPD of `representations` Representations, each a SegmentTimeline of `segments`
    /// `S` elements padded so the whole is about `bytes` bytes.
    static func largeMPD(representations: Int, segments: Int, bytes: Int) -> [UInt8] {
        let frame = 400
        let pad = max(0, (bytes - frame * representations) / (representations * segments) - 19)
        var out = "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" mediaPresentationDuration=\"PT\(2 * segments)S\">"
        out += "<Period><AdaptationSet contentType=\"video\" mimeType=\"video/mp4\">\n"
        let s = "<S d=\"2000\" n=\"\(String(repeating: "x", count: pad))\"/>\n"
        for r in 0..<representations {
            out += "<Representation id=\"r\(r)\" bandwidth=\"\(1000 + r)\"><SegmentTemplate timescale=\"1000\" media=\"$RepresentationID$/$Time$.m4s\" initialization=\"$RepresentationID$/init.mp4\"><SegmentTimeline>\n"
            out += String(repeating: s, count: segments)
            out += "</SegmentTimeline></SegmentTemplate></Representation>\n"
        }
        out += "</AdaptationSet></Period></MPD>\n"
        return Array(out.utf8)
    }

    /// F1b: an MPD near the documented limits (16 MiB, 500,000 elements) parses, plans and is
    /// rewritten whole; one byte or one element past them is refused naming the limit.
    @Test func anMPDNearTheLimitsIsReadAndOnePastThemIsRefused() throws {
        let near = Self.largeMPD(representations: 5, segments: 90_000, bytes: XMLTree.Limits().maxBytes - 100_000)
        #expect(near.count > XMLTree.Limits().maxBytes - 200_000 && near.count <= XMLTree.Limits().maxBytes, "\(near.count)")
        let mpd = try MPD.parse(near, url: "http://o.example/s/manifest.mpd")
        let plan = try #require(mpd.representations.first).representation.plan(periodDuration: mpd.periods[0].duration)
        #expect(mpd.representations.count == 5 && plan.segments.count == 90_000)
        #expect(plan.segments.last?.url == "http://o.example/s/r0/\((90_000 - 1) * 2000).m4s")
        let rewritten = try DASHRewriter(url: "http://o.example/s/manifest.mpd", proxy: "http://127.0.0.1:8089").rewrite(near)
        let text = String(decoding: rewritten, as: UTF8.self)
        #expect(text.contains("<BaseURL>http://127.0.0.1:8089/d/"))
        #expect(text.hasSuffix("</MPD>\n") && text.contains("<Representation id=\"r4\""))

        let over = near + [UInt8](repeating: 0x20, count: XMLTree.Limits().maxBytes - near.count + 1)
        #expect(throws: XMLTree.Error.tooLarge(bytes: 16_777_217, limit: 16_777_216)) { try XMLTree.check(over) }
        #expect(XMLTree.Error.tooLarge(bytes: 16_777_217, limit: 16_777_216).description == "the document is 16777217 bytes, over the limit of 16777216 bytes")
        let crowded = Self.largeMPD(representations: 5, segments: 100_000, bytes: 0)
        #expect(throws: XMLTree.Error.tooManyElements(limit: 500_000)) {
            try DASHRewriter(url: "http://o.example/s/manifest.mpd", proxy: "http://127.0.0.1:8089").rewrite(crowded)
        }
        #expect(XMLTree.Error.tooManyElements(limit: 500_000).description == "the document has more than the limit of 500000 elements")
    }

    @Test func limitsAreErrorsNamingTheLimit() {
        var l = XMLTree.Limits()
        l.maxDepth = 3
        #expect(throws: XMLTree.Error.tooDeep(limit: 3)) { try Self.parse("<a><b><c><d/></c></b></a>", limits: l) }
        #expect((try? Self.parse("<a><b><c/></b></a>", limits: l)) != nil)
        l = XMLTree.Limits()
        l.maxElements = 3
        #expect(throws: XMLTree.Error.tooManyElements(limit: 3)) { try Self.parse("<a><b/><b/><b/></a>", limits: l) }
        l = XMLTree.Limits()
        l.maxAttributes = 2
        #expect(throws: XMLTree.Error.tooManyAttributes(element: "a", limit: 2)) { try Self.parse("<a x='1' y='2' z='3'/>", limits: l) }
        l = XMLTree.Limits()
        l.maxBytes = 10
        #expect(throws: XMLTree.Error.tooLarge(bytes: 11, limit: 10)) { try Self.parse("<a>123</a> ", limits: l) }
        #expect(XMLTree.Error.tooDeep(limit: 32).description == "elements are nested deeper than the limit of 32 levels")
    }

    /// libxml2 compares a start tag's attributes pair by pair: 60,000 on one element took
    /// seconds (100,000 half a minute) before the limit was seen. Refused before libxml2 reads it;
    /// `=` in values, comments and CDATA are not attributes.
    @Test func anElementWithTensOfThousandsOfAttributesIsRefusedAtOnce() {
        let many = "<MPD " + (0..<60_000).map { "a\($0)='1'" }.joined(separator: " ") + "/>"
        let start = ContinuousClock.now
        #expect(throws: XMLTree.Error.tooManyAttributes(element: "MPD", limit: 128)) { try Self.parse(many) }
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(XMLTree.crowdedStartTag(Array("<d:MPD \(String(repeating: "x='1' ", count: 9))>".utf8), over: 8) == "MPD")
        let quiet = "<a v='\(String(repeating: "=", count: 600))'><!-- \(String(repeating: "=", count: 600)) --><![CDATA[\(String(repeating: "=", count: 600))]]>\(String(repeating: "=", count: 600))</a>"
        #expect(XMLTree.crowdedStartTag(Array(quiet.utf8), over: 256) == nil)
        #expect((try? Self.parse(quiet)) != nil)
    }

    @Test func deepNestingPastLibxml2sOwnLimitIsOurs() {
        let deep = String(repeating: "<a>", count: 5000) + String(repeating: "</a>", count: 5000)
        #expect(throws: XMLTree.Error.tooDeep(limit: 32)) { try Self.parse(deep) }
    }

    /// libxml2's reader joins a long text node or comment piece by piece (the probe's
    /// 16,777,000-byte MPD, one comment, took 20 s to fail with "Huge input lookup"): one past
    /// `maxTextBytes` is refused before libxml2 reads it, naming the limit; one under it is read.
    @Test func aTextNodeOrCommentPastTheTextLimitIsRefusedAtOnce() throws {
        let open = "<?xml version=\"1.0\"?><MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">"
        let limit = XMLTree.Limits().maxTextBytes
        for (before, after) in [("<!--", "-->"), ("<x>", "</x>"), ("<![CDATA[", "]]>"), ("<x a='", "'/>"), ("", "")] {
            func doc(_ n: Int) -> [UInt8] {
                Array((open + before).utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: n) + Array((after + "</MPD>").utf8)
            }
            let huge = doc(16_777_000 - doc(0).count)
            #expect(huge.count == 16_777_000)
            let start = ContinuousClock.now
            #expect(throws: XMLTree.Error.textTooLong(limit: limit), "\(before)") { try XMLTree.parse(huge) }
            #expect(ContinuousClock.now - start < .seconds(10), "\(before): \(ContinuousClock.now - start)")
            #expect(throws: XMLTree.Error.textTooLong(limit: limit)) { try XMLTree.parse(doc(limit + 1)) }
            #expect(try XMLTree.parse(doc(limit - 20)).name == "MPD", "\(before)")
        }
    }
}
