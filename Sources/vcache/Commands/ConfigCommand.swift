import VCacheCore

/// `vcache config get|set|unset`: defaults stored in the cache's catalog, used by every run.
enum ConfigCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "config",
        abstract: "show or set defaults stored in the cache (max-size, key rules)",
        usage: "config [get [NAME]] | config set NAME VALUE | config unset NAME",
        discussion: "settings:\n" + Settings.known.map { "  \($0.name.padded(toLength: 18))\($0.help)" }.joined(separator: "\n"),
        minPositionals: 0, maxPositionals: 3)

    /// The first word (the completion offers these).
    enum Verb: String, CLIChoice {
        case get, set, unset
        var help: String {
            switch self {
            case .get: "show the settings, or one"
            case .set: "store a setting"
            case .unset: "remove a setting"
            }
        }
    }

    static func run(_ args: ParsedArguments<NoOptions>, console: Console) -> Int32 {
        let p = args.positionals.isEmpty ? ["get"] : args.positionals
        let verb = Verb(rawValue: p[0])
        let names = Settings.known.map(\.name)
        func known(_ name: String) -> Settings.Known? {
            if let k = Settings.known.first(where: { $0.name == name }) { return k }
            let hint = ArgumentParser.suggestion(for: name, among: names).map { "; did you mean '\($0)'?" } ?? "; known: \(names.joined(separator: ", "))"
            console.usage("unknown setting '\(name)'\(hint)")
            return nil
        }
        guard let verb, verb == .get && p.count <= 2 || verb == .set && p.count == 3 || verb == .unset && p.count == 2 else {
            console.usage("usage: vcache \(configuration.usage)")
            return 2
        }
        var setting: Settings.Known?
        if p.count >= 2 {
            guard let k = known(p[1]) else { return 2 }
            setting = k
        }
        if verb == .set, let setting, let problem = setting.validate(p[2]) {
            console.usage("invalid value '\(p[2])' for \(setting.name): \(problem)")
            return 2
        }
        // Reading the settings reads only (a mistyped path is said, not made); changing them makes the cache.
        guard let store = openStore(args, console: console, readOnly: verb == .get) else { return StoreOpening.failure }
        do {
            switch verb {
            case .set:
                try store.catalog.setConfig(p[1], p[2])
            case .unset:
                try store.catalog.setConfig(p[1], nil)
            case .get:
                for name in setting.map({ [$0.name] }) ?? names {
                    console.out("\(name) = \(try store.catalog.config(name) ?? "(unset)")\n")
                }
            }
        } catch {
            return console.fail(error, context: "cannot \(verb.rawValue) config in \(store.directory)")
        }
        return 0
    }
}
