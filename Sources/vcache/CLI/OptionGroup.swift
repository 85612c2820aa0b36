/// A command's options, each declared once as a stored property with its type (as
/// swift-argument-parser's `ParsableArguments`): `var jobs = Option("jobs", short: "j", .count(1...64), help: ...)`.
/// The declarations are read from a default instance in property order (a nested group's in its
/// place), and the command reads each parsed value through its property: `args.jobs` is an `Int?`,
/// and a misspelt name does not compile.
protocol OptionGroup: Sendable {
    init()
}

extension OptionGroup {
    static var declarations: [OptionSpec] { specs(in: Self()) }

    private static func specs(in value: Any) -> [OptionSpec] {
        Mirror(reflecting: value).children.flatMap { child -> [OptionSpec] in
            if let d = child.value as? any OptionDeclaration { return [d.spec] }
            if let g = child.value as? any OptionGroup { return specs(in: g) }
            return []
        }
    }
}

/// A command with no options of its own.
struct NoOptions: OptionGroup {}

protocol OptionDeclaration: Sendable {
    var spec: OptionSpec { get }
}

/// `--name` (or `-x`): true when given.
struct Flag: OptionDeclaration {
    let spec: OptionSpec

    init(_ long: String, short: Character? = nil, help: String) {
        spec = OptionSpec(long: long, short: short, arity: .flag, valueName: "", help: help, completion: .none)
    }

    /// A flag that may also come before the command: `--json`, `-q`, `-v`.
    init(_ flag: GlobalFlag, help: String) {
        spec = OptionSpec(long: flag.rawValue, short: flag.short, arity: .flag, valueName: "", help: help, completion: .none, global: true)
    }
}

/// `--name VALUE` once (the last one given wins): the value parsed by its type.
struct Option<Value: Sendable>: OptionDeclaration {
    let spec: OptionSpec

    init(_ long: String, short: Character? = nil, _ parser: ValueParser<Value>, help: String, global: Bool = false) {
        spec = parser.spec(long: long, short: short, arity: .single, help: help, global: global)
    }
}

/// `--name VALUE`, repeatable: every value, in order.
struct Repeated<Value: Sendable>: OptionDeclaration {
    let spec: OptionSpec

    init(_ long: String, short: Character? = nil, _ parser: ValueParser<Value>, help: String) {
        spec = parser.spec(long: long, short: short, arity: .repeated, help: help)
    }
}

extension Option where Value: CLIChoice {
    init(_ long: String, short: Character? = nil, help: String) { self.init(long, short: short, .choice(), help: help) }
}
