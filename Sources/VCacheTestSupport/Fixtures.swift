import Foundation

/// Files under Tests/Fixtures (real MP4s made by ffmpeg; see its README.md).
public enum Fixtures {
    public static var directory: String {
        // Sources/VCacheTestSupport/Fixtures.swift -> repo root -> Tests/Fixtures
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures").path
    }

    public static func path(_ name: String) -> String { directory + "/" + name }

    public static func data(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path(name)))
    }
}

extension Fixtures {
    public struct StreamsFailed: Error, CustomStringConvertible {
        public let description: String
    }

    /// Makes the HLS test streams (Tests/Fixtures/hls/make-streams.sh: ffmpeg's TS, fMP4,
    /// byte-range, AES-128 and ABR streams) in `folder`. A test that makes them carries
    /// `.requires(.streamTools)`; a missing tool or a failing script throws (the script's stderr).
    public static func makeStreams(into folder: String) throws {
        if let why = Requirement.streamTools.missing() { throw StreamsFailed(description: why) }
        let run = try Tool.run("/usr/bin/env", ["bash", Self.path("hls/make-streams.sh"), folder])
        guard run.status == 0 else { throw StreamsFailed(description: "make-streams.sh failed: \(run.err)") }
    }

    /// Makes the DASH test streams (Tests/Fixtures/dash/make-streams.sh: ffmpeg's SegmentTemplate
    /// with $Number$, with a SegmentTimeline, SegmentList, SegmentBase and a two-language ABR
    /// stream) in `folder`. A test that makes them carries `.requires(.dashTools)`.
    public static func makeDASHStreams(into folder: String) throws {
        if let why = Requirement.dashTools.missing() { throw StreamsFailed(description: why) }
        let run = try Tool.run("/usr/bin/env", ["bash", Self.path("dash/make-streams.sh"), folder])
        guard run.status == 0 else { throw StreamsFailed(description: "dash/make-streams.sh failed: \(run.err)") }
    }
}
