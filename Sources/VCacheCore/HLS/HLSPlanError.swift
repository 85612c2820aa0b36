/// Why `HLSPlan` cannot choose what the options ask for. Each case names what exists instead.
public enum HLSPlanError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A master playlist without an `EXT-X-STREAM-INF`.
    case noVariants
    /// No variant matches `--variant`; `available` lists each as `<height>p <bandwidth>`.
    case noSuchVariant(wanted: String, available: [String])
    /// No rendition of the AUDIO group `group` has the language asked for.
    case noSuchAudio(language: String, group: String, available: [String])

    public var description: String {
        switch self {
        case .noVariants:
            return "the master playlist lists no variant (EXT-X-STREAM-INF)"
        case .noSuchVariant(let wanted, let available):
            return "no variant matches \(wanted); the playlist has " + available.joined(separator: ", ")
        case .noSuchAudio(let language, let group, let available):
            return "no audio in language \(language) in group \(group); it has " + (available.isEmpty ? "none named" : available.joined(separator: ", "))
        }
    }
}
