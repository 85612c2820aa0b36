#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a command is, declared once with its options (an `OptionGroup`): parsing, `--help`, the
/// man page, the shell completions and the usage errors all come from it (swift-argument-parser's
/// idea, in a few hundred lines).
struct CommandConfiguration: Sendable {
    var name: String
    var abstract: String
    var usage: String
    var discussion: String = ""
    /// Positional arguments accepted: at least `minPositionals`, at most `maxPositionals` (nil: any).
    var minPositionals = 0
    var maxPositionals: Int? = 0
    /// The command decides what `-q` leaves out itself; otherwise -q drops all of stderr but errors.
    var handlesQuiet = false
}

/// One option as parsing, help and completion see it, whatever its value's type.
struct OptionSpec: Sendable {
    enum Arity: Sendable { case flag, single, repeated }
    var long: String
    var short: Character?
    var arity: Arity
    /// `SIZE`, `FILE`, `lru|size|url`...; empty for a flag.
    var valueName: String
    var help: String
    var completion: Completion
    /// It may also come before the command (`vcache --cache-dir X ls`).
    var global = false
    /// The value's type parses the text (throwing the usage error); nil for a flag.
    var parse: (@Sendable (String) throws -> any Sendable)?

    var takesValue: Bool { arity != .flag }

    var synopsis: String {
        let names = (short.map { "-\($0), " } ?? "    ") + "--\(long)"
        return takesValue ? names + " " + valueName : names
    }

    /// `--long`, and `-s` when it has one.
    var names: [String] { ["--" + long] + (short.map { ["-\($0)"] } ?? []) }
}

/// What a shell may offer for an option's value.
enum Completion: Sendable, Equatable {
    struct Word: Sendable, Equatable {
        var value: String
        var help: String
    }
    case none, file, folder, anything
    case words([Word])
}

struct CommandSpec: Sendable {
    var configuration: CommandConfiguration
    /// The command's own options, then the common ones.
    var options: [OptionSpec]

    var name: String { configuration.name }
    var abstract: String { configuration.abstract }
    var usage: String { configuration.usage }
    var discussion: String { configuration.discussion }
    var minPositionals: Int { configuration.minPositionals }
    var maxPositionals: Int? { configuration.maxPositionals }
    var allOptions: [OptionSpec] { options + CommonOptions.declarations }


    var helpText: String {
        var lines = ["vcache \(name): \(abstract)", "", "usage: vcache \(usage)"]
        if !discussion.isEmpty { lines += ["", discussion] }
        lines += ["", "options:"]
        let width = allOptions.map(\.synopsis.count).max() ?? 0
        for o in allOptions {
            lines.append("  " + o.synopsis.padded(toLength: width + 2) + o.help)
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Options every command takes, with one meaning everywhere; all but --help may also come
/// before the command (`vcache -q evict ...`).
struct CommonOptions: OptionGroup {
    var cacheDir = Option("cache-dir", .folder, help: "cache directory (default: $VCACHE_DIR, $XDG_CACHE_HOME/vcache, ~/.cache/vcache)", global: true)
    var json = Flag(.json, help: "JSON-lines events on stdout (Docs/json.md); errors as error events")
    var quiet = Flag(.quiet, help: "nothing on stderr but errors (serve keeps its periodic summary line)")
    var verbose = Flag(.verbose, help: "more on stderr where there is more to say (prefetch: each request, response head and decision)")
    var noColor = Flag(.noColor, help: "no color on a terminal (as NO_COLOR=1)")
    var help = Flag("help", short: "h", help: "show this help")
}

/// The flags every command takes that may also come before the command.
enum GlobalFlag: String, CaseIterable, Sendable {
    case json, quiet, verbose
    case noColor = "no-color"

    var short: Character? {
        switch self {
        case .json, .noColor: nil
        case .quiet: "q"
        case .verbose: "v"
        }
    }
}

extension CommandSpec {
    /// The options that may come before the command: the common ones marked global.
    static var globalOptions: [OptionSpec] { CommonOptions.declarations.filter(\.global) }
}

