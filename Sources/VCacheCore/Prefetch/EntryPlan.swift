/// Which bytes an entry still needs, and the next request for them: given what was asked (the
/// whole video when nothing was named), the ranges the MP4's structure added, the bytes held and
/// where another job took over (`stop`). Pure: `PrefetchJob` asks it and sends what it answers.
struct EntryPlan: Equatable, Sendable {
    /// Never empty.
    let requests: [RangeRequest]
    /// Gaps closer than this are fetched in one request.
    let coalesceGap: Int64
    /// Ranges the MP4's structure asked for (box headers, the moov, samples), beyond `requests`.
    private(set) var mp4Ranges = RangeSet()
    /// The MP4 goal is met (or cannot be): no more planner steps.
    private(set) var mp4Settled = false

    init(requests: [RangeRequest], coalesceGap: Int64) {
        self.requests = requests.isEmpty ? [.whole] : requests
        self.coalesceGap = coalesceGap
    }

    mutating func addMP4(_ ranges: RangeSet) { mp4Ranges.formUnion(ranges) }

    mutating func settleMP4() { mp4Settled = true }

    /// Another version: its boxes are walked again.
    mutating func restartMP4() {
        mp4Ranges = RangeSet()
        mp4Settled = false
    }

    /// The bytes wanted of a video of `length` bytes, none from `stop` on.
    func target(length: Int64, stop: Int64?) -> RangeSet {
        var all = RangeSet(requests.compactMap { $0.resolve(length: length) })
        all.formUnion(mp4Ranges)
        if let stop, stop < length { all.remove(ByteRange(max(0, stop), length)) }
        return all
    }

    /// Wanted bytes not in `held`, in order.
    func missing(length: Int64, held: RangeSet, stop: Int64?) -> [ByteRange] {
        var gaps: [ByteRange] = []
        for r in target(length: length, stop: stop).ranges { gaps += held.missing(in: r) }
        return gaps
    }

    /// The next request, or nil when every wanted byte is held. With the length known: the first
    /// gap, merged with the gaps after it that lie within `coalesceGap`. Unknown: the first
    /// missing part of the first request that has one (the MP4's ranges and `stop` need a length).
    func next(length: Int64?, held: RangeSet, stop: Int64?) -> ResponseJudge.Asked? {
        if let length {
            let gaps = RangeSet.coalesce(missing(length: length, held: held, stop: stop), within: coalesceGap)
            return gaps.first.map(ResponseJudge.Asked.init)
        }
        return requests.lazy.compactMap { $0.firstMissing(in: held) }.first
    }

    /// Where a 200's body may stop: the end of what is wanted; nil when unknown (an open end).
    func wantedEnd(length: Int64?, stop: Int64?) -> Int64? {
        if let length { return target(length: length, stop: stop).ranges.last?.upperBound ?? 0 }
        let ends = requests.map(\.knownEnd)
        return ends.contains(nil) ? nil : ends.compactMap { $0 }.max()
    }
}
