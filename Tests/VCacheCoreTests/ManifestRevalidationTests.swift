import Testing
@testable import VCacheCore

/// `ManifestRevalidation.outcome`: what an answer to the conditional GET of a cached manifest means.
@Suite struct ManifestRevalidationTests {
    let cached: [UInt8] = Array("<MPD a/>".utf8)
    let v = Validators(length: 8, etag: "\"2\"", lastModified: nil)

    func outcome(_ status: Int, _ body: [UInt8]) -> ManifestRevalidation.Outcome {
        ManifestRevalidation.outcome(status: status, body: body, cached: cached, validators: v, contentType: nil, finalURL: nil)
    }

    @Test
    func answersAreJudgedByStatusThenBytes() {
        #expect(outcome(304, []) == .unchanged)
        // A new ETag over the same bytes (an origin whose ETag flaps, no validators at all): unchanged.
        #expect(outcome(200, cached) == .unchanged)
        #expect(outcome(200, Array("<MPD b/>".utf8)) == .changed(body: Array("<MPD b/>".utf8), validators: v, contentType: nil, finalURL: nil))
        #expect(outcome(200, []) == .failed("origin answered 200 with an empty body", .fixOrigin))
        #expect(outcome(503, []) == .failed("origin answered 503", .tryLater))
        #expect(outcome(404, []) == .failed("origin answered 404", .fixOrigin))
        #expect(outcome(206, Array("<MP".utf8)) == .failed("origin answered 206", .fixOrigin))  // no range was asked
    }

    /// The MPD moved behind a redirect (probe h2, F2): the same bytes, answered from another
    /// folder, name other URLs: changed (a 304 too). Another query (a token) is no move.
    @Test
    func theSameBytesFromAnotherFolderAreAChange() {
        func at(_ status: Int, _ body: [UInt8], _ final: String) -> ManifestRevalidation.Outcome {
            ManifestRevalidation.outcome(status: status, body: body, cached: cached, cachedBase: "http://o/a/m.mpd?t=1", validators: v, contentType: nil, finalURL: final)
        }
        #expect(at(200, cached, "http://o/b/m.mpd") == .changed(body: cached, validators: v, contentType: nil, finalURL: "http://o/b/m.mpd"))
        #expect(at(304, [], "http://o/b/m.mpd") == .changed(body: cached, validators: Validators(length: 8, etag: "\"2\"", lastModified: nil), contentType: nil, finalURL: "http://o/b/m.mpd"))
        #expect(at(200, cached, "http://o/a/m.mpd?t=2") == .unchanged)
        #expect(at(304, [], "http://o/a/other.mpd") == .unchanged)
    }
}
