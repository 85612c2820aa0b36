/// A usage error: one line naming what was not understood; exit code 2.
struct UsageError: Error, Equatable, CustomStringConvertible {
    var message: String
    var description: String { message }
    init(_ message: String) { self.message = message }
}

/// Parses a command line against a command's declarations (`CommandSpec`).
enum ArgumentParser {
    /// GNU-style: `--name value`, `--name=value`, `-j 8`, `-j8`, `-qj8`... `--` ends options.
    /// Each value is parsed by its option's type here, so a command never sees text it must check.
    static func parse(_ args: [String], spec: CommandSpec) throws -> ParsedValues {
        var parsed = ParsedValues()
        var i = 0
        var optionsEnded = false
        // A bad value is said after the whole line is read: `--help` anywhere still shows the help.
        var badValue: (any Error)?
        func store(_ o: OptionSpec, _ value: String?) throws {
            guard let parse = o.parse else { parsed.flags.insert(o.long); return }
            guard let value else { throw UsageError("option '--\(o.long)' of '\(spec.name)' needs a value") }
            do {
                let typed = try parse(value)
                if o.arity == .repeated { parsed.byName[o.long, default: []].append(typed) } else { parsed.byName[o.long] = [typed] }
            } catch {
                badValue = badValue ?? error
            }
        }
        while i < args.count {
            let a = args[i]
            i += 1
            if optionsEnded || a == "-" || !a.hasPrefix("-") {
                parsed.positionals.append(a)
                continue
            }
            if a == "--" { optionsEnded = true; continue }
            if a.hasPrefix("--") {
                var name = String(a.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                guard let o = spec.allOptions.first(where: { $0.long == name }) else {
                    throw unknown("--\(name)", spec: spec)
                }
                if o.takesValue {
                    if inline == nil {
                        guard i < args.count else { throw UsageError("option '--\(name)' of '\(spec.name)' needs a value") }
                        inline = args[i]
                        i += 1
                    }
                    try store(o, inline)
                } else {
                    guard inline == nil else { throw UsageError("option '--\(name)' of '\(spec.name)' takes no value") }
                    try store(o, nil)
                }
                continue
            }
            // A cluster of short options; one taking a value ends the cluster.
            var chars = Array(a.dropFirst())
            while !chars.isEmpty {
                let c = chars.removeFirst()
                guard let o = spec.allOptions.first(where: { $0.short == c }) else {
                    throw unknown("-\(c)", spec: spec)
                }
                if o.takesValue {
                    var v = String(chars)
                    chars = []
                    if v.isEmpty {
                        guard i < args.count else { throw UsageError("option '-\(c)' of '\(spec.name)' needs a value") }
                        v = args[i]
                        i += 1
                    }
                    try store(o, v)
                } else {
                    try store(o, nil)
                }
            }
        }
        if parsed.flags.contains(CommonOptions().help.spec.long) { return parsed }
        if let badValue { throw badValue }
        if parsed.positionals.count < spec.minPositionals {
            throw UsageError("'\(spec.name)' needs more arguments; usage: vcache \(spec.usage)")
        }
        if let max = spec.maxPositionals, parsed.positionals.count > max {
            throw UsageError("unexpected argument '\(parsed.positionals[max])' for '\(spec.name)'; usage: vcache \(spec.usage)")
        }
        return parsed
    }

    static func unknown(_ option: String, spec: CommandSpec) -> UsageError {
        let candidates = spec.allOptions.map { "--" + $0.long }
        if let best = suggestion(for: option.hasPrefix("--") ? option : "-" + option, among: candidates) {
            return UsageError("unknown option '\(option)' for '\(spec.name)'; did you mean '\(best)'?")
        }
        return UsageError("unknown option '\(option)' for '\(spec.name)'; see 'vcache \(spec.name) --help'")
    }

    /// The closest candidate by edit distance, when it is close enough to be a typo.
    static func suggestion(for word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(word, $0)) }.min { $0.1 < $1.1 }
        guard let (best, distance) = scored else { return nil }
        return distance <= max(2, best.count / 3) ? best : nil
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
