// libFuzzer target: the MPD parser (XMLTree on libxml2, MPD.parse) and the segment-address
// computation of every Representation, whole and for the first 10 s, and the sidx reader on the
// same bytes; serve's rewrite of it (DASHRewriter), online and cut offline. Built by `make fuzz-build` against VCacheCore. Properties: no trap (huge S@r,
// startNumber near 2^63, timescale 0, durations that overflow are errors), no more segments than
// DASHLimits.maxSegments, and segment starts never NaN.
import Foundation
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
    // serve's rewrite, and offline its cut to what is cached (here: every other URL): no trap,
    // and what was an MPD stays one.
    let playable = DASHPlayable(mpd) { url, _ in url.utf8.count % 2 == 0 }
    let rewriter = DASHRewriter(url: "http://o/a/manifest.mpd", proxy: "http://127.0.0.1:8089")
    for offline in [false, true] {
        let out = try? rewriter.rewrite(bytes) { if offline, playable.plays(mpd) { DASHRewriter.keepOnly(playable, of: mpd, in: $0) } }
        precondition(out.map { (try? MPD.parse($0, url: "http://127.0.0.1:8089/v/x/manifest.mpd")) != nil } ?? true || offline || size > 1 << 20, "a rewritten MPD no longer parses")
    }
    return 0
}
