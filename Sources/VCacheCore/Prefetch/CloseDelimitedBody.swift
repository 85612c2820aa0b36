/// Whether a body whose end only the connection's close marked (HTTP/1, no Content-Length, not
/// chunked: `ResponseHead.BodyEnd.connectionClose`) proves itself whole. The close looks the same
/// whether the origin sent everything or was cut off, so the bytes must say it themselves, or the
/// entry is never called complete (Docs/cache-format.md, "Complete").
///
/// The rules (ISO/IEC 14496-12 §4.2, §8.8; RFC 8216 §4.1):
/// - An HLS playlist (`#EXTM3U`) is whole when its last line is: it ends with a line break. (A
///   media playlist cut at a line end before its EXT-X-ENDLIST reads as a live one, which is
///   fetched again on the next run.)
/// - A DASH MPD (`MPD.looksLikeMPD`, at most `MPD.maxBytes`) is whole when it is well-formed XML
///   (`XMLTree.parse`): its root's end tag is its end; cut anywhere before, it is not.
/// - Other bytes that do not start with an ISO BMFF box (a known top-level type and a sane size)
///   cannot be checked: `unproven`.
/// - Every top-level box must end inside the bytes that came (they tile them exactly): a box that
///   ends past them was cut.
/// - An HLS member (a segment or an init section) is a run of boxes, nothing more: tiled is whole.
///   A cut exactly between two boxes cannot be told from the end.
/// - A whole MP4 has a `moov`, and every chunk offset of it lies inside the bytes (the walk
///   `verify` does, `MP4Walker.check`): anything else was cut.
/// - A fragmented MP4 (its `moov` holds an `mvex`) can end after any fragment: only an `mfra`
///   as its last box (its index, written last) proves the end; without one it is `unproven`.
public enum CloseDelimitedBody {
    public enum Verdict: Equatable, Sendable {
        case whole
        /// The bytes end inside a box, or lack what a whole MP4 has: the body was cut.
        case cut(String)
        /// Nothing in the bytes can tell their end from a cut.
        case unproven(String)
    }

    /// `length`: the bytes that came; `member`: an HLS segment or init section, not a whole movie.
    public static func judge(length: Int64, member: Bool, read: @escaping MP4Walker.Read) -> Verdict {
        guard length >= 8, let head = try? read(0, 8) else {
            return .unproven("its \(length) bytes are too few to be checked")
        }
        if head.starts(with: "#EXTM3U".utf8) {
            guard let last = try? read(length - 1, 1), last == [0x0A] else {
                return .cut("an HLS playlist whose last line has no line break")
            }
            return .whole
        }
        if let start = try? read(0, Int(min(length, 4096))), MPD.looksLikeMPD(firstBytes: start, contentType: nil) {
            guard length <= Int64(MPD.maxBytes), let all = try? read(0, Int(length)) else {
                return .unproven("an MPD larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one")
            }
            do {
                _ = try XMLTree.parse(all)
                return .whole
            } catch {
                return .cut("an MPD that does not read as one whole XML document: \(error)")
            }
        }
        let size = UInt32(head[0]) << 24 | UInt32(head[1]) << 16 | UInt32(head[2]) << 8 | UInt32(head[3])
        let type = String(decoding: head[4..<8], as: UTF8.self)
        guard PrefetchJob.firstBoxTypes.contains(type), size == 0 || size == 1 || size >= 8 else {
            return .unproven("they are not an MP4, whose boxes would say where it ends")
        }
        let walker = MP4Walker(length: length, read: read)
        let top: [MP4Box]
        do {
            top = try walker.topLevel()
        } catch MP4Error.overruns(let type, let at, let end, _) {
            return .cut("box '\(type)' at offset \(at) ends at \(end), past the \(length) bytes that came")
        } catch MP4Error.truncatedHeader(let at) {
            return .cut("a box header at offset \(at) is cut off at byte \(length)")
        } catch {
            return .cut("\(error)")
        }
        if member { return .whole }
        guard let moov = top.first(where: { $0.type == "moov" }) else {
            return .cut("they hold no 'moov' box (a whole MP4 has one)")
        }
        do {
            _ = try walker.check()
            if try walker.children(of: moov).contains(where: { $0.type == "mvex" }), top.last?.type != "mfra" {
                return .unproven("a fragmented MP4 with no 'mfra' at its end can stop after any fragment")
            }
        } catch {
            return .cut("\(error)")
        }
        return .whole
    }
}
