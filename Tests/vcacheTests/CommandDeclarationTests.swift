import Foundation
import Testing
@testable import vcache

/// Help, the man page, the completions, Docs/cli.md and the global options all come from (or are
/// checked against) the commands' declarations; in process, no binary is started.
@Suite struct CommandDeclarationTests {
    let commands = VCache.commands.map { $0.spec }

    @Test func everyCommandDeclaresEachNameOnce() {
        for c in commands {
            let longs = c.allOptions.map(\.long), shorts = c.allOptions.compactMap(\.short)
            #expect(Set(longs).count == longs.count, "\(c.name): \(longs)")
            #expect(Set(shorts).count == shorts.count, "\(c.name): \(shorts)")
        }
        #expect(Set(commands.map(\.name)).count == commands.count)
    }

    @Test func helpManPageAndCompletionsNameEveryOptionOfEveryCommand() {
        let page = ManPageCommand.page(), bash = CompletionCommand.bash(), fish = CompletionCommand.fish()
        for c in commands {
            for o in c.allOptions {
                #expect(c.helpText.contains(o.synopsis), "\(c.name) --help: \(o.long)")
                #expect(page.contains("\\fB\\-\\-\(ManPageCommand.esc(o.long))\\fR"), "man page: \(c.name) --\(o.long)")
                #expect(bash.contains("--" + o.long), "bash: \(c.name) --\(o.long)")
                #expect(fish.contains("__fish_seen_subcommand_from \(c.name)' -l \(o.long)"), "fish: \(c.name) --\(o.long)")
                if case .words(let words) = o.completion {
                    #expect(bash.contains("compgen -W \"\(words.map(\.value).joined(separator: " "))\""), "bash: \(c.name) --\(o.long) words")
                    for w in words { #expect(page.contains(".B \(ManPageCommand.esc(w.value))\n\(ManPageCommand.esc(w.help))"), "man: \(o.long) \(w.value)") }
                }
            }
        }
    }

    @Test func choiceCompletionsComeFromTheEnumsCasesNotTheValueName() {
        let variant = PrefetchCommand.spec.options.first { $0.long == "variant" }
        // The value name shows the forms a user may type; only the words are offered.
        #expect(variant?.valueName == "best|worst|all|720p|<=720p|BANDWIDTH")
        guard case .words(let words)? = variant?.completion else { Issue.record("no words"); return }
        #expect(words.map(\.value) == ["best", "worst", "all"])
        let sort = ListCommand.spec.options.first { $0.long == "sort" }
        #expect(sort?.completion == .words(ListCommand.Order.allCases.map { .init(value: $0.rawValue, help: $0.help) }))
    }

    @Test func globalOptionsBeforeTheCommandMoveBehindIt() {
        #expect(VCache.hoistGlobalOptions(["--cache-dir", "/c", "-q", "prefetch", "u"]) == ["prefetch", "--cache-dir", "/c", "-q", "u"])
        #expect(VCache.hoistGlobalOptions(["--cache-dir=/c", "--json", "ls"]) == ["ls", "--cache-dir=/c", "--json"])
        #expect(VCache.hoistGlobalOptions(["--verbose", "-v", "prefetch"]) == ["prefetch", "--verbose", "-v"])
        #expect(VCache.hoistGlobalOptions(["--bytes", "2M", "prefetch"]) == ["--bytes", "2M", "prefetch"])  // not global: left for the error
        #expect(VCache.hoistGlobalOptions(["--no-color", "-q", "evict", "--lru"]) == ["evict", "--no-color", "-q", "--lru"])
        // Every command takes every global flag, declared once (CommonOptions), with one help.
        for c in commands {
            for flag in GlobalFlag.allCases {
                let declared = c.allOptions.filter { $0.long == flag.rawValue }
                #expect(declared.count == 1 && declared.first?.global == true && declared.first?.short == flag.short, "\(c.name) --\(flag.rawValue)")
                #expect(!c.options.contains { $0.long == flag.rawValue }, "\(c.name) declares --\(flag.rawValue) again")
            }
        }
    }

    @Test func theExitCodesAreOneTableForHelpAndTheManPage() {
        let page = ManPageCommand.page(), overview = VCache.overview
        for e in ExitStatus.all {
            #expect(page.contains(".B \(e.codes.map(String.init).joined(separator: ", "))\n\(ManPageCommand.esc(e.meaning))"))
            #expect(overview.contains(e.codes.map(String.init).joined(separator: "/") + " " + e.brief))
        }
    }

    /// `check` asks of HLS and DASH streams too (Docs/hls.md, Docs/dash.md): its summary, its `--seconds` and the man page
    /// page say so, not "MP4" alone.
    @Test func checkSaysItAsksOfStreamsAsWellAsMP4s() {
        let check = CheckCommand.spec
        #expect(check.abstract.contains("HLS and DASH streams"), "\(check.abstract)")
        #expect(check.usage.contains("--variant") && check.usage.contains("--audio"), "\(check.usage)")
        let seconds = check.options.first { $0.long == "seconds" }
        #expect(seconds?.help.contains("HLS or DASH stream") == true, "\(seconds?.help ?? "")")
        #expect(ManPageCommand.page().contains("of each HLS or DASH stream"))
    }

    /// `word` stands alone in `text` (`--all` is not in `--all-hosts`).
    func names(_ text: String, _ word: String) -> Bool {
        let pattern = "(?<![\\w-])" + NSRegularExpression.escapedPattern(for: word) + "(?![\\w-])"
        return text.range(of: pattern, options: .regularExpression) != nil
    }

    /// Docs/cli.md describes each command in its own section: the section must name every option
    /// the command declares, and every exit code.
    @Test func theCommandLineReferenceNamesEachCommandsOptionsInItsSection() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Docs/cli.md").path
        let text = try String(contentsOfFile: docs, encoding: .utf8)
        let sections = text.components(separatedBy: "\n## ").dropFirst()
        var missing: [String] = []
        for c in commands {
            if !text.contains("vcache \(c.name)") { missing.append(c.name) }
            if c.options.isEmpty { continue }
            // `## \`vcache ls [options]\``, `## \`vcache pin URL|KEY...\`, \`vcache unpin ...\``
            let heading = { (section: String) in section.prefix { $0 != "\n" } }
            guard let section = sections.first(where: { names(String(heading($0)), "`vcache \(c.name)") }) else {
                missing.append("a section for \(c.name)")
                continue
            }
            for o in c.options where !names(section, "--" + o.long) {
                missing.append("\(c.name) --\(o.long)")
            }
        }
        for e in ExitStatus.all {
            for code in e.codes where !text.contains("| \(code) |") { missing.append("exit code \(code)") }
        }
        #expect(missing.isEmpty, "Docs/cli.md does not name: \(missing)")
    }
}
