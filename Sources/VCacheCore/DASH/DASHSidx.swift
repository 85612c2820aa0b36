/// The `sidx` box of a SegmentBase Representation (ISO/IEC 14496-12 §8.16.3): its references
/// become the subsegments, byte ranges of the one file. Versions 0 and 1 (32- and 64-bit
/// times and offset); a reference to another sidx (reference_type 1) is refused, as ExoPlayer
/// does ("unhandled indirect reference"). Sizes past the file's 2^63 bytes are errors.
public enum DASHSidx {
    /// The subsegments of the sidx held in `bytes`, which were read from `indexRange` of `url`
    /// (the box starts at `indexRange.first`). `presentationTimeOffset` over `timescale`: the
    /// SegmentBase's, subtracted from the times.
    public static func subsegments(_ bytes: [UInt8], indexRange: MPD.ByteSpan, url: String,
                                   presentationTimeOffset: Int64 = 0, timescale: Int64 = 1) throws(DASHError) -> [DASHSegment] {
        var c = Cursor(bytes: bytes)
        var size = UInt64(try c.u32())
        guard try c.u32() == 0x7369_6478 else { throw .sidx("the bytes at @indexRange are not a sidx box") }  // "sidx"
        var header: UInt64 = 8
        if size == 1 { size = try c.u64(); header = 16 }
        guard size >= header, size <= UInt64(Int64.max) else { throw .sidx("a box size of \(size)") }
        let version = try c.u8()
        _ = try c.u8(); _ = try c.u8(); _ = try c.u8()  // flags
        _ = try c.u32()  // reference_ID
        let sidxTimescale = try c.u32()
        guard sidxTimescale > 0 else { throw .sidx("a timescale of 0") }
        let earliest: UInt64
        let firstOffset: UInt64
        switch version {
        case 0: earliest = UInt64(try c.u32()); firstOffset = UInt64(try c.u32())
        case 1: earliest = try c.u64(); firstOffset = try c.u64()
        default: throw .sidx("version \(version) (only 0 and 1 exist)")
        }
        _ = try c.u16()  // reserved
        let count = Int(try c.u16())
        guard count <= DASHLimits.maxSidxReferences else { throw .sidx("more than \(DASHLimits.maxSidxReferences) references") }
        // Offsets count from the byte after the sidx box.
        var (offset, o1) = indexRange.first.addingReportingOverflow(Int64(size))
        let (o, o2) = offset.addingReportingOverflow(Int64(clamping: firstOffset))
        guard !o1, !o2, firstOffset <= UInt64(Int64.max) else { throw .sidx("its first_offset overflows 64 bits") }
        offset = o
        var time = Double(earliest)
        let pto = Double(presentationTimeOffset) / Double(max(1, timescale))
        var out: [DASHSegment] = []
        for _ in 0..<count {
            let word = try c.u32()
            let duration = try c.u32()
            _ = try c.u32()  // SAP
            guard word & 0x8000_0000 == 0 else { throw .sidx("it references another sidx (a hierarchical index): not supported") }
            let length = Int64(word & 0x7FFF_FFFF)
            guard length > 0 else { throw .sidx("a subsegment of 0 bytes") }
            let (end, o) = offset.addingReportingOverflow(length)
            guard !o else { throw .sidx("the subsegments' sizes overflow 64 bits") }
            out.append(DASHSegment(url: url, range: MPD.ByteSpan(first: offset, last: end - 1),
                                   start: time / Double(sidxTimescale) - pto, duration: Double(duration) / Double(sidxTimescale)))
            offset = end
            time += Double(duration)
        }
        return out
    }

    private struct Cursor {
        let bytes: [UInt8]
        var at = 0
        mutating func take(_ n: Int) throws(DASHError) -> ArraySlice<UInt8> {
            guard n <= bytes.count - at else { throw .sidx("it ends after \(bytes.count) bytes, inside its fields") }
            defer { at += n }
            return bytes[at..<(at + n)]
        }
        mutating func u8() throws(DASHError) -> UInt8 { try take(1).first ?? 0 }
        mutating func u16() throws(DASHError) -> UInt16 { try take(2).reduce(0) { $0 << 8 | UInt16($1) } }
        mutating func u32() throws(DASHError) -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
        mutating func u64() throws(DASHError) -> UInt64 { try take(8).reduce(0) { $0 << 8 | UInt64($1) } }
    }
}
