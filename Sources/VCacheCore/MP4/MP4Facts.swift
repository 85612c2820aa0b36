/// What `vcache info` tells of an MP4, from the bytes that are cached: where the moov is, whether
/// the file is fragmented, its duration and tracks, and how many bytes `--seconds 1/2/5` need.
public struct MP4Facts: Sendable {
    public struct Track: Sendable, Equatable {
        public var id: UInt32
        public var kind: String
        public var codec: String
        public var timescale: UInt32
        public var samples: Int
        /// Bits per second over the track's duration; 0 when unknown (a fragmented file's tracks).
        public var bitrate: Int64
    }

    public var layout: String
    /// The moov's place and size, when its header is cached.
    public var moov: MP4Box?
    public var fragmented: Bool?
    public var duration: Double?
    public var tracks: [Track] = []
    /// For 1, 2 and 5 seconds: the bytes `--seconds N` caches (boxes before the media, the moov and
    /// the samples or fragments); nil where that is not known from the cached bytes.
    public var bytesForSeconds: [(seconds: Double, bytes: Int64?)] = []
    /// Why the moov could not be read, when it could not.
    public var problem: String?

    /// Reads what the cached bytes (`have`, readable through `read`) show of a file of `length` bytes.
    public static func inspect(length: Int64, have: RangeSet, read: @escaping MP4Walker.Read) -> MP4Facts {
        let walker = MP4Walker(length: length, read: read)
        var seen: [MP4Box] = []
        var at: Int64 = 0
        var problem: String?
        while at < length {
            // One header at a time: a header that is not cached yet only ends the walk.
            guard have.contains(ByteRange(at, at + min(8, length - at))) else { break }  // no at + 8: length may be near 2^63
            do {
                let box = try walker.box(at: at, end: length)
                seen.append(box)
                at = box.end
            } catch {
                problem = "\(error)"
                break
            }
            if seen.count >= MP4Planner.maxTopLevelBoxes { break }
        }
        let types = seen.map(\.type)
        var facts = MP4Facts(layout: Self.layout(types), moov: seen.first { $0.type == "moov" }, problem: problem)
        guard let moov = facts.moov else { return facts }
        guard have.contains(ByteRange(moov.offset, moov.end)), moov.size <= MP4Movie.maxMoovSize else {
            facts.problem = facts.problem ?? "the moov is not cached ('vcache info --probe' fetches it)"
            return facts
        }
        do {
            let movie = try MP4Movie(moov: moov, bytes: try read(moov.offset, Int(moov.size)))
            facts.fragmented = movie.fragmented
            facts.duration = movie.durationSeconds
            facts.tracks = movie.tracks.map {
                Track(id: $0.id, kind: $0.kind, codec: $0.codec, timescale: $0.timescale, samples: $0.sampleCount, bitrate: $0.bitrate)
            }
            for seconds in [1.0, 2.0, 5.0] {
                // The planner over the whole file as if cached: it only reads headers, the moov and
                // moofs, so this works when those are cached; otherwise the answer is unknown.
                let planner = MP4Planner(goal: .seconds(seconds), length: length, have: RangeSet([ByteRange(0, length)])) { offset, count in
                    guard count >= 0, have.contains(ByteRange(offset, Checked.saturatingAdd(offset, Int64(count)))) else { throw MP4Error.truncatedHeader(at: offset) }
                    return try read(offset, count)
                }
                if case .done(let found) = planner.next() {
                    facts.bytesForSeconds.append((seconds, found.neededBytes))
                } else {
                    facts.bytesForSeconds.append((seconds, nil))
                }
            }
        } catch {
            facts.problem = "\(error)"
        }
        return facts
    }

    static func layout(_ types: [String]) -> String {
        guard types.first.map({ MP4Planner.firstTypes.contains($0) }) ?? false else {
            return types.isEmpty ? "unknown (the box headers are not cached yet)" : "not MP4 (no ftyp box)"
        }
        if let m = types.firstIndex(of: "moov"), let d = types.firstIndex(of: "mdat") {
            return m < d ? MP4Walker.Layout.moovFirst.rawValue : MP4Walker.Layout.moovLast.rawValue
        }
        if types.contains("moof") { return MP4Walker.Layout.fragmented.rawValue }
        if types.contains("moov") { return MP4Walker.Layout.moovFirst.rawValue }
        if types.contains("mdat") { return MP4Walker.Layout.moovLast.rawValue }
        return "unknown (the box headers are not cached yet)"
    }
}
