#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The line loop behind `HLSPlaylist.parse`: one pass that collects master and media tags both,
/// then decides the kind (a playlist with both is an error, RFC 8216 §4.3.4).
///
/// Media state: an `EXTINF` (and an `EXT-X-BYTERANGE`) waits for its URI line; keys and the
/// init section stay in force until the next `EXT-X-KEY` / `EXT-X-MAP` (§4.3.2.4-5); several
/// `EXT-X-KEY`s in a row (one per KEYFORMAT) apply together; `METHOD=NONE` ends encryption.
struct HLSPlaylistParser {
    let url: String
    var version: Int?
    var otherTags: [HLSPlaylist.Tag] = []
    var masterLine: Int?
    var mediaLine: Int?
    // Master
    var variants: [HLSMasterPlaylist.Variant] = []
    var renditions: [HLSMasterPlaylist.Rendition] = []
    var iFrameStreams: [HLSMasterPlaylist.IFrameStream] = []
    var sessionKeys: [HLSKey] = []
    /// An EXT-X-STREAM-INF waiting for its URI line.
    var pendingVariant: HLSMasterPlaylist.Variant?
    // Media
    var targetDuration: Double?
    var mediaSequence = 0
    var mediaSequenceLine = 0
    var discontinuitySequence = 0
    var playlistType: HLSMediaPlaylist.PlaylistType?
    var hasEndList = false
    var iFramesOnly = false
    var segments: [HLSMediaPlaylist.Segment] = []
    var pendingInf: (line: Int, duration: Double, title: String)?
    var pendingRange: (line: Int, length: Int64, offset: Int64?)?
    var pendingDiscontinuity = false
    var discontinuities = 0
    var keys: [HLSKey] = []
    /// A segment came after the last EXT-X-KEY: the next one starts a new set.
    var keysClosed = true
    var map: HLSMediaPlaylist.Map?
    /// Where the last sub-range of each resource ended (for `EXT-X-BYTERANGE` without `@o`).
    var rangeEnds: [String: Int64] = [:]

