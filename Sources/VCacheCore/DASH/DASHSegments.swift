#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One media segment (or SegmentBase subsegment) of a Representation: where it is, and when it
/// plays, in seconds from its Period's start (after `@presentationTimeOffset`).
public struct DASHSegment: Equatable, Sendable {
    public var url: String
    public var range: MPD.ByteSpan?
    public var start: Double
    /// Nil when the MPD does not say (a SegmentList without `@duration` or timeline).
    public var duration: Double?

    public init(url: String, range: MPD.ByteSpan?, start: Double, duration: Double? = nil) {
        self.url = url
        self.range = range
        self.start = start
        self.duration = duration
    }
}

/// What a Representation needs fetched (Docs/dash.md), as pure values: its init segment, its
/// media segments, and for a SegmentBase the `sidx` to fetch first (then `DASHSidx` gives the
/// subsegments).
public struct DASHSegmentPlan: Equatable, Sendable {
    public var initialization: MPD.URLRange?
    public var segments: [DASHSegment]
    /// SegmentBase with `@indexRange`: the segment index, to read before the subsegments are known.
    public var index: MPD.URLRange?
}

/// A dynamic MPD's clock: what is available now (ISO/IEC 23009-1 §5.3.9.5.3).
public struct DASHLiveClock: Equatable, Sendable {
    /// Seconds since 1970.
    public var now: Double
    public init(now: Double) { self.now = now }
}

extension MPD.Representation {
    /// The segments of this Representation in a Period of `periodDuration` seconds (nil:
    /// unknown), those starting before `until` seconds only (nil: all). `live`: the MPD is
    /// dynamic; a template with `@duration` then lists the segments available at `live.now`.
    /// Counts past `DASHLimits.maxSegments`, and numbers or times past 2^63-1, are errors.
    /// `naming` false: a template's segments get no URL (only counted: `MPD.checkSegmentTotal`).
    public func plan(periodDuration: Double?, until: Double? = nil, live: (clock: DASHLiveClock, mpd: MPD, periodStart: Double)? = nil,
                     naming: Bool = true) throws(DASHError) -> DASHSegmentPlan {
        let limit = DASHLimits.maxSegments
        switch segments {
        case .single:
            return DASHSegmentPlan(initialization: nil, segments: [DASHSegment(url: baseURL, range: nil, start: 0, duration: periodDuration)], index: nil)
        case .base(let b):
            let index = b.indexRange.map { MPD.URLRange(url: baseURL, range: $0) }
            // No index: the file is one segment, played whole.
            let whole = index == nil ? [DASHSegment(url: baseURL, range: nil, start: 0, duration: periodDuration)] : []
            return DASHSegmentPlan(initialization: b.initialization, segments: whole, index: index)
        case .list(let l):
            guard l.segments.count <= limit else { throw .tooManySegments(representation: id, limit: limit) }
            var out: [DASHSegment] = []
            let times = try timelineTimes(l.timeline, timescale: l.timescale, pto: l.presentationTimeOffset, periodDuration: periodDuration,
                                          until: until, maxCount: l.segments.count, live: nil)
            for (i, s) in l.segments.enumerated() {
                var start: Double?
                var duration: Double?
                if let times {
                    guard i < times.count else { break }
                    start = times[i].start
                    duration = times[i].duration
                } else if let d = l.duration {
                    start = Double(i) * Double(d) / Double(l.timescale)
                    duration = Double(d) / Double(l.timescale)
                }
                if let until, let start, start >= until { break }
                out.append(DASHSegment(url: s.url, range: s.range, start: start ?? 0, duration: duration))
            }
            return DASHSegmentPlan(initialization: l.initialization, segments: out, index: nil)
        case .template(let t):
            guard let media = t.media else { throw .unbounded(representation: id, why: "its SegmentTemplate has no @media") }
            let ts = Double(t.timescale)
            var out: [DASHSegment] = []
            // Resolved once for the Representation, not once per segment (most of serve's first
            // answer of a large MPD went on resolving each URL: Docs/dash.md, "limits").
            let resolved = naming ? media.resolved(representationID: id, bandwidth: bandwidth, against: t.mediaBase) : nil
            func append(number: Int64, time: Int64, start: Double, duration: Double) throws(DASHError) {
                guard out.count < limit else { throw .tooManySegments(representation: id, limit: limit) }
                guard naming else { return out.append(DASHSegment(url: "", range: nil, start: start, duration: duration)) }
                let url = resolved.map { $0.url(number: number, time: time) }
                    ?? HLSURI.resolve(media.substitute(representationID: id, bandwidth: bandwidth, number: number, time: time), against: t.mediaBase)
                out.append(DASHSegment(url: url, range: nil, start: start, duration: duration))
            }
            if let times = try timelineTimes(t.timeline, timescale: t.timescale, pto: t.presentationTimeOffset, periodDuration: periodDuration,
                                             until: until, maxCount: nil, live: live) {
                for (i, s) in times.enumerated() {
                    let (n, o) = t.startNumber.addingReportingOverflow(Int64(i))
                    if o { throw .overflow(representation: id, what: "$Number$ (@startNumber + the segment's index)") }
                    try append(number: n, time: s.time, start: s.start, duration: s.duration)
                }
                return DASHSegmentPlan(initialization: t.initialization.map { MPD.URLRange(url: $0, range: nil) }, segments: out, index: nil)
            }
            guard let d = t.duration else {
                throw .unbounded(representation: id, why: "its SegmentTemplate has neither @duration nor a SegmentTimeline")
            }
            let seconds = Double(d) / ts
            // Which k (segment k covers [k*d, (k+1)*d) ticks) are listed.
            var first: Int64 = 0
            var end: Double  // one past the last k, as a real number (may be huge)
            if let e = t.endNumber {
                guard e >= t.startNumber else { return DASHSegmentPlan(initialization: t.initialization.map { .init(url: $0, range: nil) }, segments: [], index: nil) }
                end = Double(e - t.startNumber) + 1
            } else if let live, live.mpd.isDynamic {
                guard let ast = live.mpd.availabilityStartTime else { throw .unbounded(representation: id, why: "a dynamic MPD without @availabilityStartTime") }
                // Available: segments that have ended by now, within the time-shift buffer.
                let elapsed = live.clock.now - ast - live.periodStart
                end = max(0, (elapsed / seconds).rounded(.down))
                if let p = periodDuration { end = min(end, (p / seconds).rounded(.up)) }
                if let depth = live.mpd.timeShiftBufferDepth {
                    let back = max(0, end - (depth / seconds).rounded(.up))
                    first = back < 9.0e18 ? Int64(back) : 0
                }
            } else if let p = periodDuration {
                end = (p * ts / Double(d)).rounded(.up)
            } else {
                throw .unbounded(representation: id, why: "its Period has no duration and its SegmentTemplate no @endNumber: the segment count is unbounded")
            }
            // `until` counts from the first listed (a live window's start, else the Period's).
            if let until { end = min(end, Double(first) + max(0, (until / seconds).rounded(.up))) }
            guard end.isFinite, end - Double(first) <= Double(limit) else { throw .tooManySegments(representation: id, limit: limit) }
            let stop = Int64(end)
            var k = first
            while k < stop {
                let (n, o1) = t.startNumber.addingReportingOverflow(k)
                let (time, o2) = k.multipliedReportingOverflow(by: d)
                if o1 { throw .overflow(representation: id, what: "$Number$ (@startNumber + the segment's index)") }
                if o2 { throw .overflow(representation: id, what: "$Time$ (the segment's index x @duration)") }
                let (shifted, o3) = time.addingReportingOverflow(t.presentationTimeOffset)
                if o3 { throw .overflow(representation: id, what: "$Time$ (+ @presentationTimeOffset)") }
                try append(number: n, time: shifted, start: Double(k) * seconds, duration: seconds)
                k += 1
            }
            return DASHSegmentPlan(initialization: t.initialization.map { MPD.URLRange(url: $0, range: nil) }, segments: out, index: nil)
        }
    }

