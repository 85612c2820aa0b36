/// A command's declaration: its options are declared once, and parsing, help text and error
/// messages all come from it (swift-argument-parser's idea, in a hundred lines).
struct OptionSpec {
    enum Kind { case flag, value(String), repeated(String) }
    var long: String
    var short: Character?
    var kind: Kind
    var help: String

    static func flag(_ long: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, kind: .flag, help: help)
    }
    static func value(_ long: String, short: Character? = nil, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, kind: .value(valueName), help: help)
    }
    static func repeated(_ long: String, short: Character? = nil, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, kind: .repeated(valueName), help: help)
    }

    var takesValue: Bool {
        if case .flag = kind { return false }
        return true
    }

    /// What kind of value the option takes, read from its value name (one declaration serves
    /// parsing, help, completion and the man page): `FILE`, `DIR`, `URL`, `a|b|c` choices...
    enum Hint: Equatable { case none, file, folder, url, choices([String]), other }
    var hint: Hint {
        switch kind {
        case .flag: return .none
        case .value(let v), .repeated(let v):
            if v.contains("|") { return .choices(v.split(separator: "|").map(String.init)) }
            switch v {
            case "FILE": return .file
            case "DIR": return .folder
            case "URL": return .url
            default: return .other
            }
        }
    }

    var synopsis: String {
        let names = (short.map { "-\($0), " } ?? "    ") + "--\(long)"
        switch kind {
        case .flag: return names
        case .value(let v), .repeated(let v): return names + " " + v
        }
    }
}

struct CommandSpec {
    var name: String
    var abstract: String
    var usage: String
    var discussion: String = ""
    var options: [OptionSpec]
    /// Positional arguments accepted: at least `minPositionals`, at most `maxPositionals` (nil: any).
    var minPositionals = 0
    var maxPositionals: Int? = 0

    /// Options every command takes.
    static let common: [OptionSpec] = [
        .value("cache-dir", "DIR", "cache directory (default: $VCACHE_DIR, $XDG_CACHE_HOME/vcache, ~/.cache/vcache)"),
        .flag("help", short: "h", "show this help"),
    ]

    var allOptions: [OptionSpec] { options + Self.common }

    var helpText: String {
        var lines = ["vcache \(name): \(abstract)", "", "usage: vcache \(usage)"]
        if !discussion.isEmpty { lines += ["", discussion] }
        lines += ["", "options:"]
        let width = allOptions.map(\.synopsis.count).max() ?? 0
        for o in allOptions {
            lines.append("  " + o.synopsis.padding(toLength: width + 2, withPad: " ", startingAt: 0) + o.help)
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

import Foundation
