#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `export STREAM DIR` of a DASH stream (Docs/dash.md): a folder with `manifest.mpd` and each
/// Representation that plays from the cache in a folder of its own (`r1/`, `r2/`...): its init
/// segment and media segments under local names, or its one SegmentBase file. The MPD is written
/// anew, static, from the model (not the origin's text rewritten): a SegmentTemplate with a
/// SegmentTimeline of exactly the segments exported, local relative names only, so a player
/// reading it never reaches the network and never asks for a segment the folder lacks.
///
/// What plays (`DASHPlayable`, as serve's offline MPD): per Representation, its init and its
/// leading segments cached (all of them for a SegmentBase file, which players read whole). Each
/// Period lasts as long as its longest-cached video and audio both play, a Representation cached
/// shorter is left out; a Period cut short ends the export (later ones are left out).
/// Representations that do not play are left out and said; with none of a Period's video, the
/// export fails. ContentProtection is not carried over: a protected stream's folder needs its
/// licence as the origin's MPD described it.
extension StreamExporter {
    func exportDASH(_ root: CacheEntry, to destination: String, force: Bool) throws -> Exported {
        guard let cached = store.cachedMPD(root) else { throw StreamExportError.notAStream(root.latestURL) }
        let mpd: MPD
        do { mpd = try cached.parsed() } catch { throw StreamExportError.notPlayable(url: root.latestURL, why: "\(error)") }
        let manifest = destination + "/manifest.mpd"
        if let st = FileSystem.followingStatus(destination), (st.st_mode & S_IFMT) != S_IFDIR { throw StreamExportError.notAFolder(destination) }
        if FileSystem.status(manifest) != nil && !force { throw StreamExportError.destinationExists(manifest) }

        func held(_ url: String, _ range: MPD.ByteSpan?) -> Bool {
            guard let e = entry(url) else { return false }
            return range.map { e.ranges.contains(ByteRange($0.first, $0.last + 1)) } ?? e.isComplete
        }
        struct Out {
            var set: MPD.AdaptationSet
            var rep: MPD.Representation
            var folder: String
            var initialization: MPD.URLRange?
            var segments: [DASHSegment]
            var plays: Double
            var singleFile: MPD.SegmentBase?
        }
        let playable = DASHPlayable(mpd, held: held)
        if playable.noVideo {
            // A SegmentBase file cached in part (`--seconds`) has its first seconds cached, yet is
            // exported only whole (one file per Representation): say so, not that nothing is cached.
            let partialFile = mpd.periods.first?.adaptationSets.filter { $0.kind == .video && !$0.isSkipped }.flatMap(\.representations).contains { r in
                guard case .base(let b) = r.segments, let e = entry(r.baseURL), !e.isComplete else { return false }
                return b.initialization.map { held($0.url, $0.range) } ?? false
            } ?? false
            if partialFile {
                throw StreamExportError.notPlayable(url: root.latestURL, why: "its video is a single file per Representation (SegmentBase) cached only in part, and export writes such a file whole")
            }
            throw StreamExportError.notPlayable(url: root.latestURL, why: "none of its video Representations has its init and first segment cached")
        }
        var periods: [(period: MPD.Period, reps: [Out], duration: Double)] = []
        let dropped = playable.dropped.map { d -> String in
            let set = mpd.periods[d.period].adaptationSets[d.set]
            return "Representation '\(set.representations[d.representation].id)' (\(set.kind.rawValue)) of \(root.latestURL)"
        }
        var n = 0
        for p in playable.periods {
            let period = mpd.periods[p.period]
            let outs = p.playing.map { o -> Out in
                n += 1
                let set = period.adaptationSets[o.set]
                return Out(set: set, rep: set.representations[o.representation], folder: "r\(n)", initialization: o.initialization,
                           segments: o.segments, plays: o.plays, singleFile: o.singleFile)
            }
            periods.append((period, outs, p.duration))
        }

        // The MPD and the files it names, first as a plan: each name checked before a byte is
        // copied, every member written and checked before any takes its name (`ExportStaging`).
        var copies: [(url: String, range: MPD.ByteSpan?, name: String)] = []
        var xml = """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- exported by vcache from \(Self.escape(root.latestURL).replacing("--", with: "%2D%2D")) -->
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" minBufferTime="PT2S" mediaPresentationDuration="\(Self.duration(periods.reduce(0) { $0 + $1.duration }))">

            """
        var start = 0.0
        for (i, p) in periods.enumerated() {
            xml += "  <Period id=\"\(i)\" start=\"\(Self.duration(start))\" duration=\"\(Self.duration(p.duration))\">\n"
            start += p.duration
            var sets: [(MPD.AdaptationSet, [Out])] = []
            for o in p.reps {
                if let k = sets.firstIndex(where: { $0.0 == o.set }) { sets[k].1.append(o) } else { sets.append((o.set, [o])) }
            }
            for (set, outs) in sets {
                xml += "    <AdaptationSet contentType=\"\(set.kind.rawValue)\"" + (set.language.map { " lang=\"\(Self.escape($0))\"" } ?? "") + ">\n"
                for o in outs {
                    var attrs = "id=\"\(Self.escape(o.rep.id))\" bandwidth=\"\(o.rep.bandwidth)\""
                    if let m = o.rep.mimeType { attrs += " mimeType=\"\(Self.escape(m))\"" }
                    if let c = o.rep.codecs { attrs += " codecs=\"\(Self.escape(c))\"" }
                    if let w = o.rep.width, let h = o.rep.height { attrs += " width=\"\(w)\" height=\"\(h)\"" }
                    xml += "      <Representation \(attrs)>\n"
                    if let b = o.singleFile {
                        let name = o.folder + "/media" + Self.fileExtension(o.rep.baseURL, fallback: ".mp4")
                        copies.append((o.rep.baseURL, nil, name))
                        xml += "        <BaseURL>\(Self.escape(name))</BaseURL>\n"
                        xml += "        <SegmentBase timescale=\"\(b.timescale)\" presentationTimeOffset=\"\(b.presentationTimeOffset)\""
                            + (b.indexRange.map { " indexRange=\"\($0.first)-\($0.last)\"" } ?? "") + ">"
                            + (b.initialization?.range.map { "<Initialization range=\"\($0.first)-\($0.last)\"/>" } ?? "") + "</SegmentBase>\n"
                    } else {
                        let ext = Self.fileExtension(o.segments[0].url, fallback: ".m4s")
                        // In the media's own time (ISO/IEC 23009-1 §5.3.9.2): the Representation's
                        // timescale and @presentationTimeOffset kept, each S@t the segment's
                        // start + that offset, as its tfdt says, so a player places it where the
                        // origin's MPD did (an ended live stream, a second Period).
                        let (ts, pto) = Self.timing(o.rep)
                        var template = "<SegmentTemplate timescale=\"\(ts)\"" + (pto != 0 ? " presentationTimeOffset=\"\(pto)\"" : "")
                            + " startNumber=\"1\" media=\"\(o.folder)/$Number$\(Self.escape(ext))\""
                        if let i = o.initialization {
                            let name = o.folder + "/init" + Self.fileExtension(i.url, fallback: ".mp4")
                            copies.append((i.url, i.range, name))
                            template += " initialization=\"\(Self.escape(name))\""
                        }
                        xml += "        " + template + ">\n          <SegmentTimeline>\n"
                        for (k, s) in o.segments.enumerated() {
                            copies.append((s.url, s.range, "\(o.folder)/\(k + 1)\(ext)"))
                            // Saturated: a hostile MPD's times (2^63 ticks) never trap.
                            let t = Checked.int64((s.start * Double(ts)).rounded() + Double(pto), clampedTo: 0...Int64.max) ?? 0
                            let d = Checked.int64(((s.duration ?? 0) * Double(ts)).rounded(), clampedTo: 1...Int64.max) ?? 1
                            xml += "            <S t=\"\(t)\" d=\"\(d)\"/>\n"
                        }
                        xml += "          </SegmentTimeline>\n        </SegmentTemplate>\n"
                    }
                    xml += "      </Representation>\n"
                }
                xml += "    </AdaptationSet>\n"
            }
            xml += "  </Period>\n"
        }
        xml += "</MPD>\n"

        let relatives = copies.map(\.name) + ["manifest.mpd"]
        try ExportStaging.check(relatives, in: destination, force: force)
        let planned = try plannedVersions(of: copies.map(\.url), root: root)
        testPause("stream-export-planned", destination)
        var staging = try ExportStaging(destination: destination) { try makeFolder($0, in: $0) }
        do {
            var written: Int64 = 0
            for c in copies {
                try checkPlanned(c.url, planned)
                written += try copyMember(c.url, c.range, to: try staging.path(c.name))
            }
            try write(Array(xml.utf8), to: try staging.path("manifest.mpd"), force: false)
            written += Int64(xml.utf8.count)
            try checkStillPlanned(planned)
            try staging.commit(relatives, force: force)
            try? store.catalog.touch(key: root.key)
            return Exported(master: manifest, files: relatives.count, bytes: written, playlists: periods.reduce(0) { $0 + $1.reps.count }, dropped: dropped)
        } catch {
            staging.discard()
            throw staging.relabel(error)
        }
    }

