import Foundation
import Testing
import VCacheTestSupport
@testable import VCacheCore

/// Real streams made by ffmpeg (Tests/Fixtures/dash/make-streams.sh): every MPD parses, every
/// segment it addresses is a file ffmpeg wrote, and a SegmentBase file is covered whole by its
/// init, its sidx and the subsegments the sidx gives.
@Suite struct DASHStreamsTests {
    static let origin = "http://origin.test/"

    @Test(.requires(.dashTools)) func everyMPDAddressesTheFilesFFmpegWrote() throws {
        let dir = TempDirectory("vcache-dash")
        try Fixtures.makeDASHStreams(into: dir.path)
        var named = Set<String>()
        var covered: [String: RangeSet] = [:]
        for stream in ["num", "tl", "list", "sb", "multi"] {
            let url = Self.origin + stream + "/manifest.mpd"
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: dir.file(stream + "/manifest.mpd"))))
            #expect(MPD.looksLikeMPD(firstBytes: Array(bytes.prefix(512)), contentType: nil), "\(stream)")
            let mpd = try MPD.parse(bytes, url: url)
            #expect(!mpd.isDynamic && mpd.duration == 6)
            let kinds = mpd.periods[0].adaptationSets.map(\.kind)
            #expect(kinds == (stream == "multi" ? [.video, .audio, .audio] : [.video, .audio]), "\(stream)")
            for (_, _, rep) in mpd.representations {
                var plan = try rep.plan(periodDuration: mpd.periods[0].duration)
                if let index = plan.index, let range = index.range {
                    let file = String(index.url.dropFirst(Self.origin.count))
                    let all = Array(try Data(contentsOf: URL(fileURLWithPath: dir.file(file))))
                    let sidx = Array(all[Int(range.first)...Int(range.last)])
                    plan.segments = try DASHSidx.subsegments(sidx, indexRange: range, url: index.url)
                    covered[file, default: RangeSet()].insert(ByteRange(range.first, range.last + 1))
                    #expect(plan.segments.last?.range?.last == Int64(all.count - 1), "\(file): the last subsegment ends the file")
                    #expect(plan.segments.count == (rep.mimeType == "audio/mp4" ? 4 : 3), "\(file)")  // audio: ffmpeg's short fourth
                }
                for s in plan.segments + [plan.initialization].compactMap({ $0.map { DASHSegment(url: $0.url, range: $0.range, start: 0) } }) {
                    let file = String(s.url.dropFirst(Self.origin.count))
                    #expect(FileManager.default.fileExists(atPath: dir.file(file)), "\(stream): \(file) is addressed but ffmpeg wrote no such file")
                    named.insert(file)
                    if let r = s.range { covered[file, default: RangeSet()].insert(ByteRange(r.first, r.last + 1)) }
                }
            }
        }
        for (file, set) in covered {
            let size = Int64((try FileManager.default.attributesOfItem(atPath: dir.file(file))[.size] as? Int) ?? -1)
            #expect(set.ranges == [ByteRange(0, size)], "\(file): \(set)")
        }
        // num's MPD lasts 6 s: ceil(6/2) = 3 audio segments, not ffmpeg's short fourth one.
        #expect(!named.contains("num/chunk-stream1-00004.m4s") && named.contains("tl/chunk-stream1-00004.m4s"))
        // num 2+3+3, tl 2+3+4, list 2+3+4, sb 2 files, multi 4+3+3+4+4.
        #expect(named.count == 46, "\(named.sorted())")
    }
}

/// The names `export STREAM DIR` gives a DASH stream's files: the origin's extension only when a
/// player opens it from disk (ffmpeg refuses `.cmfv`, `.dash`, `.mpd` as local files: probe D14).
@Suite struct DASHExportNamesTests {
    @Test(arguments: [
        ("https://o.test/v/seg-1.m4s", ".m4s"),
        ("https://o.test/v/seg-1.MP4?token=a.b", ".mp4"),
        ("https://o.test/v/seg-1.cmfv", ".m4s"),
        ("https://o.test/v/seg-1.dash", ".m4s"),
        ("https://o.test/v/manifest.mpd", ".m4s"),
        ("https://o.test/v/seg-1.m4s%00.sh", ".m4s"),
        ("https://o.test/v/seg-1", ".m4s"),
        ("https://o.test/v/sub-1.vtt", ".vtt"),
    ])
    func segmentsKeepOnlyAnExtensionAPlayerOpens(_ url: String, _ expected: String) {
        #expect(StreamExporter.fileExtension(url, fallback: ".m4s") == expected, "\(url)")
    }
}
