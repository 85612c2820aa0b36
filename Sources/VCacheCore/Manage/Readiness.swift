#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whether everything a prefetch item asks for is in the cache now (`vcache check`: "is
/// tomorrow's playlist ready?"): the bytes of its requests and, for an MP4 goal (`--seconds N`,
/// the moov a head needs), what the MP4's structure says that goal needs, decided by the same
/// planner prefetch uses, reading only cached bytes. No network.
public enum Readiness: Equatable, Sendable {
    /// Everything asked for is cached.
    case ready
    /// Something is not: `missing` bytes of those known to be needed (nil when the structure
    /// that would say how many is itself not cached), and why.
    case missing(bytes: Int64?, why: String)
    /// The video is not in the cache at all.
    case absent

    public var isReady: Bool { self == .ready }

    /// - Parameters:
    ///   - read: cached bytes of the entry's `data` (offset, count); only asked for ranges the
    ///     entry claims.
    public static func of(_ item: PrefetchItem, entry: CacheEntry?, read: @escaping MP4Walker.Read) -> Readiness {
        guard let e = entry else { return .absent }
        if e.isComplete { return .ready }
        guard let length = e.length else { return .missing(bytes: nil, why: "its length is not known yet") }
        var missingBytes: Int64 = 0
        for r in item.requests.isEmpty ? [.whole] : item.requests {
            guard let span = r.resolve(length: length) else { continue }
            missingBytes = Checked.saturatingAdd(missingBytes, span.count - e.ranges.coverage(of: span))
        }
        if missingBytes > 0 { return .missing(bytes: missingBytes, why: "\(Units.formatSize(missingBytes)) of the requested bytes are not cached") }
        guard let goal = item.mp4 else { return .ready }
        // The planner answers one step at a time: what it needs next. Each step's ranges are
        // counted as missing and assumed fetched for the next step, until the goal is met (or
        // the structure that would say more is itself missing).
        var assumed = e.ranges
        var missing = RangeSet()
        var firstReason: MP4Planner.Reason?
        for _ in 0..<64 {
            let planner = MP4Planner(goal: goal, length: length, have: assumed) { offset, count in
                guard e.ranges.contains(ByteRange(offset, offset + Int64(count))) else { throw MP4Error.truncatedHeader(at: offset) }
                return try read(offset, count)
            }
            switch planner.next() {
            case .done:
                guard let reason = firstReason else { return .ready }
                return .missing(bytes: missing.count, why: "\(Units.formatSize(missing.count)) of \(Self.describe(reason, goal)) are not cached")
            case .need(let ranges, let reason):
                var fresh = ranges
                for r in assumed.ranges { fresh.remove(r) }
                guard !fresh.isEmpty else { return .missing(bytes: nil, why: "\(Self.describe(reason, goal)) cannot be mapped from what is cached") }
                firstReason = firstReason ?? reason
                missing.formUnion(fresh)
                assumed.formUnion(fresh)
                // A header that is not cached cannot be read to plan further: the total is unknown.
                if case .header = reason { return .missing(bytes: nil, why: "\(Self.describe(reason, goal)) are not cached (at least \(Units.formatSize(missing.count)) missing)") }
            case .failed(let error):
                // A head of something that is not an MP4 needs no moov (prefetch says so and goes on).
                if case .moov = goal, firstReason == nil { return .ready }
                return .missing(bytes: nil, why: "cannot map its MP4 for --seconds: \(error.description)")
            }
        }
        return .missing(bytes: missing.count, why: "\(Units.formatSize(missing.count)) or more of \(Self.describe(firstReason ?? .samples, goal)) are not cached")
    }

    /// How many seconds of an MP4 play from the cached bytes alone (to 0.1 s): the longest
    /// `--seconds` that would be `ready`. Nil when its structure is not cached (or not an MP4).
    public static func playableSeconds(_ e: CacheEntry, duration: Double, read: @escaping MP4Walker.Read) -> Double? {
        guard duration > 0 else { return nil }
        func ready(_ t: Double) -> Bool { of(PrefetchItem(url: e.url, requests: [.head(1)], mp4: .seconds(t)), entry: e, read: read).isReady }
        if e.isComplete || ready(duration) { return duration }
        guard ready(0.1) else { return 0 }
        // In tenths of a second: ready(lo), not ready(hi).
        // A duration from an mvhd may be near 2^63 s: tenths of it are clamped (the search is over
        // the cached bytes, which end far sooner).
        var lo = 1, hi = Int(Checked.int64((duration * 10).rounded(.up), clampedTo: 2...Int64(Int32.max)) ?? 2)
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if ready(Double(mid) / 10) { lo = mid } else { hi = mid }
        }
        return Double(lo) / 10
    }

    /// For an MP4 whose moov does not give its duration (a fragmented one, without `mehd`): how
    /// many seconds play from the cached bytes (to 0.1 s), searched by doubling up to `limit`.
    /// Nil when its structure is not cached.
    public static func playableSeconds(_ e: CacheEntry, upTo limit: Double = 86_400, read: @escaping MP4Walker.Read) -> Double? {
        func ready(_ t: Double) -> Bool { of(PrefetchItem(url: e.url, requests: [.head(1)], mp4: .seconds(t)), entry: e, read: read).isReady }
        guard ready(0.1) else { return 0 }
        var lo = 1, hi = 2  // tenths: ready(lo), not ready(hi) once the doubling stops
        while ready(Double(hi) / 10) {
            lo = hi
            hi *= 2
            if Double(hi) / 10 > limit { return limit }
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if ready(Double(mid) / 10) { lo = mid } else { hi = mid }
        }
        return Double(lo) / 10
    }

    static func describe(_ reason: MP4Planner.Reason, _ goal: MP4Goal) -> String {
        switch reason {
        case .header: "its box headers"
        case .moov: "its moov (the index playback starts from)"
        case .samples, .fragment:
            if case .seconds(let s) = goal { "the first \(Units.formatDuration(s))" } else { "its samples" }
        }
    }
}
