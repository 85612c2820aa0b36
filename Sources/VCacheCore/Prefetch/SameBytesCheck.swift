#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A file addressed by byte ranges (a SegmentBase file, a SegmentList `mediaRange` file, an HLS
/// `EXT-X-BYTERANGE` file) whose `If-Range`'d request was answered whole (200) under other
/// validators: an origin whose ETag differs per response (per-node ETags behind a load
/// balancer) says so for the same bytes. The body is the whole file, so it is compared with what
/// is cached: every held byte equal, it is the same file under new validators, and its held bytes
/// stay; one byte differing, it is another version (`changedUnderRanges`). Until every held
/// byte has been compared nothing of the body is written: the bytes between held ranges are kept
/// here (`maxGapBytes` at most) and written once the file is proven the same, so no byte of
/// another version is ever claimed beside the old ones.
struct SameBytesCheck {
    /// What is held (compared), as it was when the answer came.
    let held: RangeSet
    /// The end of the last held range: where the comparison is over.
    let end: Int64
    /// The answer's validators and reason given for the change, kept for either outcome.
    let validators: Validators
    let contentType: String?
    let reason: String
    /// Body bytes between held ranges, before `end`: written once the file is proven the same.
    private(set) var gaps: [(offset: Int64, bytes: [UInt8])] = []

    /// The most of the body held in memory until the comparison is over.
    static let maxGapBytes: Int64 = 16 << 20

    /// A check for an answer `v` to a file holding `held` whose validators were `old`; nil when
    /// the bytes cannot be the same file (another length) or too much of it lies between held
    /// ranges to keep in memory meanwhile: the version changed.
    init?(held: RangeSet, old: Validators, answer v: Validators, contentType: String?, reason: String) {
        guard let last = held.ranges.last, let length = old.length, v.length == length, last.upperBound <= length,
              last.upperBound - held.count <= Self.maxGapBytes else { return nil }
        self.held = held
        end = last.upperBound
        validators = v
        self.contentType = contentType
        self.reason = reason
    }

    /// Takes body `bytes` at `offset` (before `end`): false when a held byte differs from them
    /// (`read` gives the held bytes of a range).
    mutating func take(_ bytes: UnsafeRawBufferPointer, at offset: Int64, read: (ByteRange) throws -> [UInt8]) -> Bool {
        let span = ByteRange(offset, offset + Int64(bytes.count))
        var at = offset
        for r in held.ranges where r.upperBound > span.lowerBound && r.lowerBound < span.upperBound {
            let part = ByteRange(max(r.lowerBound, span.lowerBound), min(r.upperBound, span.upperBound))
            if part.lowerBound > at { keepGap(bytes, from: at, to: part.lowerBound, base: offset) }
            guard let cached = try? read(part), cached.count == Int(part.count) else { return false }
            let body = UnsafeRawBufferPointer(rebasing: bytes[Int(part.lowerBound - offset)..<Int(part.upperBound - offset)])
            guard cached.elementsEqual(body) else { return false }
            at = part.upperBound
        }
        if at < span.upperBound { keepGap(bytes, from: at, to: span.upperBound, base: offset) }
        return true
    }

    private mutating func keepGap(_ bytes: UnsafeRawBufferPointer, from: Int64, to: Int64, base: Int64) {
        gaps.append((from, Array(bytes[Int(from - base)..<Int(to - base)])))
    }
}
