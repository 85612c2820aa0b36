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
