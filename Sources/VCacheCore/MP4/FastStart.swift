/// `export --faststart`: the MP4 rewritten with its `moov` in front of the media, as
/// `qt-faststart` and `ffmpeg -movflags +faststart` do. The media bytes are untouched; every
/// chunk offset (`stco`/`co64`) moves by what moved in front of it, and a track whose offsets no
/// longer fit 32 bits switches from `stco` to `co64` (which makes the moov larger, so the shift is
/// computed again until it settles).
public enum FastStart {
    /// The output, in order: ranges of the source and new bytes.
    public enum Piece: Equatable, Sendable {
        case source(ByteRange)
        case bytes([UInt8])
    }

    static let containers: Set<String> = ["moov", "trak", "mdia", "minf", "stbl"]

    /// The pieces of the fast-start file, or nil when the moov already comes before the first
    /// `mdat` (nothing to move). `top` are the file's top-level boxes, `moov` the moov's bytes.
    public static func plan(top: [MP4Box], moov moovBytes: [UInt8], length: Int64) throws -> [Piece]? {
        guard let moov = top.first(where: { $0.type == "moov" }) else { throw MP4Error.notMP4("no 'moov' box") }
        guard let mdat = top.first(where: { $0.type == "mdat" }), mdat.offset < moov.offset else { return nil }
        let insert = mdat.offset
        var upgrades = Set<Int>()  // stco boxes (offset within the moov) that must become co64
        var rebuilt = moovBytes
        for _ in 0...64 {
            let newSize = Int64(try rebuiltSize(moovBytes, upgrades: upgrades))
            // Saturating: a hostile offset near 2^63 must not trap (the result is nonsense either way).
            let shift: (Int64) -> Int64 = { o in
                if o < insert { return o }
                let (moved, overflow) = o.addingReportingOverflow(o < moov.offset ? newSize : newSize - moov.size)
                return overflow ? .max : moved
            }
            var overflow = Set<Int>()
            rebuilt = try rebuild(moovBytes, at: 0, end: moovBytes.count, shift: shift, upgrades: upgrades, overflow: &overflow)
            if overflow.isEmpty {
                var pieces: [Piece] = [.source(ByteRange(0, insert)), .bytes(rebuilt)]
                if moov.offset > insert { pieces.append(.source(ByteRange(insert, moov.offset))) }
                if moov.end < length { pieces.append(.source(ByteRange(moov.end, length))) }
                return pieces.filter { if case .source(let r) = $0 { return !r.isEmpty } else { return true } }
            }
            upgrades.formUnion(overflow)
        }
        throw MP4Error.malformed(type: "stco", at: moov.offset, reason: "chunk offsets did not settle after switching tables to co64")
    }

    private static func header(_ b: [UInt8], _ at: Int, _ end: Int) throws -> (size: Int, header: Int, type: String) {
        guard end - at >= 8 else { throw MP4Error.truncatedHeader(at: Int64(at)) }
        var size = Int(UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3]))
        let type = String(decoding: b[at + 4..<at + 8], as: UTF8.self)
        var h = 8
        if size == 1 {
            guard end - at >= 16 else { throw MP4Error.truncatedHeader(at: Int64(at)) }
            var v: UInt64 = 0
            for x in b[at + 8..<at + 16] { v = v << 8 | UInt64(x) }
            guard v <= UInt64(end - at) else { throw MP4Error.badSize(type: type, at: Int64(at), size: -1) }
            size = Int(v)
            h = 16
        } else if size == 0 {
            size = end - at
        }
        guard size >= h, at + size <= end else { throw MP4Error.badSize(type: type, at: Int64(at), size: Int64(size)) }
        return (size, h, type)
    }

    /// The moov's size once rebuilt with `upgrades` (each upgraded stco grows by 4 bytes per entry).
    private static func rebuiltSize(_ b: [UInt8], upgrades: Set<Int>) throws -> Int {
        var grow = 0
        for at in upgrades {
            let n = Int(UInt32(b[at + 12]) << 24 | UInt32(b[at + 13]) << 16 | UInt32(b[at + 14]) << 8 | UInt32(b[at + 15]))
            grow += 4 * n
        }
        return b.count + grow
    }

    private static func rebuild(_ b: [UInt8], at: Int, end: Int, shift: (Int64) -> Int64, upgrades: Set<Int>,
                                overflow: inout Set<Int>) throws -> [UInt8] {
        let (size, h, type) = try header(b, at, end)
        var payload: [UInt8]
        var outType = type
        if containers.contains(type) {
            payload = []
            var child = at + h
            while child < at + size {
                let (childSize, _, _) = try header(b, child, at + size)
                payload += try rebuild(b, at: child, end: at + size, shift: shift, upgrades: upgrades, overflow: &overflow)
                child += childSize
            }
        } else if type == "stco" || type == "co64" {
            var c = ByteCursor(Array(b[at + h..<at + size]), box: MP4Box(type: type, offset: Int64(at), headerSize: Int64(h), size: Int64(size)))
            let flags = try c.u32()
            let width = type == "stco" ? 4 : 8
            let n = try c.count(entrySize: width, what: "chunk")
            let wide = type == "co64" || upgrades.contains(at)
            outType = wide ? "co64" : "stco"
            payload = []
            payload.reserveCapacity(8 + n * (wide ? 8 : 4))
            append(&payload, UInt64(flags), 4)
            append(&payload, UInt64(n), 4)
            for _ in 0..<n {
                let moved = shift(width == 4 ? Int64(try c.u32()) : try c.i64())
                if !wide && moved > Int64(UInt32.max) { overflow.insert(at) }
                append(&payload, UInt64(bitPattern: moved), wide ? 8 : 4)
            }
        } else {
            return Array(b[at..<at + size])
        }
        var out: [UInt8] = []
        let total = h + payload.count
        if h == 16 {
            append(&out, 1, 4)
            out += Array(outType.utf8)
            append(&out, UInt64(total), 8)
        } else {
            append(&out, UInt64(total), 4)
            out += Array(outType.utf8)
        }
        return out + payload
    }

    private static func append(_ out: inout [UInt8], _ v: UInt64, _ width: Int) {
        for i in stride(from: width - 1, through: 0, by: -1) { out.append(UInt8(truncatingIfNeeded: v >> (UInt64(i) * 8))) }
    }
}
