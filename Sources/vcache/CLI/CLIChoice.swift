/// An option whose value is one of a few words: an enum whose cases are the words, each with its
/// help (swift-argument-parser's `ExpressibleByArgument & CaseIterable`).
protocol CLIChoice: CaseIterable, RawRepresentable, Sendable where RawValue == String {
    var help: String { get }
    /// What the usage error calls a value ("invalid order 'age' for --sort").
    static var noun: String { get }
}

extension CLIChoice {
    static var noun: String { "value" }
}
