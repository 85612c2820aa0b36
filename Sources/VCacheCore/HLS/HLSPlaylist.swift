#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An HLS playlist (RFC 8216), master or media, read from its text. Recognised by its content
/// (or its Content-Type), never by its URL: `.../getM3u8?id=1` is a playlist too.
///
/// Text rules (§4.1): UTF-8, lines end with LF or CRLF, no control characters but tab; a BOM is
/// tolerated (the RFC forbids it; some servers write it). The first line is `#EXTM3U`. Lines
/// starting `#EXT` are tags, other `#` lines comments, blank lines ignored, any other line a URI.
public enum HLSPlaylist: Equatable, Sendable {
    case master(HLSMasterPlaylist)
    case media(HLSMediaPlaylist)

    /// A tag kept as written: `#NAME` or `#NAME:value`.
    public struct Tag: Equatable, Sendable {
        public var line: Int
        public var name: String
        public var value: String?

        public init(line: Int, name: String, value: String?) {
            self.line = line
            self.name = name
            self.value = value
        }
    }

    /// Content types that name a playlist (§4; the others are seen in the wild), lower-case.
    /// The largest body taken as a playlist (a VOD playlist of hours is a few hundred KiB).
    public static let maxBytes = 8 << 20

    public static let contentTypes: Set<String> = ["application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl"]

    /// Whether a response is a playlist: its Content-Type is one of `contentTypes` (any case,
    /// parameters ignored), or its first bytes are `#EXTM3U` (after a BOM) ending the line.
    /// The URL's extension plays no part. Parsing still checks the first line.
    public static func looksLikePlaylist<Bytes: Collection<UInt8>>(firstBytes: Bytes, contentType: String?) -> Bool {
        if isPlaylistType(contentType) { return true }
        var bytes = firstBytes[...]
        if bytes.starts(with: bom) { bytes = bytes.dropFirst(3) }
        guard bytes.starts(with: "#EXTM3U".utf8) else { return false }
        guard let next = bytes.dropFirst(7).first else { return true }
        return next == 0x0A || next == 0x0D || next == 0x20 || next == 0x09
    }

    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Whether a Content-Type is one of `contentTypes` (any case, parameters ignored).
    /// A pure function of the text, remembered for the types asked last (serve asks it of every
    /// answer, of the few types its entries have).
    public static func isPlaylistType(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        return recentTypes.answer(contentType) { contentType in
            guard let type = contentType.split(separator: ";", omittingEmptySubsequences: false).first else { return false }
            return contentTypes.contains(type.trimming(.whitespaces).lowercased())
        }
    }
    private static let recentTypes = RecentAnswers<Bool>()

    /// Parses a playlist fetched from `url`: its final URL after redirects, which every relative
    /// URI is resolved against (§4.1).
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes, url: String) throws(HLSParseError) -> HLSPlaylist {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            var line = 1
            for piece in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
                if String(validating: piece, as: UTF8.self) == nil { break }
                line += 1
            }
            throw HLSParseError(line: line, .notUTF8)
        }
        return try parse(text: text, url: url)
    }

    public static func parse(text: String, url: String) throws(HLSParseError) -> HLSPlaylist {
        let lines = Line.split(text)
        for line in lines {
            if line.text.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                throw HLSParseError(line: line.number, .controlCharacter)
            }
        }
        guard let first = lines.first, first.text.trimmingBlanks == "#EXTM3U" else {
            throw HLSParseError(line: 1, .notAPlaylist)
        }
        var parser = HLSPlaylistParser(url: url)
        return try parser.run(lines.dropFirst())
    }

    public var url: String {
        switch self {
        case .master(let m): return m.url
        case .media(let m): return m.url
        }
    }

    /// A line of text as written: its content (without the terminator; the first line without a
    /// BOM) and its terminator (`\n`, `\r\n` or nothing at the end of the text).
    struct Line {
        var number: Int
        var text: Substring
        var terminator: Substring

        /// Splits at every LF; a CR right before it belongs to the terminator.
        static func split(_ text: String) -> [Line] {
            var rest = Substring(text)
            if rest.hasPrefix("\u{FEFF}") { rest = rest.dropFirst() }
            var lines: [Line] = []
            var number = 1
            while !rest.isEmpty {
                let u = rest.utf8
                let lf = u.firstIndex(of: 0x0A)
                var end = lf ?? u.endIndex
                let next = lf.map { u.index(after: $0) } ?? u.endIndex
                if end > u.startIndex, u[u.index(before: end)] == 0x0D { end = u.index(before: end) }
                lines.append(Line(number: number, text: rest[..<end], terminator: rest[end..<next]))
                rest = rest[next...]
                number += 1
            }
            return lines
        }

        /// `#EXT...`: a tag's name and value (after the first colon).
        var tag: (name: Substring, value: Substring?)? {
            guard text.hasPrefix("#EXT") else { return nil }
            let body = text.dropFirst()
            guard let colon = body.firstIndex(of: ":") else { return (body, nil) }
            return (body[..<colon], body[body.index(after: colon)...])
        }

        /// Neither blank nor a `#` line: a URI.
        var isURI: Bool {
            let t = text.trimmingBlanks
            return !t.isEmpty && !t.hasPrefix("#")
        }
    }
}

extension Substring {
    /// Without leading and trailing blanks (tab, the Unicode space separators and U+200B, as
    /// `CharacterSet.whitespaces`), in pure Swift: Foundation's trimming goes through NSString
    /// on Linux, and an 8 MiB playlist's every line took seconds of it per answer.
    var trimmingBlanks: String {
        func blank(_ u: Unicode.Scalar) -> Bool {
            u == " " || u == "\t" || (u.value >= 0x80 && (u.properties.generalCategory == .spaceSeparator || u.value == 0x200B))
        }
        let s = unicodeScalars
        guard let first = s.first, let last = s.last else { return "" }
        if !blank(first) && !blank(last) { return String(self) }
        guard let from = s.firstIndex(where: { !blank($0) }), let to = s.lastIndex(where: { !blank($0) }) else { return "" }
        return String(Substring(s[from...to]))
    }
}

extension String {
    /// `Substring.trimmingBlanks`.
    var trimmingBlanks: String { self[...].trimmingBlanks }
}
