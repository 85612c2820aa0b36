/// What a `moov` box says (ISO/IEC 14496-12 §8): the movie's timescale and duration, and per
/// track its kind, codec, timescale, edit list and sample tables. Parsed from the moov's bytes in
/// memory; every count is checked against the box it sits in before anything is read or
/// allocated, so a hostile file gives an `MP4Error` naming the box and offset, never a crash.
public struct MP4Movie: Sendable {
    public var timescale: UInt32
    public var duration: UInt64
    public var tracks: [MP4Track]
    /// `mvex` present: the samples are in `moof`/`mdat` fragments after the moov.
    public var fragmented: Bool

    /// The largest moov vcache will read (a size field is never trusted to be small).
    public static let maxMoovSize: Int64 = 256 << 20

    public var durationSeconds: Double {
        if timescale > 0 && duration > 0 { return Double(duration) / Double(timescale) }
        return tracks.map(\.durationSeconds).max() ?? 0
    }

    /// Parses `bytes`, the whole `moov` box found at `moov.offset`.
    public init(moov: MP4Box, bytes: [UInt8]) throws {
        guard Int64(bytes.count) == moov.size else { throw MP4Error.malformed(type: "moov", at: moov.offset, reason: "expected \(moov.size) bytes, got \(bytes.count)") }
        let base = moov.offset
        let walker = MP4Walker(bytes: bytes, base: base)
        func payload(_ b: MP4Box) -> ByteCursor {
            ByteCursor(Array(bytes[Int(b.payloadOffset - base)..<Int(b.end - base)]), box: b)
        }
        var timescale: UInt32 = 0, duration: UInt64 = 0
        var tracks: [MP4Track] = []
        var fragmented = false
        var trex: [UInt32: (duration: UInt32, size: UInt32)] = [:]
        for child in try walker.children(of: moov) {
            switch child.type {
            case "mvhd":
                var c = payload(child)
                (timescale, duration) = try c.timescaleAndDuration()
            case "trak":
                tracks.append(try MP4Track(trak: child, walker: walker, payload: payload))
            case "mvex":
                fragmented = true
                for t in try walker.children(of: child) where t.type == "trex" {
                    var c = payload(t)
                    _ = try c.fullBox()
                    let id = try c.u32()
                    try c.skip(4)  // default_sample_description_index
                    let d = try c.u32(), s = try c.u32()
                    trex[id] = (d, s)
                }
            default:
                break
            }
        }
        guard !tracks.isEmpty else { throw MP4Error.malformed(type: "moov", at: moov.offset, reason: "it has no track") }
        for i in tracks.indices {
            if timescale > 0 { tracks[i].delay = Double(tracks[i].emptyEditUnits) / Double(timescale) }
            if let d = trex[tracks[i].id] {
                tracks[i].defaultSampleDuration = d.duration
                tracks[i].defaultSampleSize = d.size
            }
        }
        self.timescale = timescale
        self.duration = duration
        self.tracks = tracks
        self.fragmented = fragmented
    }
}

/// One `trak`: what it is and where its samples are.
public struct MP4Track: Sendable {
    public var id: UInt32 = 0
    /// The handler: `vide`, `soun`, `text`, ...
    public var kind: String = "?"
    /// The first sample description's four-cc: `avc1`, `hvc1`, `mp4a`, ...
    public var codec: String = "?"
    public var timescale: UInt32 = 0
    public var duration: UInt64 = 0
    /// Media time (track timescale) where presentation starts: the first non-empty edit's.
    public var mediaStart: Int64 = 0
    /// Seconds of empty edits before it (a presentation delay).
    public var delay: Double = 0
    public var sampleCount = 0
    /// Sum of every sample's size.
    public var totalBytes: Int64 = 0
    var timeToSample: [(count: UInt32, delta: UInt32)] = []
    var sampleToChunk: [(firstChunk: UInt32, perChunk: UInt32)] = []
    var uniformSize: UInt32 = 0
    var sizes: [UInt32] = []
    var chunkOffsets: [Int64] = []
    var defaultSampleDuration: UInt32 = 0
    var defaultSampleSize: UInt32 = 0
    /// Where each sample table box is, for errors that name it.
    var tableOffsets: [String: Int64] = [:]

    public var durationSeconds: Double { timescale > 0 ? Double(duration) / Double(timescale) : 0 }

    /// Average bits per second over the track's duration (0 when unknown).
    public var bitrate: Int64 {
        guard durationSeconds > 0 else { return 0 }
        let bits = Double(totalBytes) * 8 / durationSeconds
        return bits < 9e18 ? Int64(bits) : 0  // a nonsense duration must not trap the conversion
    }

    init(trak: MP4Box, walker: MP4Walker, payload: (MP4Box) -> ByteCursor) throws {
        for b in try walker.children(of: trak) {
            switch b.type {
            case "tkhd":
                var c = payload(b)
                let (version, _) = try c.fullBox()
                try c.skip(version == 1 ? 16 : 8)
                id = try c.u32()
            case "edts":
                for e in try walker.children(of: b) where e.type == "elst" {
                    try readEditList(payload(e))
                }
            case "mdia":
                try readMedia(b, walker: walker, payload: payload)
            default:
                break
            }
        }
        guard timescale > 0 else { throw MP4Error.malformed(type: "trak", at: trak.offset, reason: "its media timescale (mdhd) is missing or 0") }
    }

