/// An ISO BMFF box header (ISO/IEC 14496-12 §4.2): where it starts, its type, where its
/// payload starts and where it ends. Sizes come from the file and are never trusted: every
/// header is checked against its parent's bounds before it is used.
public struct MP4Box: Equatable, Sendable {
    public var type: String
    public var offset: Int64
    public var headerSize: Int64
    public var size: Int64

    public var payloadOffset: Int64 { offset + headerSize }
    public var end: Int64 { offset + size }
}

public enum MP4Error: Error, Equatable, CustomStringConvertible, Sendable {
    case truncatedHeader(at: Int64)
    case badSize(type: String, at: Int64, size: Int64)
    case overruns(type: String, at: Int64, end: Int64, limit: Int64)
    case tooDeep
    case tooManyBoxes
    /// A box whose contents cannot be right: a count that cannot fit, a table that points past another.
    case malformed(type: String, at: Int64, reason: String)
    /// Not ISO BMFF at all.
    case notMP4(String)

    public var description: String {
        switch self {
        case .truncatedHeader(let at): "a box header at offset \(at) is cut off"
        case .badSize(let type, let at, let size): "box '\(type)' at offset \(at) has an impossible size \(size)"
        case .overruns(let type, let at, let end, let limit): "box '\(type)' at offset \(at) ends at \(end), past its container's end \(limit)"
        case .tooDeep: "boxes nested too deeply"
        case .tooManyBoxes: "too many boxes"
        case .malformed(let type, let at, let reason): "box '\(type)' at offset \(at): \(reason)"
        case .notMP4(let why): "not an MP4 or MOV file: \(why)"
        }
    }
}
