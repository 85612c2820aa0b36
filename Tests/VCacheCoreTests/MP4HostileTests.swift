import Testing
@testable import VCacheCore

/// Sample tables a hostile or broken file can carry: each one clear error, never a trap.
@Suite struct MP4HostileTests {
    typealias F = FastStartTests

    static func full(_ type: String, _ body: [UInt8]) -> [UInt8] { F.box(type, [0, 0, 0, 0] + body) }

    /// A one-track moov with the given sample-table boxes.
    static func moov(_ tables: [UInt8], elst: [UInt8] = []) -> [UInt8] {
        let mdhd = full("mdhd", F.be(0, 8) + F.be(1000, 4) + F.be(10_000, 4) + F.be(0, 4))
        let hdlr = full("hdlr", F.be(0, 4) + Array("vide".utf8) + [UInt8](repeating: 0, count: 13))
        let edts = elst.isEmpty ? [] : F.box("edts", elst)
        return F.box("moov", F.box("trak", edts + F.box("mdia", mdhd + hdlr + F.box("minf", F.box("stbl", tables)))))
    }

    static func parse(_ m: [UInt8]) throws -> MP4Movie {
        try MP4Movie(moov: MP4Box(type: "moov", offset: 0, headerSize: 8, size: Int64(m.count)), bytes: m)
    }

    static let stts = full("stts", F.be(1, 4) + F.be(10, 4) + F.be(100, 4))
    static let stsc = full("stsc", F.be(1, 4) + F.be(1, 4) + F.be(10, 4) + F.be(1, 4))

    @Test func uniformSampleSizesThatAddUpPast2To63AreRefused() throws {
        let m = Self.moov(Self.stts + Self.stsc + Self.full("stsz", F.be(0xffff_ffff, 4) + F.be(0xffff_ffff, 4)))
        #expect {
            try Self.parse(m)
        } throws: { ($0 as? MP4Error)?.description.contains("samples of 4294967295 bytes add up past any file") == true }
    }

    @Test func aBitrateOverATinyDurationDoesNotTrap() throws {
        var t = try #require(try Self.parse(Self.moov(Self.stts + Self.stsc + Self.full("stsz", F.be(0xffff_ffff, 4) + F.be(0xffff, 4)))).tracks.first)
        t.duration = 1
        t.timescale = 0xffff_ffff
        #expect(t.bitrate == 0)
    }

    @Test func aChunkOffsetNear2To63IsOutsideTheFileNotATrap() throws {
        let sizes = Self.full("stsz", F.be(0, 4) + F.be(10, 4) + [UInt8](repeating: 0, count: 36) + F.be(100, 4))
        let co64 = Self.full("co64", F.be(1, 4) + F.be(UInt64(Int64.max - 50), 8))
        let track = try #require(try Self.parse(Self.moov(Self.stts + Self.stsc + sizes + co64)).tracks.first)
        #expect {
            try track.sampleRanges(before: 100, fileLength: 1000)
        } throws: { ($0 as? MP4Error)?.description.contains("lies outside the file") == true }
    }

    @Test func anStscThatPointsPastTheChunkTableIsNamed() throws {
        let stsc = Self.full("stsc", F.be(2, 4) + F.be(1, 4) + F.be(2, 4) + F.be(1, 4) + F.be(9, 4) + F.be(3, 4) + F.be(1, 4))
        let sizes = Self.full("stsz", F.be(1, 4) + F.be(10, 4))
        let stco = Self.full("stco", F.be(2, 4) + F.be(0, 4) + F.be(10, 4))
        let track = try #require(try Self.parse(Self.moov(Self.stts + stsc + sizes + stco)).tracks.first)
        #expect {
            try track.sampleRanges(before: 100, fileLength: 1000)
        } throws: { error in
            let d = (error as? MP4Error)?.description ?? ""
            return d.hasPrefix("box 'stsc' at offset ") && d.contains("past the chunk table (2 chunks)")
        }
    }

    @Test func anEditListStartingAtTheSmallestInt64DoesNotTrap() throws {
        let elst = Self.full("elst", F.be(1, 4) + F.be(10, 8) + F.be(UInt64(bitPattern: Int64.min), 8) + F.be(0x10000, 4)).withVersion(1)
        let sizes = Self.full("stsz", F.be(1, 4) + F.be(10, 4))
        let stco = Self.full("stco", F.be(1, 4) + F.be(0, 4))
        let track = try #require(try Self.parse(Self.moov(Self.stts + Self.stsc + sizes + stco, elst: elst)).tracks.first)
        #expect(track.mediaStart == Int64.min)
        _ = try? track.sampleRanges(before: 1, fileLength: 1000)
    }
}

extension Array where Element == UInt8 {
    /// A full box with its version byte set.
    func withVersion(_ v: UInt8) -> [UInt8] {
        var b = self
        b[8] = v
        return b
    }
}

/// A file an origin says is near 2^63 bytes, whose first box (a 64-bit size) ends 3 bytes before
/// that: the next header's range was `at + 8`, past Int64 (a trap); it is the 3 bytes left now,
/// too few for a header (an error), for the planner and for info's facts alike.
@Suite struct MP4LengthNear2To63Tests {
    static let length = Int64.max
    static let firstBoxEnd = Int64.max - 3

    static func read(_ offset: Int64, _ count: Int) throws -> [UInt8] {
        // `ftyp` with a 64-bit size reaching firstBoxEnd, then zeros.
        var head: [UInt8] = [0, 0, 0, 1] + Array("ftyp".utf8)
        head += withUnsafeBytes(of: UInt64(firstBoxEnd).bigEndian, Array.init) + Array("isom".utf8) + [0, 0, 2, 0]
        return (0..<count).map { i in
            let at = offset + Int64(i)
            return at < Int64(head.count) ? head[Int(at)] : 0
        }
    }

    @Test func thePlannerStopsAtTheLastBytesWithoutATrap() {
        let planner = MP4Planner(goal: .seconds(2), length: Self.length, have: RangeSet([ByteRange(0, Self.length)]), read: Self.read)
        switch planner.next() {
        case .done: Issue.record("no moov, yet done")
        default: break
        }
    }

    @Test func infoSeesTheBoxAndNoMoovWithoutATrap() {
        let facts = MP4Facts.inspect(length: Self.length, have: RangeSet([ByteRange(0, Self.length)]), read: Self.read)
        #expect(facts.moov == nil)
    }
}