    /// A Representation's timescale and @presentationTimeOffset (ticks of it), for its exported
    /// SegmentTimeline: 1 and 0 when its MPD gives none (microseconds then, as before).
    static func timing(_ rep: MPD.Representation) -> (timescale: Int64, pto: Int64) {
        switch rep.segments {
        case .template(let t): return (max(1, t.timescale), max(0, t.presentationTimeOffset))
        case .list(let l): return (max(1, l.timescale), max(0, l.presentationTimeOffset))
        case .base, .single: return (1_000_000, 0)
        }
    }

    /// A member's bytes to `path` (a new file): the whole resource, or the one range (a
    /// SegmentList `@mediaRange`) as a file of its own.
    private func copyMember(_ url: String, _ range: MPD.ByteSpan?, to path: String) throws -> Int64 {
        guard let range else { return try copy(url, to: path, ranges: nil, force: false, mode: nil) }
        guard let e = entry(url), let bytes = store.cachedBytes(of: e, at: range.first, count: range.count), Int64(bytes.count) == range.count else {
            throw StreamExportError.notPlayable(url: url, why: "bytes \(range.first)-\(range.last) are not cached")
        }
        try write(bytes, to: path, force: false)
        return range.count
    }

    /// `PT<seconds>S`, to the millisecond.
    static func duration(_ seconds: Double) -> String { String(cFormat: "PT%.3fS", max(0, seconds)) }

    static func escape(_ s: String) -> String {
        s.replacing("&", with: "&amp;").replacing("<", with: "&lt;")
            .replacing(">", with: "&gt;").replacing("\"", with: "&quot;")
    }

    /// The extension of the URL's last path segment (`.m4s`), when it is a short plain one.
    static func fileExtension(_ url: String, fallback: String) -> String {
        let path = HLSURI.Parts(url).path
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        guard let dot = name.lastIndex(of: ".") else { return fallback }
        let ext = name[dot...].lowercased()
        return playableExtensions.contains(ext) ? ext : fallback
    }

    /// Extensions a player opens from disk (ffmpeg's DASH demuxer refuses any other local file
    /// "for security reasons": `.cmfv`, `.dash`, `.mpd`): the origin's when it is one of them,
    /// else vcache's own (`.m4s`, `.mp4`). The MPD written names the files, so the origin's
    /// extension carries no meaning; WebVTT and TTML keep theirs.
    static let playableExtensions: Set<String> = [".mp4", ".m4s", ".m4v", ".m4a", ".mov", ".webm", ".ts", ".aac", ".vtt", ".ttml"]
}
