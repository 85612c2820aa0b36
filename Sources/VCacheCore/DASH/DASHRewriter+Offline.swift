#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Offline (the origin unreachable), the MPD serve answers lists only what plays from the cache
/// (`DASHPlayable`), so a player's ABR cannot pick a Representation that was never warmed and
/// no player asks for a segment past the cached time: Representations that do not play, and
/// AdaptationSets left without any, are taken out; Periods after one cut short go; each Period
/// lasts (`@duration`, and the MPD's `@mediaPresentationDuration`) as long as it plays, to the
/// millisecond below; a SegmentTimeline or SegmentList keeps only the segments that start within it.
extension DASHRewriter {
    public static func keepOnly(_ playable: DASHPlayable, of mpd: MPD, in root: XMLEditNode) {
        let kept = Dictionary(playable.periods.map { ($0.period, $0) }, uniquingKeysWith: { a, _ in a })
        var total = 0.0
        for (p, periodNode) in root.children("Period").enumerated() {
            guard let play = kept[p] else { periodNode.remove(); continue }
            let duration = (play.duration * 1000).rounded(.down) / 1000
            total += duration
            periodNode.setAttribute("duration", seconds(duration))
            // Segments each kept Representation needs: its leading cached ones that start in time.
            func count(_ o: DASHPlayable.Playing) -> Int { o.segments.filter { $0.start < duration - 1e-9 }.count }
            var periodMost = 0
            for (a, setNode) in periodNode.children("AdaptationSet").enumerated() {
                let playing = play.playing.filter { $0.set == a }
                guard !playing.isEmpty else { setNode.remove(); continue }
                for (r, repNode) in setNode.children("Representation").enumerated() {
                    guard let o = playing.first(where: { $0.representation == r }) else { repNode.remove(); continue }
                    if let b = o.indexed { listSubsegments(repNode, b, o.initialization, Array(o.segments.prefix(count(o)))) }
                    trim(repNode, to: count(o))
                }
                let setMost = playing.map(count).max() ?? 0
                trim(setNode, to: setMost)
                periodMost = max(periodMost, setMost)
            }
            trim(periodNode, to: periodMost)
        }
        root.setAttribute("mediaPresentationDuration", seconds(total))
    }

    /// A SegmentBase file cached in part, as players read it: a SegmentList of byte ranges of the
    /// one file (its `Initialization@range`, a `SegmentURL@mediaRange` per subsegment cached, in
    /// place of its SegmentBase), so no player asks for bytes past those cached (one reading the
    /// SegmentBase file whole would).
    static func listSubsegments(_ repNode: XMLEditNode, _ b: MPD.SegmentBase, _ initialization: MPD.URLRange?, _ segments: [DASHSegment]) {
        for own in repNode.children("SegmentBase") { own.remove() }
        // Where the schema has it: after BaseURL, SubRepresentation and SegmentBase, before a SegmentTemplate.
        let before = repNode.children("SegmentTemplate").first
        guard let list = repNode.insertChild("SegmentList", text: "", before: before) else { return }
        let duration = segments.first?.duration ?? 0
        list.setAttribute("timescale", String(b.timescale))
        list.setAttribute("duration", String(max(1, Int64((duration * Double(b.timescale)).rounded()))))
        if b.presentationTimeOffset != 0 { list.setAttribute("presentationTimeOffset", String(b.presentationTimeOffset)) }
        if let range = initialization?.range, let i = list.insertChild("Initialization", text: "", before: nil) {
            i.setAttribute("range", "\(range.first)-\(range.last)")
        }
        for s in segments {
            guard let range = s.range, let u = list.insertChild("SegmentURL", text: "", before: nil) else { continue }
            u.setAttribute("mediaRange", "\(range.first)-\(range.last)")
        }
    }

    /// The SegmentTimeline and SegmentList directly in `e` cut to their first `n` segments.
    static func trim(_ e: XMLEditNode, to n: Int) {
        for kind in ["SegmentTemplate", "SegmentList"] {
            for s in e.children(kind) {
                for timeline in s.children("SegmentTimeline") {
                    var remaining = Int64(n)
                    for run in timeline.children("S") {
                        guard remaining > 0 else { run.remove(); continue }
                        let r = run.attribute("r").flatMap { Int64($0) } ?? 0
                        let covers = r < 0 ? Int64.max : r &+ 1
                        if covers > remaining || covers <= 0 { run.setAttribute("r", String(remaining - 1)) }
                        remaining -= min(max(covers, 1), remaining)
                    }
                }
                if kind == "SegmentList" {
                    for (k, u) in s.children("SegmentURL").enumerated() where k >= n { u.remove() }
                }
            }
        }
    }

    static func seconds(_ s: Double) -> String { String(cFormat: "PT%.3fS", max(0, s)) }
}
