// libFuzzer target: the MPD parser (XMLTree on libxml2, MPD.parse) and the segment-address
// computation of every Representation, whole and for the first 10 s, and the sidx reader on the
// same bytes. Built by `make fuzz-build` against VCacheCore. Properties: no trap (huge S@r,
// startNumber near 2^63, timescale 0, durations that overflow are errors), no more segments than
// DASHLimits.maxSegments, and segment starts never NaN.
import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMPD(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = MPD.looksLikeMPD(firstBytes: bytes, contentType: nil)
    _ = try? DASHSidx.subsegments(bytes, indexRange: MPD.ByteSpan(first: 0, last: Int64(max(0, size - 1))), url: "http://o/f.mp4")
    guard let mpd = try? MPD.parse(bytes, url: "http://o/a/manifest.mpd") else { return 0 }
    for period in mpd.periods {
        for set in period.adaptationSets {
            for rep in set.representations {
                for until in [nil, 10.0] as [Double?] {
                    guard let plan = try? rep.plan(periodDuration: period.duration, until: until) else { continue }
                    precondition(plan.segments.count <= DASHLimits.maxSegments, "more segments than the limit")
                    for s in plan.segments { precondition(!s.start.isNaN, "a NaN segment start") }
                }
            }
        }
    }
    _ = try? DASHPlan(variant: .all, seconds: 10).choose(mpd)
    return 0
}
