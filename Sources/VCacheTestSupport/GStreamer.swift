import Foundation

/// GStreamer's `playbin` as a player in tests (its own HLS and DASH demuxers, every Period of an
/// MPD): what it decodes of a URI. Needs `Requirement.gstreamer`.
public enum GStreamer {
    /// The video frames playbin decodes of `uri` and the last one's time in seconds, with fake
    /// sinks reporting each buffer (`-v`: `vs: last-message = chain ... pts: H:MM:SS.n`); bounded
    /// by `timeout` at two minutes.
    public static func play(_ uri: String) throws -> (frames: Int, last: Double?, status: Int32, err: String) {
        let r = try Tool.run("/usr/bin/timeout", ["120", "gst-launch-1.0", "-v", "playbin", "uri=\(uri)",
                                                  "video-sink=fakesink name=vs sync=false silent=false",
                                                  "audio-sink=fakesink name=as sync=false"])
        let lines = String(decoding: r.out, as: UTF8.self).split(separator: "\n").filter { $0.contains("vs: last-message = chain") }
        let last = lines.last.flatMap { line -> Double? in
            guard let at = line.range(of: "pts: ") else { return nil }
            let parts = line[at.upperBound...].prefix { $0 != "," && $0 != " " }.split(separator: ":").compactMap { Double($0) }
            return parts.count == 3 ? parts[0] * 3600 + parts[1] * 60 + parts[2] : nil
        }
        return (lines.count, last, r.status, r.err)
    }
}
