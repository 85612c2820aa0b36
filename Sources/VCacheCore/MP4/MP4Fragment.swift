/// One movie fragment (`moof`, ISO/IEC 14496-12 §8.8): per track, where its samples start on the
/// decode timeline (`tfdt`, when present) and how long they last (`trun` durations, else the
/// `tfhd` or `trex` default).
struct MP4Fragment {
    struct Run { var track: UInt32; var baseDecodeTime: Int64?; var duration: Int64 }
    var runs: [Run] = []

    /// `a + b`, saturating at Int64.max (a hostile file's durations are nonsense, never a crash).
    static func add(_ a: Int64, _ b: (partialValue: Int64, overflow: Bool)) -> Int64 {
        if b.overflow { return .max }
        let (sum, overflow) = a.addingReportingOverflow(b.partialValue)
        return overflow ? .max : sum
    }

    init(moof: MP4Box, bytes: [UInt8], movie: MP4Movie) throws {
        let base = moof.offset
        let walker = MP4Walker(bytes: bytes, base: base)
        func payload(_ b: MP4Box) -> ByteCursor { ByteCursor(Array(bytes[Int(b.payloadOffset - base)..<Int(b.end - base)]), box: b) }
        for traf in try walker.children(of: moof) where traf.type == "traf" {
            var run = Run(track: 0, baseDecodeTime: nil, duration: 0)
            var defaultDuration: UInt32?
            for b in try walker.children(of: traf) {
                var c = payload(b)
                switch b.type {
                case "tfhd":
                    let (_, flags) = try c.fullBox()
                    run.track = try c.u32()
                    if flags & 0x01 != 0 { try c.skip(8) }
                    if flags & 0x02 != 0 { try c.skip(4) }
                    if flags & 0x08 != 0 { defaultDuration = try c.u32() }
                case "tfdt":
                    let (version, _) = try c.fullBox()
                    let t = try c.time(version: version)
                    guard t <= UInt64(Int64.max) else { throw c.error("decode time \(t) is out of range") }
                    run.baseDecodeTime = Int64(t)
                case "trun":
                    let (_, flags) = try c.fullBox()
                    let perSample = [0x100, 0x200, 0x400, 0x800].filter { flags & UInt32($0) != 0 }.count * 4
                    let n = try c.u32()
                    if flags & 0x01 != 0 { try c.skip(4) }
                    if flags & 0x04 != 0 { try c.skip(4) }
                    guard UInt64(n) * UInt64(perSample) <= UInt64(c.remaining) else { throw c.error("its sample count \(n) cannot fit in the box") }
                    let fallback = Int64(defaultDuration ?? movie.tracks.first { $0.id == run.track }?.defaultSampleDuration ?? 0)
                    // Durations are at most 2^32 samples of 2^32 units: kept from overflowing.
                    if flags & 0x100 == 0 {
                        run.duration = Self.add(run.duration, Int64(n).multipliedReportingOverflow(by: fallback))
                        try c.skip(Int(n) * perSample)
                    } else {
                        for _ in 0..<n {
                            run.duration = Self.add(run.duration, (Int64(try c.u32()), false))
                            try c.skip(perSample - 4)
                        }
                    }
                default:
                    break
                }
            }
            runs.append(run)
        }
    }
}
