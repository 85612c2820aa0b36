// libFuzzer target: ResponseJudge (is an origin's response the bytes asked for, and which
// version), on arbitrary responses. Built by `make fuzz-build` against VCacheCore. Line 0: what
// was asked (`A-B`, `A-` or `-N`); line 1: the held validators (`length etag lastModified`,
// `-` for none); line 2: the status; the rest: response headers `Name: value`. Properties: a kept
// body starts where asked (0 for a 200), ends no later than asked, and its limit is past its offset.
import Foundation
import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJudge(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    let spec = input.line(0)
    let ends = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    let asked: ResponseJudge.Asked
    if ends.count == 2, ends[0].isEmpty, let n = Int64(ends[1]), n > 0 {
        asked = .init(spec: spec, start: nil, end: nil, suffix: n)
    } else if ends.count == 2, let a = Int64(ends[0]), a >= 0 {
        let b = Int64(ends[1]).flatMap { $0 >= a && $0 < Int64.max ? $0 + 1 : nil }
        asked = .init(spec: spec, start: a, end: b)
    } else {
        let a = input.number(0, in: 0...(1 << 40))
        asked = .init(ByteRange(a, a + input.number(3, in: 1...(1 << 30))))
    }
    let held = input.line(1).split(separator: " ").map { $0 == "-" ? nil : String($0) }
    func field(_ i: Int) -> String? { i < held.count ? held[i] : nil }
    let validators = Validators(length: field(0).flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }, etag: field(1), lastModified: field(2))
    var headers: [(String, String)] = []
    for line in input.lines.dropFirst(3) {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
    }
    let status = Int(input.line(2)) ?? [200, 206, 416, 404, 500][Int(input.number(2, in: 0...4))]
    let head = ResponseHead(status: status, reason: "Reason", headers: headers, effectiveURL: "http://origin.example/v/a.mp4")
    for (hasBytes, weak) in [(false, false), (true, false), (true, true)] {
        let judge = ResponseJudge(asked: asked, held: validators, hasBytes: hasBytes, wantedEnd: asked.end, weakPartsCombine: weak)
        let offset: Int64, limit: Int64?
        switch judge.judge(head) {
        case .accept(let o, let l, _), .replace(let o, let l, _, _): (offset, limit) = (o, l)
        case .learnLength(let v, _):
            precondition(status == 416 && (v.length ?? 0) >= 0)
            continue
        case .reject: continue
        }
        precondition(status == 200 || status == 206, "a body kept from a \(status)")
        precondition(offset >= 0 && (limit.map { $0 > offset || (status == 200 && $0 == offset) } ?? true), "kept [\(offset), \(limit.map(String.init) ?? "end")) of a \(status)")
        if status == 200 { precondition(offset == 0) }
        if status == 206 {
            if let start = asked.start { precondition(offset == start, "a 206 kept from \(offset), asked \(spec)") }
            if let end = asked.end, let limit { precondition(limit <= end, "a 206 kept up to \(limit), asked up to \(end)") }
        }
    }
    return 0
}
