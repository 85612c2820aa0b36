/// What the user typed, checked and typed by a command's declarations: `args.bytes`, `args.range`,
/// `args.quiet`, `args.origin.cacert` (a nested group), `args.positionals`.
@dynamicMemberLookup
struct ParsedArguments<Options: OptionGroup>: Sendable {
    let _values: ParsedValues
    private let _declared = Options()

    init(_ values: ParsedValues = ParsedValues()) { _values = values }

    var positionals: [String] { _values.positionals }

    subscript(dynamicMember key: KeyPath<Options, Flag>) -> Bool {
        _values.flags.contains(_declared[keyPath: key].spec.long)
    }

    // The stored values were made by this same declaration's parser: the cast cannot fail.
    subscript<V>(dynamicMember key: KeyPath<Options, Option<V>>) -> V? {
        _values.byName[_declared[keyPath: key].spec.long]?.last as? V
    }

    subscript<V>(dynamicMember key: KeyPath<Options, Repeated<V>>) -> [V] {
        (_values.byName[_declared[keyPath: key].spec.long] ?? []).compactMap { $0 as? V }
    }

    subscript<G: OptionGroup>(dynamicMember key: KeyPath<Options, G>) -> ParsedArguments<G> { ParsedArguments<G>(_values) }

    /// `--cache-dir`, `--help`.
    var common: ParsedArguments<CommonOptions> { ParsedArguments<CommonOptions>(_values) }

    func isSet(_ flag: GlobalFlag) -> Bool { _values.flags.contains(flag.rawValue) }
    /// `--json`, `-q`, `-v`: every command takes them (`CommonOptions`).
    var json: Bool { isSet(.json) }
    var quiet: Bool { isSet(.quiet) }
    var verbose: Bool { isSet(.verbose) }
}

/// The parser's output, by option name; read only through `ParsedArguments`' typed accessors.
struct ParsedValues: Sendable {
    var flags: Set<String> = []
    var byName: [String: [any Sendable]] = [:]
    var positionals: [String] = []
}