    /// A SegmentTimeline expanded (§5.3.9.6): each segment's `S@t`-based time, and its start and
    /// duration in seconds from the Period's start. Nil when there is no timeline. `r="-1"`
    /// repeats up to the next `S@t`, else the Period's end, else (live) now. A time that goes
    /// backwards, and a total past the limit, are errors; `until` stops early.
    func timelineTimes(_ runs: [MPD.TimelineRun]?, timescale: Int64, pto: Int64, periodDuration: Double?, until: Double?, maxCount: Int?,
                       live: (clock: DASHLiveClock, mpd: MPD, periodStart: Double)?) throws(DASHError) -> [(time: Int64, start: Double, duration: Double)]? {
        guard let runs else { return nil }
        let ts = Double(timescale)
        let limit = min(maxCount ?? Int.max, DASHLimits.maxSegments)
        var out: [(time: Int64, start: Double, duration: Double)] = []
        var t: Int64 = 0
        for (i, run) in runs.enumerated() {
            if let start = run.time {
                guard start >= t || i == 0 else { throw .badValue(element: "S", attribute: "t", value: String(start), why: "goes back before the end of the segment before it") }
                t = start
            }
            var count: Int64
            if run.repeatCount >= 0 {
                let (c, o) = run.repeatCount.addingReportingOverflow(1)
                count = o ? Int64.max : c
            } else {
                // To the next S@t, the Period's end, or now.
                var endTicks: Double?
                if i + 1 < runs.count, let next = runs[i + 1].time { endTicks = Double(next) }
                else if let p = periodDuration { endTicks = Double(pto) + p * ts }
                else if let live, live.mpd.isDynamic, let ast = live.mpd.availabilityStartTime {
                    endTicks = Double(pto) + (live.clock.now - ast - live.periodStart) * ts
                }
                guard let endTicks else { throw .unbounded(representation: id, why: "S@r=\"-1\" repeats to the Period's end, and the Period has no duration") }
                let c = ((endTicks - Double(t)) / Double(run.duration)).rounded(.up)
                count = c <= 0 ? 0 : (c >= 9.0e18 ? Int64.max : Int64(c))
            }
            while count > 0 {
                let start = (Double(t) - Double(pto)) / ts
                if let until, start >= until { return out }
                guard out.count < limit else {
                    if maxCount != nil && out.count == maxCount { return out }
                    throw .tooManySegments(representation: id, limit: DASHLimits.maxSegments)
                }
                out.append((t, start, Double(run.duration) / ts))
                let (next, o) = t.addingReportingOverflow(run.duration)
                if o { throw .overflow(representation: id, what: "the SegmentTimeline's time (S@t + S@d x repeats)") }
                t = next
                count -= 1
            }
        }
        return out
    }
}
