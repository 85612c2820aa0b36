import Testing
@testable import VCacheCore

@Suite struct RangeSetTests {
    /// A bitmap over [0, size): the obviously-correct model RangeSet must agree with.
    struct Bitmap {
        var bits: [Bool]
        init(_ size: Int) { bits = Array(repeating: false, count: size) }
        mutating func set(_ r: ByteRange, _ v: Bool) { for i in Int(r.lowerBound)..<Int(r.upperBound) { bits[i] = v } }
        var ranges: [ByteRange] {
            var out: [ByteRange] = []
            var i = 0
            while i < bits.count {
                if bits[i] {
                    let s = i
                    while i < bits.count && bits[i] { i += 1 }
                    out.append(ByteRange(Int64(s), Int64(i)))
                } else { i += 1 }
            }
            return out
        }
        func missing(_ r: ByteRange) -> [ByteRange] {
            var inverse = Bitmap(bits.count)
            for i in Int(r.lowerBound)..<Int(r.upperBound) { inverse.bits[i] = !bits[i] }
            return inverse.ranges
        }
    }

    @Test func agreesWithABitmapOverThousandsOfRandomOperations() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<40 {
            var set = RangeSet()
            var model = Bitmap(300)
            for _ in 0..<150 {
                let a = Int64.random(in: 0..<300, using: &rng)
                let b = Int64.random(in: a...300, using: &rng)
                let r = ByteRange(a, b)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0, 1: set.insert(r); model.set(r, true)
                case 2: set.remove(r); model.set(r, false)
                default:
                    #expect(set.missing(in: r) == model.missing(r))
                    #expect(set.contains(r) == model.missing(r).isEmpty)
                    #expect(set.coverage(of: r) == r.count - model.missing(r).reduce(0) { $0 + $1.count })
                }
                #expect(set.ranges == model.ranges)
                #expect(set.count == Int64(model.bits.filter { $0 }.count))
                let probe = Int64.random(in: 0..<300, using: &rng)
                let expectedEnd = Int64((Int(probe)..<300).first { !model.bits[$0] } ?? 300)
                #expect(set.contiguousEnd(from: probe) == (model.bits[Int(probe)] ? expectedEnd : probe))
            }
        }
    }

    @Test func mergesAdjacentAndOverlappingRanges() {
        var s = RangeSet()
        s.insert(ByteRange(10, 20))
        s.insert(ByteRange(20, 30))
        s.insert(ByteRange(5, 12))
        s.insert(ByteRange(40, 50))
        #expect(s.ranges == [ByteRange(5, 30), ByteRange(40, 50)])
        #expect(s.missing(in: ByteRange(0, 60)) == [ByteRange(0, 5), ByteRange(30, 40), ByteRange(50, 60)])
    }

    @Test func coalescesGapsCloserThanTheThreshold() {
        let gaps = [ByteRange(0, 100), ByteRange(150, 200), ByteRange(1000, 1100)]
        #expect(RangeSet.coalesce(gaps, within: 64) == [ByteRange(0, 200), ByteRange(1000, 1100)])
        #expect(RangeSet.coalesce(gaps, within: 10) == gaps)
    }

    @Test(arguments: [
        ("0-99", RangeRequest.span(first: 0, last: 99)), ("100-", .span(first: 100, last: nil)), ("-500", .suffix(500)),
    ])
    func parsesHTTPRangeSpecs(text: String, expected: RangeRequest) {
        #expect(RangeRequest(httpSpec: text) == expected)
    }

    @Test func rejectsMalformedRangeSpecs() {
        for bad in ["", "-", "5-2", "a-b", "-0", "1-2-3"] { #expect(RangeRequest(httpSpec: bad) == nil, "\(bad)") }
    }

    @Test func resolvesRequestsAgainstTheLength() {
        #expect(RangeRequest.head(2048).resolve(length: 1000) == ByteRange(0, 1000))
        #expect(RangeRequest.suffix(100).resolve(length: 1000) == ByteRange(900, 1000))
        #expect(RangeRequest.span(first: 2000, last: nil).resolve(length: 1000) == nil)
        #expect(RangeRequest.span(first: 10, last: 19).resolve(length: 1000) == ByteRange(10, 20))
        #expect(RangeRequest.whole.resolve(length: 0) == nil)
    }
}
