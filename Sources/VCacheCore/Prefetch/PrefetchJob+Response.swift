#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `ResponseJudge`'s verdict on a response head (a version promised to serve's readers, and the
/// origin's digests held, narrow it there), its `--verbose` trace, and the check of an MP4's first bytes.
extension PrefetchJob {
    func verdict(on head: ResponseHead, asked: ResponseJudge.Asked) -> ResponseJudge.Verdict {
        let verdict = judge(for: asked).judge(head)
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

    /// For an HLS stream member: why its first bytes, or its length, are not one (`HLSMemberCheck`).
    func notASegment(_ bytes: UnsafeRawBufferPointer) -> String? {
        item.checkSegment?.problem(length: entry.validators.length, firstBytes: bytes)
    }

    /// For a URL naming an MPD (`.mpd`), or a live manifest fetched again (`LiveRefetch`): why
    /// `bytes`, its body (or the first of it), are not the manifest it must be: an MPD (an `<MPD>`
    /// root element in the DASH namespace) or an HLS playlist (#EXTM3U), whatever the answer's
    /// Content-Type. An error page answered with 200 is not. Nil: it is.
    static func notTheManifest(url: String, mpd: Bool, _ bytes: [UInt8]) -> String? {
        let ext = (URL(string: url)?.path ?? url).fileExtension.lowercased()
        let shown = String(decoding: bytes.prefix(16).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        if bytes.isEmpty {
            return "origin's answer for \(mpd ? (ext == "mpd" ? "a .mpd" : "an MPD") : (ext == "m3u8" ? "a .m3u8" : "a playlist")) is empty: not \(mpd ? "an MPD" : "a playlist")"
        }
        if mpd {
            guard !MPD.looksLikeMPD(firstBytes: bytes, contentType: nil) else { return nil }
            // A DTD before the root hides it from the look at the first element: said for what it is.
            if XMLTree.declaresDTD(bytes) {
                return "origin's answer for \(ext == "mpd" ? "a .mpd" : "an MPD") declares a DTD or entities (<!DOCTYPE or <!ENTITY): vcache refuses those in an MPD, never expanded or fetched"
            }
            return "origin's answer for \(ext == "mpd" ? "a .mpd" : "an MPD") is not an MPD: its first bytes '\(shown)' are not an <MPD> root element"
        }
        guard !HLSPlaylist.looksLikePlaylist(firstBytes: Array(bytes.prefix(16)), contentType: nil) else { return nil }
        return "origin's answer for \(ext == "m3u8" ? "a .m3u8" : "a playlist") is not a playlist: its first bytes '\(shown)' are not #EXTM3U"
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
