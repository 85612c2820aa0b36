/// Walks ISO BMFF (MP4, MOV) structure through a positional read function, so it works on a
/// cache `data` file or any other byte source. Never trusts a size field: every box must fit
/// inside its container, and the walk is bounded in depth and count.
public struct MP4Walker {
    /// Reads exactly `count` bytes at `offset`, or throws.
    public typealias Read = (_ offset: Int64, _ count: Int) throws -> [UInt8]

    public let read: Read
    public let length: Int64

    public init(length: Int64, read: @escaping Read) {
        self.length = length
        self.read = read
    }

    static let containers: Set<String> = ["moov", "trak", "mdia", "minf", "stbl", "edts", "dinf", "mvex", "moof", "traf", "udta"]

    /// The box whose header starts at `at`, checked to end by `end`.
    public func box(at: Int64, end: Int64) throws -> MP4Box {
        guard end - at >= 8 else { throw MP4Error.truncatedHeader(at: at) }
        let h = try read(at, 8)
        var size = Int64(UInt32(h[0]) << 24 | UInt32(h[1]) << 16 | UInt32(h[2]) << 8 | UInt32(h[3]))
        let type = String(decoding: h[4..<8].map { $0 >= 32 && $0 < 127 ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        var header: Int64 = 8
        if size == 1 {
            guard end - at >= 16 else { throw MP4Error.truncatedHeader(at: at) }
            var v: UInt64 = 0
            for b in try read(at + 8, 8) { v = v << 8 | UInt64(b) }
            guard v <= UInt64(Int64.max) else { throw MP4Error.badSize(type: type, at: at, size: -1) }
            size = Int64(v)
            header = 16
        } else if size == 0 {
            size = end - at  // "to the end of the file"
        }
        guard size >= header else { throw MP4Error.badSize(type: type, at: at, size: size) }
        let (boxEnd, overflow) = at.addingReportingOverflow(size)
        guard !overflow, boxEnd <= end else { throw MP4Error.overruns(type: type, at: at, end: overflow ? Int64.max : boxEnd, limit: end) }
        return MP4Box(type: type, offset: at, headerSize: header, size: size)
    }

    /// The boxes directly inside `[start, end)`; they must tile it exactly.
    public func boxes(from start: Int64, to end: Int64) throws -> [MP4Box] {
        var out: [MP4Box] = []
        var at = start
        while at < end {
            let b = try box(at: at, end: end)
            out.append(b)
            guard out.count < 100_000 else { throw MP4Error.tooManyBoxes }
            at = b.end
        }
        return out
    }

    public func topLevel() throws -> [MP4Box] { try boxes(from: 0, to: length) }

    public func children(of box: MP4Box) throws -> [MP4Box] { try boxes(from: box.payloadOffset, to: box.end) }

    /// Every box under `box` whose type is `type`, depth-first through the known containers.
    public func find(_ type: String, in box: MP4Box, depth: Int = 0) throws -> [MP4Box] {
        guard depth < 16 else { throw MP4Error.tooDeep }
        var found: [MP4Box] = []
        for child in try children(of: box) {
            if child.type == type { found.append(child) }
            if Self.containers.contains(child.type) { found += try find(type, in: child, depth: depth + 1) }
        }
        return found
    }

    /// The chunk offsets of every track (`stco`, 32-bit, and `co64`, 64-bit).
    public func chunkOffsets(moov: MP4Box) throws -> [Int64] {
        var offsets: [Int64] = []
        for (type, width) in [("stco", 4), ("co64", 8)] {
            for box in try find(type, in: moov) {
                guard box.size - box.headerSize >= 8 else { throw MP4Error.badSize(type: type, at: box.offset, size: box.size) }
                let head = try read(box.payloadOffset + 4, 4)  // after version and flags
                let count = Int64(UInt32(head[0]) << 24 | UInt32(head[1]) << 16 | UInt32(head[2]) << 8 | UInt32(head[3]))
                guard count * Int64(width) <= box.size - box.headerSize - 8 else {
                    throw MP4Error.badSize(type: type, at: box.offset, size: box.size)
                }
                let bytes = try read(box.payloadOffset + 8, Int(count) * width)
                var i = 0
                while i < bytes.count {
                    var v: Int64 = 0
                    for b in bytes[i..<i + width] { v = v << 8 | Int64(b) }
                    offsets.append(v)
                    i += width
                }
            }
        }
        return offsets
    }

    public enum Layout: String, Sendable {
        case moovFirst = "moov before mdat (fast start)"
        case moovLast = "moov after mdat (the player needs the end of the file first)"
        case fragmented = "fragmented (moof/mdat pairs)"
        case noMoov = "no moov box"
    }

    /// The file's structure, checked: top-level boxes tile the file exactly, `moov` is present,
    /// and every chunk offset lies inside the file. Throws a description of the first problem.
    public func check() throws -> Layout {
        let top = try topLevel()
        guard let moov = top.first(where: { $0.type == "moov" }) else { throw MP4CheckError("no 'moov' box: the file cannot be played") }
        for o in try chunkOffsets(moov: moov) where o < 0 || o >= length {
            throw MP4CheckError("a chunk offset (\(o)) points outside the file (\(length) bytes)")
        }
        return layout(top)
    }

    public func layout(_ top: [MP4Box]) -> Layout {
        guard let moov = top.firstIndex(where: { $0.type == "moov" }) else { return .noMoov }
        if top.contains(where: { $0.type == "moof" }) { return .fragmented }
        guard let mdat = top.firstIndex(where: { $0.type == "mdat" }) else { return .moovFirst }
        return moov < mdat ? .moovFirst : .moovLast
    }
}

public struct MP4CheckError: Error, Equatable, CustomStringConvertible, Sendable {
    public var description: String
    init(_ d: String) { description = d }
}

extension MP4Walker {
    /// A walker over bytes in memory that stand at `base` in the file: the boxes of a moov or a
    /// moof read whole, or a whole file (`base` 0). A read outside them throws.
    public init<C: RandomAccessCollection & Sendable>(bytes: C, base: Int64 = 0) where C.Element == UInt8, C.Index == Int {
        let count = Int64(bytes.count)
        self.init(length: base + count) { offset, n in
            let start = offset - base
            guard start >= 0, n >= 0, start + Int64(n) <= count else { throw MP4Error.truncatedHeader(at: offset) }
            let from = bytes.startIndex + Int(start)
            return Array(bytes[from..<from + n])
        }
    }

    /// A walker over a file, reading with pread.
    public init(file: RawFile, length: Int64) {
        self.init(length: length) { offset, count in try file.bytes(count, at: offset) }
    }
}