    static let masterTags: Set<Substring> = ["EXT-X-STREAM-INF", "EXT-X-MEDIA", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-SESSION-DATA", "EXT-X-SESSION-KEY"]
    static let mediaTags: Set<Substring> = ["EXTINF", "EXT-X-TARGETDURATION", "EXT-X-MEDIA-SEQUENCE", "EXT-X-DISCONTINUITY-SEQUENCE",
                                            "EXT-X-BYTERANGE", "EXT-X-KEY", "EXT-X-MAP", "EXT-X-DISCONTINUITY", "EXT-X-ENDLIST",
                                            "EXT-X-PLAYLIST-TYPE", "EXT-X-I-FRAMES-ONLY", "EXT-X-PROGRAM-DATE-TIME", "EXT-X-PART",
                                            "EXT-X-PART-INF", "EXT-X-SERVER-CONTROL", "EXT-X-SKIP", "EXT-X-PRELOAD-HINT", "EXT-X-GAP"]

    init(url: String) {
        self.url = url
    }

    mutating func run(_ lines: ArraySlice<HLSPlaylist.Line>) throws(HLSParseError) -> HLSPlaylist {
        for line in lines {
            if line.isURI {
                try uriLine(line.text.trimmingBlanks, line: line.number)
            } else if let (name, value) = line.tag {
                if Self.masterTags.contains(name) { masterLine = masterLine ?? line.number }
                if Self.mediaTags.contains(name) { mediaLine = mediaLine ?? line.number }
                if masterLine != nil && mediaLine != nil { throw HLSParseError(line: line.number, tag: String(name), .mixedPlaylist) }
                try tag(name, value, line: line.number)
            }
        }
        if let v = pendingVariant { throw HLSParseError(line: v.line, tag: "EXT-X-STREAM-INF", .tagWithoutURI) }
        if let i = pendingInf { throw HLSParseError(line: i.line, tag: "EXTINF", .tagWithoutURI) }
        if let r = pendingRange { throw HLSParseError(line: r.line, tag: "EXT-X-BYTERANGE", .tagWithoutURI) }
        if masterLine != nil {
            return .master(HLSMasterPlaylist(url: url, version: version, variants: variants, renditions: renditions,
                                             iFrameStreams: iFrameStreams, sessionKeys: sessionKeys, otherTags: otherTags))
        }
        guard mediaSequence <= Int.max - segments.count else {
            throw HLSParseError(line: mediaSequenceLine, tag: "EXT-X-MEDIA-SEQUENCE", .badValue("media sequence numbers pass 2^63"))
        }
        for i in segments.indices { segments[i].sequence = mediaSequence + i }
        return .media(HLSMediaPlaylist(url: url, version: version, targetDuration: targetDuration, mediaSequence: mediaSequence,
                                       discontinuitySequence: discontinuitySequence, playlistType: playlistType, hasEndList: hasEndList,
                                       iFramesOnly: iFramesOnly, segments: segments, otherTags: otherTags))
    }

    mutating func uriLine(_ raw: String, line: Int) throws(HLSParseError) {
        let uri = HLSURI.resolve(raw, against: url)
        if var v = pendingVariant {
            v.uri = uri
            v.rawURI = raw
            variants.append(v)
            pendingVariant = nil
            return
        }
        guard let inf = pendingInf else { throw HLSParseError(line: line, .uriWithoutTag) }
        var range: ByteRange?
        if let r = pendingRange {
            guard let offset = r.offset ?? rangeEnds[uri] else {
                throw HLSParseError(line: r.line, tag: "EXT-X-BYTERANGE", .implicitOffsetWithoutPrevious)
            }
            guard offset <= Int64.max - r.length else {
                throw HLSParseError(line: r.line, tag: "EXT-X-BYTERANGE", .badValue("byte range ends past 2^63"))
            }
            range = ByteRange(offset, offset + r.length)
            rangeEnds[uri] = offset + r.length
        } else {
            rangeEnds[uri] = nil
        }
        guard discontinuitySequence <= Int.max - discontinuities - (pendingDiscontinuity ? 1 : 0) else {
            throw HLSParseError(line: line, .badValue("discontinuity sequence numbers pass 2^63"))
        }
        if pendingDiscontinuity { discontinuities += 1 }
        segments.append(HLSMediaPlaylist.Segment(uri: uri, rawURI: raw, line: line, sequence: 0, duration: inf.duration, title: inf.title,
                                                 byteRange: range, keys: keys, map: map, discontinuity: pendingDiscontinuity,
                                                 discontinuitySequence: discontinuitySequence + discontinuities))
        pendingInf = nil
        pendingRange = nil
        pendingDiscontinuity = false
        keysClosed = true
    }

    mutating func tag(_ name: Substring, _ value: Substring?, line: Int) throws(HLSParseError) {
        let tag = String(name)
        func need() throws(HLSParseError) -> Substring {
            guard let value, !value.isEmpty else { throw HLSParseError(line: line, tag: tag, .badValue("\(tag) needs a value")) }
            return value
        }
        func attributes() throws(HLSParseError) -> HLSAttributeList {
            try HLSAttributeList(parsing: try need(), line: line, tag: tag)
        }
        func integer() throws(HLSParseError) -> Int {
            let v = try need()
            guard let n = HLSAttributeList.decimalInteger(v) else { throw HLSParseError(line: line, tag: tag, .badValue("'\(v)' is not a decimal-integer below 2^63")) }
            return n
        }
        switch name {
        case "EXT-X-VERSION": version = try integer()
        case "EXT-X-STREAM-INF":
            if let v = pendingVariant { throw HLSParseError(line: v.line, tag: tag, .tagWithoutURI) }
            pendingVariant = try Self.variant(try attributes())
        case "EXT-X-MEDIA": renditions.append(try Self.rendition(try attributes(), base: url))
        case "EXT-X-I-FRAME-STREAM-INF": iFrameStreams.append(try Self.iFrameStream(try attributes(), base: url))
        case "EXT-X-SESSION-KEY": sessionKeys.append(try HLSKey(try attributes(), base: url))
        case "EXTINF":
            if let i = pendingInf { throw HLSParseError(line: i.line, tag: tag, .tagWithoutURI) }
            let v = try need()
            let comma = v.firstIndex(of: ",")
            let number = v[..<(comma ?? v.endIndex)].trimming(.whitespaces)
            guard let d = HLSAttributeList.decimalFloat(number) else {
                throw HLSParseError(line: line, tag: tag, .badValue("duration '\(number)' is not a non-negative decimal"))
            }
            pendingInf = (line, d, comma.map { String(v[v.index(after: $0)...]) } ?? "")
        case "EXT-X-BYTERANGE":
            let v = try need()
            guard let (length, offset) = Self.byteRange(v) else {
                throw HLSParseError(line: line, tag: tag, .badValue("'\(v)' is not <length>[@<offset>] below 2^63"))
            }
            pendingRange = (line, length, offset)
        case "EXT-X-TARGETDURATION":
            let v = try need()
            guard let d = HLSAttributeList.decimalFloat(v) else { throw HLSParseError(line: line, tag: tag, .badValue("'\(v)' is not a duration")) }
            targetDuration = d
        case "EXT-X-MEDIA-SEQUENCE":
            mediaSequence = try integer()
            mediaSequenceLine = line
        case "EXT-X-DISCONTINUITY-SEQUENCE": discontinuitySequence = try integer()
        case "EXT-X-DISCONTINUITY": pendingDiscontinuity = true
        case "EXT-X-ENDLIST": hasEndList = true
        case "EXT-X-I-FRAMES-ONLY": iFramesOnly = true
        case "EXT-X-PLAYLIST-TYPE":
            switch try need().uppercased() {
            case "VOD": playlistType = .vod
            case "EVENT": playlistType = .event
            case let other: playlistType = .other(other)
            }
        case "EXT-X-KEY":
            let key = try HLSKey(try attributes(), base: url)
            if keysClosed {
                keys = []
                keysClosed = false
            }
            keys.removeAll { $0.keyFormat == key.keyFormat || key.method == .none }
            if key.method != .none { keys.append(key) }
        case "EXT-X-MAP":
            let a = try attributes()
            let uri = HLSURI.resolve(try a.required(a.string("URI"), "URI"), against: url)
            var range: ByteRange?
            if let attr = a["BYTERANGE"] {
                // §4.3.2.5 points at §4.3.2.2's format; without @o the section starts at 0.
                guard let (length, offset) = Self.byteRange(Substring(attr.value)), (offset ?? 0) <= Int64.max - length else {
                    throw HLSParseError(line: line, tag: tag, .badAttribute(name: "BYTERANGE", value: attr.value, expected: "<length>[@<offset>]"))
                }
                range = ByteRange(offset ?? 0, (offset ?? 0) + length)
            }
            map = HLSMediaPlaylist.Map(uri: uri, byteRange: range)
        default:
            otherTags.append(HLSPlaylist.Tag(line: line, name: tag, value: value.map(String.init)))
        }
    }

    /// `<n>[@<o>]` (§4.3.2.2), each a decimal-integer below 2^63.
    static func byteRange(_ s: Substring) -> (length: Int64, offset: Int64?)? {
        let parts = s.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        guard let n = HLSAttributeList.decimalInteger(parts[0]) else { return nil }
        guard parts.count == 2 else { return (Int64(n), nil) }
        guard let o = HLSAttributeList.decimalInteger(parts[1]) else { return nil }
        return (Int64(n), Int64(o))
    }
}
