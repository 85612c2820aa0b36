/// How a stream member's bytes are checked before they are stored, so an error page answered
/// with 200 in its place is never kept as it (Docs/hls.md). Decided from the media playlists
/// naming the member (`HLSMediaPlaylist.memberCheck`), and applied alike by prefetch and by
/// serve (both store through a `PrefetchJob`, which asks `problem` of the first bytes).
public enum HLSMemberCheck: Equatable, Sendable {
    /// A segment or init section in the clear (SAMPLE-AES too: its container is): its first
    /// bytes must be one (`HLSSegmentCheck`).
    case segment
    /// A DASH segment or init section (the same check, named as such in the message).
    case dashSegment
    /// An AES-128 key (RFC 8216 §5.2): exactly 16 bytes.
    case key
    /// A whole segment under AES-128 (§4.3.2.4: CBC with PKCS7 padding): a whole number of
    /// 16-byte blocks. Its ciphertext looks like nothing, so only its length can be judged.
    case encryptedSegment
    /// Named only as byte ranges of a resource under AES-128: each range is padded on its own,
    /// the resource's length says nothing, and its bytes look like nothing.
    case unchecked

    /// Why a response whose whole length is `length` (nil when unknown) and whose first bytes are
    /// `firstBytes` (the first 376 or more, or the whole body when shorter) is not this member;
    /// nil when it may be.
    public func problem<Bytes: Collection<UInt8>>(length: Int64?, firstBytes: Bytes) -> String? {
        switch self {
        case .key:
            guard let length, length != 16 else { return nil }
            return "origin's answer for an AES-128 key is \(length) bytes, not 16: an error page in its place?"
        case .encryptedSegment:
            guard let length, length % 16 != 0 else { return nil }
            return "origin's answer for an AES-128 segment is \(length) bytes, not a whole number of 16-byte blocks: an error page in its place?"
        case .segment, .dashSegment:
            guard !HLSSegmentCheck.looksLikeSegment(firstBytes: firstBytes.prefix(376)) else { return nil }
            if length == 0 { return "origin's answer for \(self == .segment ? "an HLS" : "a DASH") segment is empty (0 bytes): not one" }
            // A DASH text Representation may be a raw TTML file (mimeType application/ttml+xml).
            if self == .dashSegment, XMLRoot.isTTML(firstBytes, whole: length.map { Int64(firstBytes.count) >= $0 } ?? false) { return nil }
            let shown = String(decoding: firstBytes.prefix(16).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
            return "origin's answer for \(self == .segment ? "an HLS" : "a DASH") segment is not one: its first bytes '\(shown)' are not MPEG-TS, fMP4, packed audio\(self == .segment ? "" : ", TTML") or WebVTT"
        case .unchecked:
            return nil
        }
    }
}

extension HLSMediaPlaylist {
    /// The check of the member this playlist names where `named` holds; nil when it names none.
    /// A key is a key wherever else it is named; a resource named as a segment under AES-128 is
    /// ciphertext (judged by its length when any naming asks for it whole); anything else named
    /// (a segment in the clear, an init section) is checked as a segment.
    public func memberCheck(where named: (String) -> Bool) -> HLSMemberCheck? {
        Self.memberCheck(in: segments, where: named)
    }

    /// `memberCheck` over `segments` alone (prefetch: those its plan chose).
    public static func memberCheck(in segments: [Segment], where named: (String) -> Bool) -> HLSMemberCheck? {
        var found = false, key = false, encrypted = false, whole = false
        for s in segments {
            if let m = s.fetchedMap, named(m.uri) {
                found = true
                if m.byteRange == nil { whole = true }
            }
            for k in s.keys where k.isFetchable {
                if let u = k.uri, named(u) { key = true }
            }
            if named(s.uri) {
                found = true
                if s.byteRange == nil { whole = true }
                if s.keys.contains(where: { $0.method == .aes128 }) { encrypted = true }
            }
        }
        if key { return .key }
        if encrypted { return whole ? .encryptedSegment : .unchecked }
        return found ? .segment : nil
    }
}

extension HLSMemberCheck {
    /// Why the stored bytes of a member whose every byte is held (`length` of them) are not a
    /// whole one: a segment or init section that starts as fMP4 is a run of top-level boxes that
    /// tile its length exactly (ISO/IEC 14496-12 §4.2), whatever ended its body (a Content-Length
    /// shorter than the segment, a valid box and then bytes of nothing). MPEG-TS, packed audio,
    /// WebVTT and TTML are not walked. Nil: whole, or nothing to walk.
    public func wholeProblem(length: Int64, read: @escaping MP4Walker.Read) -> String? {
        guard self == .segment || self == .dashSegment, length >= 8,
              let head = try? read(0, Int(min(length, 512))),
              HLSSegmentCheck.kind(firstBytes: head) == .fragmentedMP4 else { return nil }
        let what = self == .segment ? "an HLS" : "a DASH"
        do {
            _ = try MP4Walker(length: length, read: read).topLevel()
            return nil
        } catch MP4Error.overruns(let type, let at, let end, _) {
            return "origin's answer for \(what) segment is not a whole one: box '\(type)' at offset \(at) ends at \(end), past its \(length) bytes (a Content-Length shorter than the segment?)"
        } catch MP4Error.tooManyBoxes {
            return nil  // a long single-file fMP4: more fragments than the walk counts, not a cut one
        } catch {
            return "origin's answer for \(what) segment is not a whole one: its top-level boxes do not fill its \(length) bytes (\(error))"
        }
    }

    /// Why the bytes `first`-`last` (inclusive) of a resource, an MPD's byte range of it (a
    /// SegmentURL@mediaRange, a subsegment its sidx gives, an Initialization range), are not a segment: they must be
    /// top-level boxes a segment is made of, tiling the range exactly. Nil: they are.
    public static func rangeProblem(first: Int64, last: Int64, read: @escaping MP4Walker.Read) -> String? {
        let end = last + 1
        guard end - first >= 8, let head = try? read(first, 8) else {
            return "its MPD's byte range \(first)-\(last) is too short to be a segment"
        }
        let type = String(decoding: head[4..<8].map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        guard rangeBoxTypes.contains(type) else {
            let shown = String(decoding: head.map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
            return "its MPD's byte range \(first)-\(last) does not start with a segment's box: its first bytes '\(shown)' are not a box header (styp, sidx, moof, emsg, prft, mdat...); fix the MPD's mediaRange"
        }
        do {
            _ = try MP4Walker(length: end, read: read).boxes(from: first, to: end)
            return nil
        } catch {
            return "its MPD's byte range \(first)-\(last) is not whole boxes (\(error)); fix the MPD's mediaRange"
        }
    }

    /// Top-level boxes a media segment's byte range may start with (ISO/IEC 23009-1 §6.3.4), and
    /// an Initialization range (`ftyp`, `moov`).
    static let rangeBoxTypes: Set<String> = ["styp", "sidx", "ssix", "moof", "emsg", "prft", "mdat", "free", "skip", "uuid", "ftyp", "moov"]
}