    private mutating func readEditList(_ cursor: ByteCursor) throws {
        var c = cursor
        let (version, _) = try c.fullBox()
        let n = try c.count(entrySize: version == 1 ? 20 : 12, what: "edit")
        var emptyDuration: UInt64 = 0
        for _ in 0..<n {
            let segment = try c.time(version: version)
            let mediaTime = version == 1 ? try c.i64() : Int64(try c.i32())
            try c.skip(4)  // rate
            if mediaTime == -1 {
                emptyDuration &+= segment
            } else {
                mediaStart = mediaTime
                break
            }
        }
        emptyEditUnits = emptyDuration
    }
    /// Empty edits' duration, in the movie's timescale (`MP4Movie` turns it into `delay`).
    var emptyEditUnits: UInt64 = 0

    private mutating func readMedia(_ mdia: MP4Box, walker: MP4Walker, payload: (MP4Box) -> ByteCursor) throws {
        for b in try walker.children(of: mdia) {
            switch b.type {
            case "mdhd":
                var c = payload(b)
                (timescale, duration) = try c.timescaleAndDuration()
            case "hdlr":
                var c = payload(b)
                _ = try c.fullBox()
                try c.skip(4)
                kind = try c.fourCC()
            case "minf":
                for m in try walker.children(of: b) where m.type == "stbl" {
                    try readSampleTable(m, walker: walker, payload: payload)
                }
            default:
                break
            }
        }
    }

    private mutating func readSampleTable(_ stbl: MP4Box, walker: MP4Walker, payload: (MP4Box) -> ByteCursor) throws {
        for b in try walker.children(of: stbl) {
            var c = payload(b)
            tableOffsets[b.type] = b.offset
            switch b.type {
            case "stsd":
                _ = try c.fullBox()
                if try c.u32() > 0 {
                    try c.skip(4)
                    codec = try c.fourCC()
                }
            case "stts":
                _ = try c.fullBox()
                let n = try c.count(entrySize: 8, what: "entry")
                timeToSample.reserveCapacity(n)
                for _ in 0..<n { timeToSample.append((try c.u32(), try c.u32())) }
            case "stsc":
                _ = try c.fullBox()
                let n = try c.count(entrySize: 12, what: "entry")
                sampleToChunk.reserveCapacity(n)
                var previous: UInt32 = 0
                for _ in 0..<n {
                    let first = try c.u32(), per = try c.u32()
                    try c.skip(4)
                    guard first > previous else { throw c.error("its first-chunk numbers are not increasing (\(first) after \(previous))") }
                    previous = first
                    sampleToChunk.append((first, per))
                }
            case "stsz":
                _ = try c.fullBox()
                uniformSize = try c.u32()
                if uniformSize == 0 {
                    let n = try c.count(entrySize: 4, what: "sample")
                    sizes.reserveCapacity(n)
                    for _ in 0..<n {
                        let s = try c.u32()
                        sizes.append(s)
                        totalBytes += Int64(s)
                    }
                    sampleCount = n
                } else {
                    sampleCount = Int(try c.u32())
                    // At most 2^32 samples of 2^32 bytes: 2^64 overflows, so check.
                    let (total, overflow) = Int64(sampleCount).multipliedReportingOverflow(by: Int64(uniformSize))
                    guard !overflow else { throw c.error("\(sampleCount) samples of \(uniformSize) bytes add up past any file") }
                    totalBytes = total
                }
            case "stz2":
                _ = try c.fullBox()
                try c.skip(3)
                let field = Int(try c.u8())
                guard field == 4 || field == 8 || field == 16 else { throw c.error("field size \(field) is not 4, 8 or 16") }
                let n = Int(try c.u32())
                guard UInt64(n) * UInt64(field) <= UInt64(c.remaining) * 8 else { throw c.error("its sample count \(n) cannot fit in the box") }
                sizes.reserveCapacity(n)
                var i = 0
                while i < n {
                    if field == 4 {
                        let byte = try c.u8()
                        sizes.append(UInt32(byte >> 4))
                        if i + 1 < n { sizes.append(UInt32(byte & 0xf)) }
                        i += 2
                    } else {
                        sizes.append(field == 8 ? UInt32(try c.u8()) : UInt32(try c.u16()))
                        i += 1
                    }
                }
                totalBytes = sizes.reduce(0) { $0 + Int64($1) }
                sampleCount = n
            case "stco", "co64":
                _ = try c.fullBox()
                let width = b.type == "stco" ? 4 : 8
                let n = try c.count(entrySize: width, what: "chunk")
                chunkOffsets.reserveCapacity(n)
                for _ in 0..<n { chunkOffsets.append(width == 4 ? Int64(try c.u32()) : try c.i64()) }
            default:
                break
            }
        }
    }
}
