/// Why `HLSPlan` cannot choose what the options ask for. Each case names what exists instead.
public enum HLSPlanError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A master playlist without an `EXT-X-STREAM-INF`.
    case noVariants
    /// No variant matches `--variant`; `available` lists each as `<height>p <bandwidth>`.
    /// `dash`: said of an MPD's video Representations.
    case noSuchVariant(wanted: String, available: [String], dash: Bool = false)
    /// No rendition of the AUDIO group `group` has the language asked for.
    /// `dash`: said of an MPD's audio AdaptationSets, `group` naming the Period.
    case noSuchAudio(language: String, group: String, available: [String], dash: Bool = false)

    public var description: String {
        switch self {
        case .noVariants:
            return "the master playlist lists no variant (EXT-X-STREAM-INF)"
        case .noSuchVariant(let wanted, let available, true):
            return "no video Representation matches --variant \(wanted); the MPD has " + available.joined(separator: ", ")
        case .noSuchVariant(let wanted, let available, false):
            return "no variant matches \(wanted); the playlist has " + available.joined(separator: ", ")
        case .noSuchAudio(let language, let group, let available, true):
            return "no audio AdaptationSet in language \(language) in \(group) of the MPD; it has " + (available.isEmpty ? "none named" : available.joined(separator: ", "))
        case .noSuchAudio(let language, let group, let available, false):
            return "no audio in language \(language) in group \(group); it has " + (available.isEmpty ? "none named" : available.joined(separator: ", "))
        }
    }
}
