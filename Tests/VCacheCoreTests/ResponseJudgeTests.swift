import Testing
@testable import VCacheCore

/// The response rules of RFC 9110 as vcache applies them, one line per case.
@Suite struct ResponseJudgeTests {
    static let strong = Validators(length: 1000, etag: "\"a\"", lastModified: "Mon, 02 Nov 2026 10:00:00 GMT")
    static let weak = Validators(length: 1000, etag: "W/\"a\"", lastModified: nil)
    static let dateOnly = Validators(length: 1000, etag: nil, lastModified: "Mon, 02 Nov 2026 10:00:00 GMT")
    static let none = Validators(length: nil, etag: nil, lastModified: nil)

    /// A judge for `bytes=start-(end-1)` (or the last `suffix` bytes) with `held` validators.
    static func judge(_ start: Int64?, _ end: Int64?, suffix: Int64? = nil, held: Validators = strong, hasBytes: Bool = true,
                      wantedEnd: Int64? = nil, thisRun: Bool = false, promised: Validators? = nil, digests: [DigestCheck] = []) -> ResponseJudge {
        let spec = suffix.map { "-\($0)" } ?? "\(start ?? 0)-\(end.map { String($0 - 1) } ?? "")"
        return ResponseJudge(asked: .init(spec: spec, start: start, end: end, suffix: suffix), held: held, hasBytes: hasBytes,
                             wantedEnd: wantedEnd, weakPartsCombine: thisRun, promised: promised, heldDigests: digests)
    }

