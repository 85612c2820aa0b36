/// Why an MPD, or what it says of a Representation, cannot be used. Each names what is wrong;
/// the caller adds the URL.
public enum DASHError: Error, Equatable, Sendable, CustomStringConvertible {
    case xml(XMLTree.Error)
    case notMPD(String)
    /// An attribute whose value is not what the standard allows (or past what vcache computes).
    case badValue(element: String, attribute: String, value: String, why: String)
    case badTemplate(DASHTemplate.Error)
    case badURL(String)
    /// More segments than `DASHLimits.maxSegments` in one Representation.
    case tooManySegments(representation: String, limit: Int)
    /// More segments than `DASHLimits.maxTotalSegments` over all the MPD's Representations.
    case tooManySegmentsInAll(limit: Int)
    case unbounded(representation: String, why: String)
    case overflow(representation: String, what: String)
    case sidx(String)

    public var description: String {
        switch self {
        case .xml(let e): "not an MPD vcache can read: \(e)"
        case .notMPD(let why): "not an MPD: \(why)"
        case .badValue(let element, let attribute, let value, let why): "<\(element)> \(attribute)=\"\(value.prefix(40))\": \(why)"
        case .badTemplate(let e): e.description
        case .badURL(let why): why
        case .tooManySegments(let rep, let limit): "Representation '\(rep)' has more than the limit of \(limit) segments"
        case .tooManySegmentsInAll(let limit): "its Representations name more than the limit of \(limit) segments in all"
        case .unbounded(let rep, let why): "Representation '\(rep)': \(why)"
        case .overflow(let rep, let what): "Representation '\(rep)': \(what) overflows 64 bits"
        case .sidx(let why): "its sidx box (the segment index) cannot be read: \(why)"
        }
    }
}

/// The limits an MPD and its segment lists are held to (Docs/dash.md); past them, an error
/// naming the limit.
public enum DASHLimits {
    /// Segments of one Representation (a SegmentTimeline's repeats, a template's count).
    public static let maxSegments = 100_000
    /// Segments of all the MPD's Representations together: each is a stream member to record,
    /// and `ls`, `info` and serve's offline MPD list them all. Counted when the MPD is read,
    /// before any URL is built, so a small hostile MPD naming millions cannot hold a run.
    public static let maxTotalSegments = 1_000_000
    /// References of one sidx box.
    public static let maxSidxReferences = 100_000
}
