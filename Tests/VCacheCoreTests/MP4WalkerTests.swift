import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

@Suite struct MP4WalkerTests {
    func walker(_ data: Data) -> MP4Walker {
        MP4Walker(length: Int64(data.count)) { offset, count in
            guard offset >= 0, offset + Int64(count) <= Int64(data.count) else { throw MP4Error.truncatedHeader(at: offset) }
            return Array(data[Int(offset)..<Int(offset) + count])
        }
    }

    @Test(arguments: [
        ("moov-at-end.mp4", MP4Walker.Layout.moovLast), ("moov-at-front.mp4", .moovFirst),
        ("fragmented.mp4", .fragmented), ("quicktime.mov", .moovLast),
    ])
    func realFilesWalkCleanlyAndReportWhereMoovIs(name: String, layout: MP4Walker.Layout) throws {
        #expect(try walker(Fixtures.data(name)).check() == layout)
    }

    @Test func aTruncatedFileIsReportedNotCrashed() throws {
        #expect(throws: MP4Error.self) { try walker(Fixtures.data("truncated.mp4")).check() }
    }

    @Test func chunkOffsetsAreWhereFFprobeSaysThePacketsAre() throws {
        let path = Fixtures.path("moov-at-end.mp4")
        let out = String(decoding: try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=pos", "-of", "csv=p=0", path]).out, as: UTF8.self)
        let packetStarts = Set(out.split(separator: "\n").compactMap { $0.split(separator: ",").first.flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } })
        #expect(packetStarts.count > 100)
        let w = walker(try Fixtures.data("moov-at-end.mp4"))
        let moov = try #require(try w.topLevel().first { $0.type == "moov" })
        let offsets = try w.chunkOffsets(moov: moov)
        #expect(!offsets.isEmpty)
        #expect(Set(offsets).isSubset(of: packetStarts))
    }

    static func box(_ type: String, size: UInt32, payload: [UInt8] = []) -> [UInt8] {
        [UInt8(size >> 24), UInt8(size >> 16 & 0xff), UInt8(size >> 8 & 0xff), UInt8(size & 0xff)] + Array(type.utf8) + payload
    }

    @Test func hostileSizeFieldsAreRejected() {
        let tooBig = Data(Self.box("ftyp", size: 16, payload: Array(repeating: 0, count: 8)) + Self.box("moov", size: 0xFFFF_FFF0))
        #expect(throws: MP4Error.overruns(type: "moov", at: 16, end: 16 + 0xFFFF_FFF0, limit: 24)) { try walker(tooBig).topLevel() }
        let tooSmall = Data(Self.box("free", size: 4) + [0, 0, 0, 0])
        #expect(throws: MP4Error.badSize(type: "free", at: 0, size: 4)) { try walker(tooSmall).topLevel() }
        var huge = Self.box("mdat", size: 1)
        huge += [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        #expect(throws: MP4Error.self) { try walker(Data(huge)).topLevel() }
        let cut = Data([0, 0, 0])
        #expect(throws: MP4Error.truncatedHeader(at: 0)) { try walker(cut).topLevel() }
    }

    @Test func aChunkOffsetOutsideTheFileIsAProblem() throws {
        // moov > trak > mdia > minf > stbl > stco with one offset far past the end.
        let stco = Self.box("stco", size: 20, payload: [0, 0, 0, 0, 0, 0, 0, 1, 0x10, 0, 0, 0])
        var inner = stco
        for type in ["stbl", "minf", "mdia", "trak", "moov"] { inner = Self.box(type, size: UInt32(inner.count + 8), payload: inner) }
        let file = Data(Self.box("ftyp", size: 16, payload: Array("isom\0\0\0\0".utf8)) + inner)
        #expect(throws: MP4CheckError.self) { try walker(file).check() }
    }
}
