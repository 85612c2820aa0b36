import Testing
@testable import VCacheCore

/// The moov rewrite of `export --faststart`, on synthetic boxes (no 4 GiB file needed).
@Suite struct FastStartTests {
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let size = UInt32(8 + payload.count)
        return [UInt8(size >> 24), UInt8(size >> 16 & 0xff), UInt8(size >> 8 & 0xff), UInt8(size & 0xff)] + Array(type.utf8) + payload
    }
    static func be(_ v: UInt64, _ width: Int) -> [UInt8] { (0..<width).reversed().map { UInt8(truncatingIfNeeded: v >> (UInt64($0) * 8)) } }
    static func stco(_ offsets: [UInt32]) -> [UInt8] { box("stco", [0, 0, 0, 0] + be(UInt64(offsets.count), 4) + offsets.flatMap { be(UInt64($0), 4) }) }
    static func moov(_ offsets: [UInt32]) -> [UInt8] {
        box("moov", box("trak", box("mdia", box("minf", box("stbl", stco(offsets))))))
    }

    /// Reads the chunk offsets back out of a rebuilt moov.
    static func offsets(_ moov: [UInt8]) throws -> (type: String, values: [Int64]) {
        let walker = MP4Walker(bytes: moov)
        let top = try #require(try walker.topLevel().first)
        let table = try #require(try (walker.find("stco", in: top) + walker.find("co64", in: top)).first)
        return (table.type, try walker.chunkOffsets(moov: top))
    }

    @Test func chunkOffsetsMoveByTheMoovsSize() throws {
        let m = Self.moov([40, 1000])
        let length: Int64 = 2000 + Int64(m.count)
        let top = [MP4Box(type: "ftyp", offset: 0, headerSize: 8, size: 32), MP4Box(type: "mdat", offset: 32, headerSize: 8, size: 1968),
                   MP4Box(type: "moov", offset: 2000, headerSize: 8, size: Int64(m.count))]
        let pieces = try #require(try FastStart.plan(top: top, moov: m, length: length))
        guard case .bytes(let rebuilt) = pieces[1] else { Issue.record("no moov piece"); return }
        #expect(pieces[0] == .source(ByteRange(0, 32)))
        #expect(pieces[2] == .source(ByteRange(32, 2000)))
        #expect(pieces.count == 3)
        #expect(rebuilt.count == m.count)
        #expect(try Self.offsets(rebuilt) == ("stco", [40 + Int64(m.count), 1000 + Int64(m.count)]))
    }

    @Test func offsetsPast4GiBSwitchTheTableToCo64() throws {
        let big: UInt32 = 4_294_967_250  // fits 32 bits now, not once the moov (64 bytes) moves in front
        let m = Self.moov([64, big])
        let mdatSize = Int64(big) + 200
        let top = [MP4Box(type: "ftyp", offset: 0, headerSize: 8, size: 32), MP4Box(type: "mdat", offset: 32, headerSize: 16, size: mdatSize),
                   MP4Box(type: "moov", offset: 32 + mdatSize, headerSize: 8, size: Int64(m.count))]
        let pieces = try #require(try FastStart.plan(top: top, moov: m, length: 32 + mdatSize + Int64(m.count)))
        guard case .bytes(let rebuilt) = pieces[1] else { Issue.record("no moov piece"); return }
        // Two entries grow by 4 bytes each, and every offset moves by the new moov's size.
        #expect(rebuilt.count == m.count + 8)
        let moved = Int64(rebuilt.count)
        #expect(try Self.offsets(rebuilt) == ("co64", [64 + moved, Int64(big) + moved]))
    }

    @Test func aMoovAlreadyInFrontIsLeftAlone() throws {
        let m = Self.moov([100])
        let top = [MP4Box(type: "ftyp", offset: 0, headerSize: 8, size: 32), MP4Box(type: "moov", offset: 32, headerSize: 8, size: Int64(m.count)),
                   MP4Box(type: "mdat", offset: 32 + Int64(m.count), headerSize: 8, size: 100)]
        #expect(try FastStart.plan(top: top, moov: m, length: 132 + Int64(m.count)) == nil)
    }
}
