#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import VCacheCore

/// The entrypoint: pick the command, parse its arguments from its declaration, run it, exit.
@main
struct VCache {
    static var commands: [any VCacheCommand.Type] {
        [PrefetchCommand.self, ListCommand.self, InfoCommand.self, EvictCommand.self, PinCommand.self, UnpinCommand.self,
         VerifyCommand.self, ExportCommand.self, ServeCommand.self, StatusCommand.self, CheckCommand.self, UrlCommand.self, ConfigCommand.self,
         CompletionCommand.self, ManPageCommand.self]
    }

    static func main() {
        // libcurl converts internationalised host names with libidn2, which reads them in the
        // locale's encoding: UTF-8, whatever the environment says (cron's is often plain C).
        if setlocale(LC_CTYPE, "C.UTF-8") == nil { setlocale(LC_CTYPE, "") }
        // A write past `ulimit -f` fails with EFBIG, said in one line, for every command (the
        // cache's reserve as it is opened, serve storing a video, export), never SIGXFSZ, whose
        // default kills the process (serve, for every player at once).
        signal(SIGXFSZ, SIG_IGN)
        let console = Console.current()
        // Bytes that are not UTF-8 arrive as U+FFFD: another URL or path than the one given.
        if let bad = CommandLine.arguments.dropFirst().first(where: { $0.contains("\u{FFFD}") }) {
            console.usage("argument '\(Console.escaped(bad))' is not valid UTF-8 (shown with U+FFFD); give it as UTF-8, a URL with its bytes percent-encoded")
            exit(2)
        }
        if case .failure(let problem)? = Database.catalogTimeout(ProcessInfo.processInfo.environment["VCACHE_CATALOG_TIMEOUT"]) {
            console.usage(Console.escaped(problem.description))
            exit(2)
        }
        exit(run(Array(CommandLine.arguments.dropFirst()), console: console))
    }

    /// Global options may come before the command too (`vcache --cache-dir X ls`): they are
    /// moved behind it, where the command's declaration parses them.
    static func hoistGlobalOptions(_ args: [String]) -> [String] {
        let globals = CommandSpec.globalOptions
        var hoisted: [String] = []
        var i = 0
        while i < args.count {
            let a = args[i]
            if globals.contains(where: { $0.takesValue && "--" + $0.long == a }), i + 1 < args.count {
                hoisted += [a, args[i + 1]]
                i += 2
            } else if globals.contains(where: { $0.takesValue ? a.hasPrefix("--\($0.long)=") : $0.names.contains(a) }) {
                hoisted.append(a)
                i += 1
            } else {
                break
            }
        }
        guard !hoisted.isEmpty, i < args.count else { return args }
        return [args[i]] + hoisted + args[(i + 1)...]
    }

    static func run(_ rawArgs: [String], console: Console) -> Int32 {
        let args = hoistGlobalOptions(rawArgs)
        guard let first = args.first else {
            console.err(overview)
            return 2
        }
        switch first {
        case "--help", "-h":
            console.out(overview)
            return 0
        case "--version", "-V", "version":
            var text = "vcache \(VCacheVersion.string)\n"
            for (name, version) in VCacheVersion.libraries { text += "  \(name): \(version)\n" }
            console.out(text)
            return 0
        case "help":
            guard args.count > 1 else { console.out(overview); return 0 }
            guard let command = commands.first(where: { $0.spec.name == args[1] }) else {
                console.usage(unknownCommand(args[1]))
                return 2
            }
            console.out(command.spec.helpText)
            return 0
        default:
            break
        }
        guard let command = commands.first(where: { $0.spec.name == first }) else {
            // With --json, an unknown command is an `error` event too (its command: "vcache").
            var console = console
            if args.prefix(while: { $0 != "--" }).contains("--" + GlobalFlag.json.rawValue) { console.jsonCommand = "vcache" }
            console.usage(unknownCommand(first))
            return 2
        }
        return command.main(Array(args.dropFirst()), console: console)
    }

    static func unknownCommand(_ name: String) -> String {
        if name.hasPrefix("-") { return "unknown option '\(name)'; see 'vcache --help'" }
        if let s = ArgumentParser.suggestion(for: name, among: commands.map { $0.spec.name }) {
            return "unknown command '\(name)'; did you mean '\(s)'?"
        }
        return "unknown command '\(name)'; see 'vcache --help'"
    }

    static var overview: String {
        var lines = ["vcache \(VCacheVersion.string): a sparse-range cache for MP4 over HTTP", "",
                     "usage: vcache COMMAND [options]", "", "commands:"]
        let width = commands.map { $0.spec.name.count }.max() ?? 0
        for c in commands {
            lines.append("  " + c.spec.name.padded(toLength: width + 2) + c.spec.abstract)
        }
        lines += ["", "'vcache help COMMAND' or 'vcache COMMAND --help' for a command's options."] + ExitStatus.overview
        return lines.joined(separator: "\n") + "\n"
    }
}

/// A command: what it is, its options (declared once, typed), and what it does with them.
protocol VCacheCommand {
    associatedtype Options: OptionGroup
    static var configuration: CommandConfiguration { get }
    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32
    /// Parses `args` by the declarations, then runs (the default does; no command overrides it).
    static func main(_ args: [String], console: Console) -> Int32
}

extension VCacheCommand {
    static var spec: CommandSpec { CommandSpec(configuration: configuration, options: Options.declarations) }

    static func main(_ args: [String], console: Console) -> Int32 {
        var console = console
        let spec = self.spec
        // With --json, even a bad command line is reported as an `error` event.
        if args.prefix(while: { $0 != "--" }).contains("--" + GlobalFlag.json.rawValue) {
            console.jsonCommand = spec.name
        }
        let parsed: ParsedArguments<Options>
        do {
            parsed = ParsedArguments(try ArgumentParser.parse(args, spec: spec))
        } catch {
            console.error(error)
            return 2
        }
        if parsed.common.help {
            console.out(spec.helpText)
            return 0
        }
        if parsed.isSet(.json) { console.jsonCommand = spec.name }
        if parsed.isSet(.noColor) { console.color = false }
        // prefetch and serve say what -q leaves out themselves (serve keeps its summary line).
        if parsed.isSet(.quiet) && !spec.configuration.handlesQuiet { console.quiet = true }
        return run(parsed, console: console)
    }

    /// Opens the cache named by `--cache-dir` (or the environment); on failure prints the error
    /// and returns nil, and `StoreOpening.failure` is the exit code the error's class names (5 for
    /// this machine's disk or catalog), the same the JSON error carries.
    /// `readOnly`: for commands that only read (ls, info, verify, status): nothing is made or
    /// written, so they work on a read-only file system and say so when there is no cache.
    static func openStore<O>(_ args: ParsedArguments<O>, console: Console, readOnly: Bool = false) -> CacheStore? {
        let dir = CacheLocation.resolve(explicit: args.common.cacheDir)
        // Only a folder named (--cache-dir, VCACHE_DIR) can be mistyped: the default one of a user
        // who never cached anything is made, and is empty.
        let named = args.common.cacheDir != nil || !(ProcessInfo.processInfo.environment["VCACHE_DIR"] ?? "").isEmpty
        do {
            return try CacheStore(directory: dir, readOnly: readOnly && (named || FileSystem.exists(dir + "/catalog.db")))
        } catch {
            let failure = FailureInfo(error)
            console.error(failure)
            StoreOpening.failure = failure.exitCode
            return nil
        }
    }

}

/// The exit code of the last `openStore` that failed (commands return it).
enum StoreOpening {
    nonisolated(unsafe) static var failure: Int32 = 1
}