    /// The origin's md5 of the held version (x-goog-hash), as the catalog keeps it.
    static let heldMD5 = [DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: "00112233445566778899aabbccddeeff",
                                                               source: .origin(header: "x-goog-hash")))]

    static func head(_ status: Int, _ headers: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, reason: HTTPStatus.reason(status), headers: headers, effectiveURL: "http://o/v.mp4")
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var judge: ResponseJudge
        var head: ResponseHead
        var expected: ResponseJudge.Verdict
        var testDescription: String { name }
    }

    static let lm = "Mon, 02 Nov 2026 10:00:00 GMT"
    static let cases: [Case] = [
        Case(name: "206 exactly as asked, same strong ETag: combined",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 100, limit: 200, validators: strong)),
        Case(name: "206 shorter than asked: kept, the rest is asked again",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-149/1000"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 100, limit: 150, validators: strong)),
        Case(name: "206 shifted from what was asked: refused",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 101-200/1000"), ("ETag", "\"a\"")]),
             expected: .reject(.badContentRange(asked: "100-199", got: "bytes 101-200/1000"))),
        Case(name: "206 longer than asked: refused",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-299/1000"), ("ETag", "\"a\"")]),
             expected: .reject(.badContentRange(asked: "100-199", got: "bytes 100-299/1000"))),
        Case(name: "206 without Content-Range: refused",
             judge: judge(100, 200), head: head(206, [("ETag", "\"a\"")]),
             expected: .reject(.badContentRange(asked: "100-199", got: "(none)"))),
        Case(name: "206 with * total: kept at its offset, the held length stays",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-199/*"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 100, limit: 200, validators: strong)),
        Case(name: "206 with * total to a suffix request: the start cannot be checked",
             judge: judge(nil, nil, suffix: 100, hasBytes: false), head: head(206, [("Content-Range", "bytes 900-999/*")]),
             expected: .reject(.missingLength)),
        Case(name: "206 to a suffix request starts at length minus N",
             judge: judge(nil, nil, suffix: 100, held: none, hasBytes: false), head: head(206, [("Content-Range", "bytes 900-999/1000"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 900, limit: 1000, validators: Validators(length: 1000, etag: "\"a\"", lastModified: nil))),
        Case(name: "206 with another strong ETag: the old version is dropped first",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"b\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 1000, etag: "\"b\"", lastModified: nil),
                                reason: "its validators changed (ETag \"a\" -> \"b\")")),
        Case(name: "206 with a changed length: another version",
             judge: judge(100, 200), head: head(206, [("Content-Range", "bytes 100-199/2000"), ("ETag", "\"a\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 2000, etag: "\"a\"", lastModified: nil),
                                reason: "its validators changed (length 1000 -> 2000)")),
        Case(name: "206 with only the same weak ETag, bytes from an earlier run: never combined",
             judge: judge(100, 200, held: weak), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "W/\"a\"")]),
             expected: .replace(offset: 100, limit: 200, validators: weak,
                                reason: "the cached bytes have no strong validator in common with the response")),
        Case(name: "206 with only the same weak ETag, bytes from this run: combined",
             judge: judge(100, 200, held: weak, thisRun: true), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "W/\"a\"")]),
             expected: .accept(offset: 100, limit: 200, validators: weak)),
        Case(name: "206 with another weak ETag in the same run: dropped",
             judge: judge(100, 200, held: weak, thisRun: true), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "W/\"b\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 1000, etag: "W/\"b\"", lastModified: nil),
                                reason: "its validators changed (ETag W/\"a\" -> W/\"b\")")),
        Case(name: "206 with Last-Modified only, the same date: combined",
             judge: judge(100, 200, held: dateOnly), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("Last-Modified", lm)]),
             expected: .accept(offset: 100, limit: 200, validators: dateOnly)),
        Case(name: "206 with Last-Modified only, another date: dropped",
             judge: judge(100, 200, held: dateOnly), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("Last-Modified", "Tue, 03 Nov 2026 10:00:00 GMT")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 1000, etag: nil, lastModified: "Tue, 03 Nov 2026 10:00:00 GMT"),
                                reason: "its validators changed (Last-Modified \(lm) -> Tue, 03 Nov 2026 10:00:00 GMT)")),
        Case(name: "206 of an entry with nothing held: taken as it comes",
             judge: judge(0, 100, held: none, hasBytes: false), head: head(206, [("Content-Range", "bytes 0-99/1000"), ("ETag", "W/\"x\"")]),
             expected: .accept(offset: 0, limit: 100, validators: Validators(length: 1000, etag: "W/\"x\"", lastModified: nil))),
        Case(name: "200 with the same strong ETag to a range request: the origin ignores ranges, the held bytes stay",
             judge: judge(100, 200, wantedEnd: 200), head: head(200, [("Content-Length", "1000"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 0, limit: 200, validators: strong)),
        Case(name: "200 with another ETag: the whole new version from byte 0, the old dropped first",
             judge: judge(100, 200, wantedEnd: 200), head: head(200, [("Content-Length", "1000"), ("ETag", "\"b\"")]),
             expected: .replace(offset: 0, limit: 200, validators: Validators(length: 1000, etag: "\"b\"", lastModified: nil),
                                reason: "its validators changed (ETag \"a\" -> \"b\")")),
        Case(name: "200 with the same weak ETag: not proven the same version",
             judge: judge(100, 200, held: weak, wantedEnd: nil, thisRun: true), head: head(200, [("Content-Length", "1000"), ("ETag", "W/\"a\"")]),
             expected: .replace(offset: 0, limit: 1000, validators: weak,
                                reason: "origin sent the whole video (200) to a range request without a strong validator")),
        Case(name: "200 without a length and nothing held: written up to what is wanted",
             judge: judge(0, 2000, held: none, hasBytes: false, wantedEnd: 2000), head: head(200, [("Transfer-Encoding", "chunked")]),
             expected: .accept(offset: 0, limit: 2000, validators: none)),
        Case(name: "200 without a length for the whole video: no limit (its length is what arrives)",
             judge: judge(0, nil, held: none, hasBytes: false), head: head(200, [("Transfer-Encoding", "chunked")]),
             expected: .accept(offset: 0, limit: nil, validators: none)),
        Case(name: "416 with bytes */N: the length is learned",
             judge: judge(5000, nil, held: none, hasBytes: false), head: head(416, [("Content-Range", "bytes */1000")]),
             expected: .learnLength(Validators(length: 1000, etag: nil, lastModified: nil), drop: false)),
        Case(name: "416 with another length than held: that version is dropped",
             judge: judge(5000, nil), head: head(416, [("Content-Range", "bytes */900")]),
             expected: .learnLength(Validators(length: 900, etag: nil, lastModified: nil), drop: true)),
        Case(name: "416 without Content-Range: refused",
             judge: judge(5000, nil), head: head(416, []),
             expected: .reject(.http(status: 416, reason: "Range Not Satisfiable"))),
        // Found by the Ranges and Judge fuzzers (make fuzz): the last byte Int64.max has no end
        // offset (it trapped), and a negative Content-Length gave a 200 a limit before its start.
        Case(name: "206 whose last byte is 2^63-1 with an unknown length: refused, not a trap",
             judge: judge(0, nil, held: none, hasBytes: false), head: head(206, [("Content-Range", "bytes 0-9223372036854775807/*")]),
             expected: .reject(.badContentRange(asked: "0-", got: "bytes 0-9223372036854775807/*"))),
        Case(name: "200 with a negative Content-Length: no length, no limit before its start",
             judge: judge(0, nil, held: none, hasBytes: false), head: head(200, [("Content-Length", "-500000")]),
             expected: .accept(offset: 0, limit: nil, validators: none)),
        Case(name: "404: refused with its status",
             judge: judge(0, 100), head: head(404, [("Content-Length", "9")]),
             expected: .reject(.http(status: 404, reason: "Not Found"))),
        // A version promised to serve's readers (the file a job writes into, a span streamed to
        // them): bytes of another version are never accepted as theirs (Validators.admits).
        Case(name: "promised a strong ETag, 206 of that ETag: accepted",
             judge: judge(100, 200, promised: strong), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"a\"")]),
             expected: .accept(offset: 100, limit: 200, validators: strong)),
        Case(name: "promised a strong ETag, nothing held, 206 of another ETag: replaced, not accepted",
             judge: judge(100, 200, held: none, hasBytes: false, promised: strong),
             head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"b\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 1000, etag: "\"b\"", lastModified: nil),
                                reason: ResponseJudge.notThePromisedVersion)),
        Case(name: "promised a strong ETag, nothing held, 200 without validators: replaced",
             judge: judge(0, nil, held: none, hasBytes: false, promised: strong), head: head(200, [("Content-Length", "1000")]),
             expected: .replace(offset: 0, limit: 1000, validators: Validators(length: 1000, etag: nil, lastModified: nil),
                                reason: ResponseJudge.notThePromisedVersion)),
        Case(name: "promised a weak ETag, this run's 206 of the same weak ETag and length: accepted",
             judge: judge(100, 200, held: weak, thisRun: true, promised: weak),
             head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "W/\"a\"")]),
             expected: .accept(offset: 100, limit: 200, validators: weak)),
        Case(name: "promised a weak ETag, nothing held, 206 of the same weak ETag but without a length: replaced",
             judge: judge(100, 200, held: none, hasBytes: false, promised: weak),
             head: head(206, [("Content-Range", "bytes 100-199/*"), ("ETag", "W/\"a\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: nil, etag: "W/\"a\"", lastModified: nil),
                                reason: ResponseJudge.notThePromisedVersion)),
        Case(name: "promised a Last-Modified only, 206 of that date and length: accepted",
             judge: judge(100, 200, held: dateOnly, promised: dateOnly),
             head: head(206, [("Content-Range", "bytes 100-199/1000"), ("Last-Modified", lm)]),
             expected: .accept(offset: 100, limit: 200, validators: dateOnly)),
        Case(name: "promised a version, the origin's other version against held bytes: the judge's own reason stays",
             judge: judge(100, 200, promised: strong), head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"b\"")]),
             expected: .replace(offset: 100, limit: 200, validators: Validators(length: 1000, etag: "\"b\"", lastModified: nil),
                                reason: "its validators changed (ETag \"a\" -> \"b\")")),
        Case(name: "promised a version, a 416 of another length: the length is learned, the promise does not apply",
             judge: judge(5000, nil, promised: strong), head: head(416, [("Content-Range", "bytes */900")]),
             expected: .learnLength(Validators(length: 900, etag: nil, lastModified: nil), drop: true)),
        // The origin's digests held with the bytes: another digest under the same validators is
        // another version (the origin changed the bytes without changing the ETag).
        Case(name: "held the origin's md5, 206 of the same ETag with the same md5: accepted",
             judge: judge(100, 200, digests: heldMD5),
             head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"a\""), ("x-goog-hash", "md5=ABEiM0RVZneImaq7zN3u/w==")]),
             expected: .accept(offset: 100, limit: 200, validators: strong)),
        Case(name: "held the origin's md5, 206 of the same ETag with another md5: replaced",
             judge: judge(100, 200, digests: heldMD5),
             head: head(206, [("Content-Range", "bytes 100-199/1000"), ("ETag", "\"a\""), ("x-goog-hash", "md5=/+7dzLuqmYh3ZlVEMyIRAA==")]),
             expected: .replace(offset: 100, limit: 200, validators: strong,
                                reason: "its md5 changed from 00112233445566778899aabbccddeeff to ffeeddccbbaa99887766554433221100 (the origin's x-goog-hash) under the same validators")),
        Case(name: "held the origin's md5, nothing held yet: another md5 is no contradiction",
             judge: judge(0, nil, held: none, hasBytes: false, digests: heldMD5),
             head: head(200, [("Content-Length", "1000"), ("x-goog-hash", "md5=/+7dzLuqmYh3ZlVEMyIRAA==")]),
             expected: .accept(offset: 0, limit: 1000, validators: Validators(length: 1000, etag: nil, lastModified: nil))),
        Case(name: "promised a version, 404: refused with its status",
             judge: judge(0, 100, promised: strong), head: head(404, []),
             expected: .reject(.http(status: 404, reason: "Not Found"))),
    ]

    @Test(arguments: cases)
    func verdict(_ c: Case) {
        #expect(c.judge.judge(c.head) == c.expected)
    }

    @Test(arguments: [
        (strong, "\"a\""),
        (weak, nil),
        (Validators(length: 1, etag: "W/\"a\"", lastModified: lm), nil),  // an entity tag held: never a date
        (dateOnly, lm),
        (none, nil),
    ] as [(Validators, String?)])
    func ifRangeCarriesOnlyAStrongValidator(_ v: Validators, _ expected: String?) {
        #expect(v.ifRange == expected)
    }
}
