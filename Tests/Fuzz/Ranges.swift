// libFuzzer target: the request's Range header (serve), the response's Content-Range and a 416's
// `bytes */N` (prefetch), on arbitrary text. Built by `make fuzz-build` against VCacheCore.
// Properties: a span lies inside the representation and, written back as `bytes=A-B`, parses to
// itself; a parsed Content-Range written back parses equal and its range never traps.
import Foundation
import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRanges(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    let header = input.line(1)
    for length in [input.number(0, in: 0...Int64.max), 0, 1, 1000] {
        let parsed = RangeHeader(header, length: length)
        if case .span(let r) = parsed {
            precondition(r.lowerBound >= 0 && r.lowerBound < r.upperBound && r.upperBound <= length, "span \(r) outside \(length) bytes")
            precondition(RangeHeader("bytes=\(r.httpSpec)", length: length) == parsed, "bytes=\(r.httpSpec) does not parse back")
        }
    }
    for text in [header, "bytes " + header, input.line(2)] {
        if let cr = ContentRange(text) {
            precondition(cr.first >= 0 && cr.first <= cr.last, "bad range \(cr)")
            if let c = cr.complete { precondition(cr.last < c, "last byte past the length: \(cr)") }
            let r = cr.range
            precondition(r.count == cr.last - cr.first + 1)
            let again = ContentRange("bytes \(cr.first)-\(cr.last)/\(cr.complete.map(String.init) ?? "*")")
            precondition(again == cr, "\(cr) does not parse back")
        }
        if let n = ResponseJudge.unsatisfiedLength(text) {
            precondition(n >= 0 && ResponseJudge.unsatisfiedLength("bytes */\(n)") == n)
        }
    }
    return 0
}
