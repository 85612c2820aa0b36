/// Big-endian reads from one box's payload, each checked against the payload's end: a count or
/// size from the file is never trusted past the bytes that are really there.
struct ByteCursor {
    let bytes: [UInt8]
    let type: String
    let offset: Int64
    private(set) var at = 0

    init(_ bytes: [UInt8], box: MP4Box) {
        self.bytes = bytes
        type = box.type
        offset = box.offset
    }

    var remaining: Int { bytes.count - at }

    func error(_ reason: String) -> MP4Error { .malformed(type: type, at: offset, reason: reason) }

    mutating func skip(_ n: Int) throws {
        guard n >= 0, n <= remaining else { throw error("cut short (needs \(n) more bytes, has \(remaining))") }
        at += n
    }

    mutating func uint(_ width: Int) throws -> UInt64 {
        guard width <= remaining else { throw error("cut short (needs \(width) more bytes, has \(remaining))") }
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(bytes[at + i]) }
        at += width
        return v
    }

    mutating func u8() throws -> UInt8 { UInt8(try uint(1)) }
    mutating func u16() throws -> UInt16 { UInt16(try uint(2)) }
    mutating func u32() throws -> UInt32 { UInt32(try uint(4)) }
    mutating func u64() throws -> UInt64 { try uint(8) }
    mutating func i32() throws -> Int32 { Int32(bitPattern: try u32()) }
    mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }

    mutating func fourCC() throws -> String {
        guard remaining >= 4 else { throw error("cut short") }
        let s = String(decoding: bytes[at..<at + 4].map { $0 >= 32 && $0 < 127 ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        at += 4
        return s
    }

    /// Version and flags of a full box.
    mutating func fullBox() throws -> (version: UInt8, flags: UInt32) {
        let v = try u32()
        return (UInt8(v >> 24), v & 0xff_ffff)
    }

    /// A time or duration: 64 bits in a version-1 full box, 32 bits otherwise.
    mutating func time(version: UInt8) throws -> UInt64 {
        version == 1 ? try u64() : UInt64(try u32())
    }

    /// The head `mvhd` and `mdhd` share: a full box, the creation and modification times
    /// (skipped), the timescale and the duration.
    mutating func timescaleAndDuration() throws -> (timescale: UInt32, duration: UInt64) {
        let (version, _) = try fullBox()
        try skip(version == 1 ? 16 : 8)
        let timescale = try u32()
        return (timescale, try time(version: version))
    }

    /// An entry count whose `entrySize`-byte entries must fit in what is left of the box.
    mutating func count(entrySize: Int, what: String) throws -> Int {
        let n = try u32()
        guard UInt64(n) * UInt64(entrySize) <= UInt64(remaining) else {
            throw error("its \(what) count \(n) cannot fit in the box (\(remaining) bytes left)")
        }
        return Int(n)
    }
}
