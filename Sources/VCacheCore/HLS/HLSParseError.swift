/// Why a playlist could not be read, and where: a 1-based line number (0 for the file as a whole)
/// and the tag it was on. Comparable in tests; its description is the line a user reads.
public struct HLSParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Problem: Equatable, Sendable {
        /// The first line is not `#EXTM3U` (RFC 8216 §4.3.1.1).
        case notAPlaylist
        /// Not UTF-8 (§4.1).
        case notUTF8
        /// A NUL or another control character than CR, LF or tab (§4.1).
        case controlCharacter
        /// An attribute list that does not follow §4.2 (`why` says how).
        case badAttributeList(String)
        /// A REQUIRED attribute is missing.
        case missingAttribute(String)
        /// An attribute whose value is not of its type (`expected` names the type).
        case badAttribute(name: String, value: String, expected: String)
        /// A tag's value that is not what the tag takes (a duration, a byte range, a number).
        case badValue(String)
        /// A URI line with no `EXTINF` (media) or `EXT-X-STREAM-INF` (master) before it.
        case uriWithoutTag
        /// An `EXTINF` or `EXT-X-STREAM-INF` with no URI line after it (a truncated file).
        case tagWithoutURI
        /// Master and media playlist tags in one file (§4.3.4: a client MUST fail).
        case mixedPlaylist
        /// `EXT-X-BYTERANGE` without `@o` and no earlier sub-range of the same resource (§4.3.2.2).
        case implicitOffsetWithoutPrevious
    }

    public var line: Int
    public var tag: String?
    public var problem: Problem

    public init(line: Int, tag: String? = nil, _ problem: Problem) {
        self.line = line
        self.tag = tag
        self.problem = problem
    }

    public var description: String {
        let place = line == 0 ? "playlist" : "line \(line)" + (tag.map { " (\($0))" } ?? "")
        let why: String
        switch problem {
        case .notAPlaylist: why = "not an HLS playlist: the first line is not #EXTM3U"
        case .notUTF8: why = "not UTF-8 text"
        case .controlCharacter: why = "contains a NUL or control character"
        case .badAttributeList(let w): why = "malformed attribute list: \(w)"
        case .missingAttribute(let n): why = "missing attribute \(n)"
        case .badAttribute(let n, let v, let t): why = "attribute \(n)=\(v) is not a \(t)"
        case .badValue(let w): why = w
        case .uriWithoutTag: why = "URI line without EXTINF or EXT-X-STREAM-INF before it"
        case .tagWithoutURI: why = "no URI line follows this tag"
        case .mixedPlaylist: why = "master and media playlist tags in one playlist"
        case .implicitOffsetWithoutPrevious: why = "byte range without @offset and no earlier sub-range of the same resource"
        }
        return "\(place): \(why)"
    }
}
