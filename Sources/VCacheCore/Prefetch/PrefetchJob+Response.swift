import Foundation

/// `ResponseJudge`'s verdict on a response head as this job takes it (a version promised to
/// serve's readers narrows it), its `--verbose` trace, and the check of an MP4's first bytes.
extension PrefetchJob {
    func verdict(on head: ResponseHead, asked: ResponseJudge.Asked) -> ResponseJudge.Verdict {
        var verdict = judge(for: asked).judge(head)
        if case .accept(let offset, let limit, let v) = verdict, let promised = options.expectedVersion, !promised.admits(v) {
            // Readers of this file were promised another version: never into their file.
            verdict = .replace(offset: offset, limit: limit, validators: v, reason: "the origin's version is not the one being served")
        }
        if options.verbose {
            let fields = ["Content-Range", "Content-Length", "ETag", "Last-Modified", "Transfer-Encoding"].compactMap { n in head.header(n).map { "\(n): \($0)" } }
            trace("< \(head.status) \(head.reason)" + (fields.isEmpty ? "" : " " + fields.joined(separator: " ")))
            switch verdict {
            case .accept(let offset, let limit, _): trace("accepted: bytes go at offset \(offset)" + (limit.map { " up to \($0)" } ?? ""))
            case .replace(_, _, _, let reason): trace("another version: dropping the cached bytes first (\(reason))")
            case .learnLength(let v, let drop): trace("length learned: \(v.length ?? -1)" + (drop ? ", a different version: dropped" : ""))
            case .reject(let e): trace("refused: \(e.description)")
            }
        }
        return verdict
    }

    /// For a URL naming an MP4 (.mp4, .m4v, .m4a, .mov, .3gp): why `bytes` (the first of the file)
    /// cannot start one: an ISO BMFF file begins with a box, a 32-bit size (0, 1, or at least 8)
    /// and a four-character type. An error page or a redirect notice answered with 200 does not.
    /// Boxes an MP4 or QuickTime file starts with (ISO/IEC 14496-12, QuickTime's `wide`/`pnot`).
    static let firstBoxTypes: Set<String> = ["ftyp", "styp", "moov", "mdat", "free", "skip", "wide", "pnot", "sidx", "moof", "uuid", "pdin", "meta", "prfl"]

    /// For an unencrypted HLS segment: why its first bytes are not one.
    func notASegment(_ bytes: UnsafeRawBufferPointer) -> String? {
        // AES-128 (RFC 8216 §5.2): a key is exactly 16 bytes, an encrypted segment (CBC with
        // PKCS7 padding) a whole number of 16-byte blocks; an error page in its place is neither.
        if let cipher = item.cipher, let length = entry.validators.length {
            switch cipher {
            case .key where length != 16:
                return "origin's answer for an AES-128 key is \(length) bytes, not 16: an error page in its place?"
            case .encryptedSegment where length % 16 != 0:
                return "origin's answer for an AES-128 segment is \(length) bytes, not a whole number of 16-byte blocks: an error page in its place?"
            default: return nil
            }
        }
        guard item.checkSegment, !HLSSegmentCheck.looksLikeSegment(firstBytes: Array(bytes.prefix(376))) else { return nil }
        let shown = String(decoding: bytes.prefix(16).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        return "origin's answer for \(item.streamFormat == "HLS" ? "an" : "a") \(item.streamFormat) segment is not one: its first bytes '\(shown)' are not MPEG-TS, fMP4, packed audio or WebVTT"
    }

    static func notAnMP4Start(url: String, _ bytes: UnsafeRawBufferPointer) -> String? {
        let ext = (URL(string: url)?.path ?? url).fileExtension.lowercased()
        // A URL naming a playlist whose answer is not one (an error page with any Content-Type):
        // the name does not make it a playlist, but it does make a web page in its place wrong.
        if ext == "m3u8" {
            guard !HLSPlaylist.looksLikePlaylist(firstBytes: Array(bytes.prefix(16)), contentType: nil) else { return nil }
            let shown = String(decoding: bytes.prefix(16).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
            return "origin's answer for a .\(ext) is not a playlist: its first bytes '\(shown)' are not #EXTM3U"
        }
        guard ["mp4", "m4v", "m4a", "mov", "3gp"].contains(ext), bytes.count >= 8 else { return nil }
        let size = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        let type = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[4..<8]), as: UTF8.self)
        guard Self.firstBoxTypes.contains(type) && (size == 0 || size == 1 || size >= 8) else {
            let shown = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<8]).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
            return "origin's answer for a .\(ext) is not an MP4: its first bytes '\(shown)' are not an ISO BMFF box header (ftyp, moov, mdat...)"
        }
        return nil
    }
}
