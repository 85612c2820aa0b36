import Testing
import VCacheCore
@testable import vcache

/// The parser and the typed declarations, in process: no binary is started.
@Suite struct ArgumentParserTests {
    struct Demo: OptionGroup {
        var bytes = Option("bytes", .size(), help: "size")
        var range = Repeated("range", short: "r", .byteRange, help: "range")
        var quiet = Flag(.quiet, help: "quiet")
        var jobs = Option("jobs", short: "j", .count(1...64), help: "jobs")
        var wait = Option("wait", .duration, help: "wait")
        var sort = Option<ListCommand.Order>("sort", help: "order")
        var origin = OriginOptions()
    }

    let spec = CommandSpec(configuration: CommandConfiguration(name: "demo", abstract: "a demo", usage: "demo ARG...", minPositionals: 1, maxPositionals: nil),
                           options: Demo.declarations)

    func parse(_ args: String...) throws -> ParsedArguments<Demo> { ParsedArguments(try ArgumentParser.parse(args, spec: spec)) }

    @Test func longShortClusteredAndInlineFormsAllParseIntoTypedValues() throws {
        let p = try parse("u1", "--bytes=2M", "-qj8", "-r", "0-1", "--range", "5-", "--wait", "1h30m", "--sort", "size", "--resolve", "a:1:b",
                          "--", "--not-an-option")
        #expect(p.positionals == ["u1", "--not-an-option"])
        #expect(p.bytes == Int64(2_097_152))
        #expect(p.jobs == 8)
        #expect(p.quiet)
        #expect(p.range == [RangeRequest(httpSpec: "0-1"), RangeRequest(httpSpec: "5-")].compactMap { $0 })
        #expect(p.wait == 5400)
        #expect(p.sort == .size)
        #expect(p.origin.resolve == ["a:1:b"])
        #expect(!p.origin.ipv4)
        #expect(p.common.cacheDir == nil)
    }

    @Test func helpAnywhereWinsOverABadValue() throws {
        #expect(ParsedArguments<Demo>(try ArgumentParser.parse(["--jobs", "x", "--help"], spec: spec)).common.help)
        #expect(throws: UsageError("invalid count 'x' for --jobs; use 1 to 64")) { try parse("--jobs", "x", "--bytes", "y") }  // the first one
    }

    @Test func anOptionGivenTwiceKeepsTheLastValue() throws {
        #expect(try parse("u", "-j", "2", "--jobs=3").jobs == 3)
    }

    @Test func errorsNameTheOptionAndSuggestTheClosest() {
        #expect(throws: UsageError("unknown option '--byts' for 'demo'; did you mean '--bytes'?")) { try parse("u", "--byts", "1") }
        #expect(throws: UsageError("unknown option '--zzzzzzzz' for 'demo'; see 'vcache demo --help'")) { try parse("u", "--zzzzzzzz") }
        #expect(throws: UsageError("option '--bytes' of 'demo' needs a value")) { try parse("u", "--bytes") }
        #expect(throws: UsageError("option '--quiet' of 'demo' takes no value")) { try parse("u", "--quiet=yes") }
        #expect(throws: UsageError("unknown option '-x' for 'demo'; see 'vcache demo --help'")) { try parse("u", "-x") }
        #expect(throws: UsageError("'demo' needs more arguments; usage: vcache demo ARG...")) { try parse() }
    }

    /// Each value is parsed by its type, with the error a user sees (the same texts the end-to-end tests assert).
    @Test(arguments: [
        (["--bytes", "2X"], "invalid size '2X' for --bytes; use e.g. 2M, 512K, 1.5G"),
        (["--jobs", "0"], "invalid count '0' for --jobs; use 1 to 64"),
        (["-j", "x"], "invalid count 'x' for --jobs; use 1 to 64"),
        (["--wait", "soon"], "invalid duration 'soon' for --wait; use e.g. 30s, 5m, 2h (at most 3650d)"),
        (["--wait", "0"], "invalid duration '0' for --wait; use e.g. 30s, 5m, 2h (at most 3650d)"),
        (["--range", "9-3"], "invalid range '9-3' for --range; use A-B, A- or -N (bytes, inclusive)"),
        (["--sort", "age"], "invalid order 'age' for --sort; use lru, size or url"),
        (["--resolve", "video.test"], "invalid value 'video.test' for --resolve; use HOST:PORT:ADDR, e.g. cdn.example:443:10.0.0.5"),
    ])
    func aBadValueIsAUsageErrorNamingWhatToGive(args: [String], message: String) {
        #expect(throws: UsageError(message)) { try ArgumentParser.parse(["u"] + args, spec: spec) }
    }

    @Test func aChoiceNamesEveryCaseInItsErrorValueNameAndCompletion() throws {
        let progress = PrefetchCommand.spec.options.first { $0.long == "progress" }
        #expect(progress?.valueName == "auto|bar|lines|none")
        #expect(progress?.completion == .words(PrefetchCommand.ProgressDisplay.allCases.map { Completion.Word(value: $0.rawValue, help: $0.help) }))
        #expect(throws: UsageError("invalid value 'fancy' for --progress; use auto, bar, lines or none")) {
            try ArgumentParser.parse(["--progress", "fancy"], spec: PrefetchCommand.spec)
        }
        #expect(ParsedArguments<PrefetchCommand.Options>(try ArgumentParser.parse(["--progress", "none"], spec: PrefetchCommand.spec)).progress == .off)
    }

    @Test func sizesHonourTheirMinimum() {
        #expect(throws: UsageError("invalid size '10' for --limit-rate; use e.g. 2M, 512K, 1.5G (at least 1.0 KiB)")) {
            try ArgumentParser.parse(["--limit-rate", "10"], spec: PrefetchCommand.spec)
        }
    }

    @Test func helpTextListsEveryDeclaredOption() {
        let help = spec.helpText
        for o in spec.allOptions { #expect(help.contains("--" + o.long)) }
        #expect(help.contains("-j, --jobs N"))
        #expect(help.contains("--sort lru|size|url"))
        #expect(help.contains("--cacert FILE"))  // a nested group's options, in its place
    }

    @Test func editDistanceIsLevenshtein() {
        #expect(ArgumentParser.editDistance("kitten", "sitting") == 3)
        #expect(ArgumentParser.editDistance("", "abc") == 3)
        #expect(ArgumentParser.editDistance("same", "same") == 0)
    }
}
