#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What of a presentation plays from the cache (Docs/dash.md, "Offline"), for `export` and for
/// serve's offline MPD alike. Per Representation (of the AdaptationSets players use): its init and
/// its leading segments cached, or, for a SegmentBase file, the whole file (players read it
/// whole). Each Period lasts as long as its longest-cached video and audio both play, and a
/// Representation cached shorter than that is left out (the least-warmed alternative, a player's
/// probe of a first segment, does not cut the time offered); a
/// Period cut short ends the presentation (later ones are left out), as does a Period with video
/// none of whose video plays. `held(url, range)`: whether the cache holds that range of `url`
/// (nil: the whole resource).
public struct DASHPlayable: Sendable {
    public struct Playing: Sendable {
        /// Indexes in the Period's `adaptationSets` and the set's `representations`.
        public var set: Int
        public var representation: Int
        public var initialization: MPD.URLRange?
        /// The leading segments cached (none for a SegmentBase file).
        public var segments: [DASHSegment]
        /// Seconds it plays from the Period's start.
        public var plays: Double
        public var singleFile: MPD.SegmentBase?
        /// A SegmentBase file cached in part: `segments` are its leading subsegments cached (read
        /// from its cached `sidx`), to be listed as byte ranges of the one file (`keepOnly`).
        public var indexed: MPD.SegmentBase?
    }

    public struct PeriodPlay: Sendable {
        public var period: Int
        public var playing: [Playing]
        /// Seconds: the shortest of `playing`.
        public var duration: Double
        /// Whether it plays shorter than the Period lasts.
        public var cut: Bool
    }

    public var periods: [PeriodPlay] = []
    /// Representations that do not play (Period, set, representation indexes), in the Periods kept.
    public var dropped: [(period: Int, set: Int, representation: Int)] = []
    /// Whether the first Period has video and none of it plays (then nothing plays).
    public var noVideo = false

    /// `read(url, range)`: that range's bytes from the cache, nil when not all cached; given, a
    /// SegmentBase file cached in part plays its leading subsegments cached (its init and `sidx`
    /// cached too), else only whole (`export` writes such a file whole or not at all).
    public init(_ mpd: MPD, held: (String, MPD.ByteSpan?) -> Bool, read: ((String, MPD.ByteSpan) -> [UInt8]?)? = nil) {
        for (p, period) in mpd.periods.enumerated() {
            var playing: [Playing] = []
            var dropped: [(Int, Int, Int)] = []
            for (a, set) in period.adaptationSets.enumerated() where !set.isSkipped && set.kind != .other {
                for (r, rep) in set.representations.enumerated() {
                    if case .base(let b) = rep.segments {
                        guard held(rep.baseURL, nil) else {
                            if let read, let o = Self.leadingSubsegments(rep, b, period: period, held: held, read: read) {
                                playing.append(Playing(set: a, representation: r, initialization: b.initialization, segments: o.segments,
                                                       plays: o.plays, singleFile: nil, indexed: b))
                            } else {
                                dropped.append((p, a, r))
                            }
                            continue
                        }
                        playing.append(Playing(set: a, representation: r, initialization: nil, segments: [], plays: period.duration ?? 0, singleFile: b, indexed: nil))
                        continue
                    }
                    guard let plan = try? rep.plan(periodDuration: period.duration), !plan.segments.isEmpty,
                          plan.initialization.map({ held($0.url, $0.range) }) ?? true else { dropped.append((p, a, r)); continue }
                    let leading = Array(plan.segments.prefix { held($0.url, $0.range) })
                    guard !leading.isEmpty, leading.allSatisfy({ $0.duration != nil }) else { dropped.append((p, a, r)); continue }
                    let plays = leading.count == plan.segments.count ? (period.duration ?? leading.reduce(0) { $0 + ($1.duration ?? 0) })
                        : leading.reduce(0) { max($0, $1.start + ($1.duration ?? 0)) }
                    playing.append(Playing(set: a, representation: r, initialization: plan.initialization, segments: leading, plays: plays, singleFile: nil, indexed: nil))
                }
            }
            let hasVideo = period.adaptationSets.contains { $0.kind == .video }
            guard playing.contains(where: { period.adaptationSets[$0.set].kind == .video }) || !hasVideo else {
                if periods.isEmpty { noVideo = true }
                self.dropped += dropped
                break
            }
            // The time a player can play: the longest-cached video with the longest-cached audio.
            // A Representation cached shorter than that (a player probed its first segment) is
            // left out, so the time offered is not cut to the least-warmed alternative.
            let kinds = Set(playing.map { period.adaptationSets[$0.set].kind }).subtracting([.text])
            let duration = kinds.map { k in playing.filter { period.adaptationSets[$0.set].kind == k }.map(\.plays).max() ?? 0 }.min()
                ?? playing.map(\.plays).min() ?? 0
            for o in playing where o.plays < duration - 0.001 { dropped.append((p, o.set, o.representation)) }
            playing.removeAll { $0.plays < duration - 0.001 }
            let cut = period.duration.map { duration < $0 - 0.001 } ?? false
            periods.append(PeriodPlay(period: p, playing: playing, duration: duration, cut: cut))
            self.dropped += dropped
            if cut { break }
        }
    }

    /// A SegmentBase file cached in part: its subsegments cached from the first on, read from its
    /// cached `sidx`, and the seconds they play; nil when its init, its sidx or its first
    /// subsegment is not cached.
    static func leadingSubsegments(_ rep: MPD.Representation, _ b: MPD.SegmentBase, period: MPD.Period,
                                   held: (String, MPD.ByteSpan?) -> Bool,
                                   read: (String, MPD.ByteSpan) -> [UInt8]?) -> (segments: [DASHSegment], plays: Double)? {
        guard let index = b.indexRange, let initRange = b.initialization?.range, b.initialization?.url == rep.baseURL,
              held(rep.baseURL, initRange), index.count <= 16 << 20, let bytes = read(rep.baseURL, index),
              let all = try? DASHSidx.subsegments(bytes, indexRange: index, url: rep.baseURL,
                                                  presentationTimeOffset: b.presentationTimeOffset, timescale: b.timescale) else { return nil }
        let leading = Array(all.prefix { $0.range.map { held(rep.baseURL, $0) } ?? false })
        guard !leading.isEmpty, leading.allSatisfy({ $0.duration != nil }) else { return nil }
        let plays = leading.count == all.count ? (period.duration ?? leading.reduce(0) { max($0, $1.start + ($1.duration ?? 0)) })
            : leading.reduce(0) { max($0, $1.start + ($1.duration ?? 0)) }
        return (leading, plays)
    }

    /// Whether a player has something to play: video (where there is any) and, in every Period
    /// with audio, some audio (never video without its sound, ExoPlayer #3976).
    public func plays(_ mpd: MPD) -> Bool {
        guard !noVideo, !periods.isEmpty else { return false }
        return periods.allSatisfy { p in
            let sets = mpd.periods[p.period].adaptationSets
            let needsAudio = sets.contains { $0.kind == .audio && !$0.isSkipped }
            return !needsAudio || p.playing.contains { sets[$0.set].kind == .audio }
        }
    }
}
