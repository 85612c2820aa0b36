/// Whether a response's first bytes are a media segment HLS can carry (RFC 8216 §3), so an
/// error page answered with 200 (HTML, JSON, plain text) is never stored as one.
///
/// Pass the first 376 bytes or more (the whole body when shorter). Not for segments under an
/// AES-128 EXT-X-KEY: those bytes are ciphertext and look like nothing; judge them by status and
/// Content-Type instead.
public enum HLSSegmentCheck {
    public enum Kind: Equatable, Sendable {
        /// §3.2: 188-byte packets, each starting with the sync byte 0x47.
        case mpegTS
        /// §3.3: fragmented MP4 / CMAF, starting with a box (ftyp, styp, moof, sidx, emsg, prft).
        case fragmentedMP4
        /// §3.4: packed audio: an ID3 tag, or an ADTS / MPEG audio frame (12-bit sync 0xFFF).
        case packedAudio
        /// §3.5: WebVTT.
        case webVTT
    }

    public static func looksLikeSegment<Bytes: Collection<UInt8>>(firstBytes: Bytes) -> Bool {
        kind(firstBytes: firstBytes) != nil
    }

    public static func kind<Bytes: Collection<UInt8>>(firstBytes: Bytes) -> Kind? {
        let b = Array(firstBytes.prefix(512))
        guard let first = b.first else { return nil }
        if first == 0x47, isTransportStream(b) { return .mpegTS }
        if isBox(b) { return .fragmentedMP4 }
        if b.starts(with: "ID3".utf8), b.count > 3, b[3] != 0xFF { return .packedAudio }
        if b.count >= 2, first == 0xFF, b[1] & 0xF0 == 0xF0 { return .packedAudio }
        if isWebVTT(b) { return .webVTT }
        return nil
    }

    static let boxTypes: Set<String> = ["ftyp", "styp", "moof", "sidx", "emsg", "prft"]

    /// The sync byte at 0 and, when there is a second packet, at 188; the first packet not
    /// scrambled (HLS encrypts whole segments or samples, never TS packets): text such as
    /// "Gateway Timeout" starts with 0x47 too.
    static func isTransportStream(_ b: [UInt8]) -> Bool {
        guard b.count >= 4, b[3] & 0xC0 == 0, b[1] & 0x80 == 0 else { return false }
        return b.count <= 188 || b[188] == 0x47
    }

    /// A box header: a size of 0 (to the end), 1 (64-bit size follows) or at least 8, and a
    /// type a segment starts with.
    static func isBox(_ b: [UInt8]) -> Bool {
        guard b.count >= 8 else { return false }
        let size = b[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard size == 0 || size == 1 || size >= 8 else { return false }
        return boxTypes.contains(String(decoding: b[4..<8], as: UTF8.self))
    }

    /// `WEBVTT` (after a BOM), then the end, a space, a tab or a line end.
    static func isWebVTT(_ b: [UInt8]) -> Bool {
        let body = b.starts(with: [0xEF, 0xBB, 0xBF]) ? b.dropFirst(3) : b[...]
        guard body.starts(with: "WEBVTT".utf8) else { return false }
        guard let next = body.dropFirst(6).first else { return true }
        return next == 0x20 || next == 0x09 || next == 0x0A || next == 0x0D
    }
}
