import Testing
@testable import vcache

@Suite struct ArgumentParserTests {
    let spec = CommandSpec(
        name: "demo", abstract: "a demo", usage: "demo ARG...",
        options: [.value("bytes", "SIZE", "size"), .repeated("range", short: "r", "A-B", "range"), .flag("quiet", short: "q", "quiet"),
                  .value("jobs", short: "j", "N", "jobs")],
        minPositionals: 1, maxPositionals: nil)

    @Test func longShortClusteredAndInlineFormsAllParse() throws {
        let p = try ArgumentParser.parse(["u1", "--bytes=2M", "-qj8", "-r", "0-1", "--range", "5-", "--", "--not-an-option"], spec: spec)
        #expect(p.positionals == ["u1", "--not-an-option"])
        #expect(p.value("bytes") == "2M")
        #expect(p.value("jobs") == "8")
        #expect(p.flag("quiet"))
        #expect(p.all("range") == ["0-1", "5-"])
    }

    @Test func errorsNameTheOptionAndSuggestTheClosest() {
        #expect(throws: UsageError("unknown option '--byts' for 'demo'; did you mean '--bytes'?")) { try ArgumentParser.parse(["u", "--byts", "1"], spec: spec) }
        #expect(throws: UsageError("unknown option '--zzzzzzzz' for 'demo'; see 'vcache demo --help'")) { try ArgumentParser.parse(["u", "--zzzzzzzz"], spec: spec) }
        #expect(throws: UsageError("option '--bytes' of 'demo' needs a value")) { try ArgumentParser.parse(["u", "--bytes"], spec: spec) }
        #expect(throws: UsageError("option '--quiet' of 'demo' takes no value")) { try ArgumentParser.parse(["u", "--quiet=yes"], spec: spec) }
        #expect(throws: UsageError("unknown option '-x' for 'demo'; see 'vcache demo --help'")) { try ArgumentParser.parse(["u", "-x"], spec: spec) }
        #expect(throws: UsageError("'demo' needs more arguments; usage: vcache demo ARG...")) { try ArgumentParser.parse([], spec: spec) }
    }

    @Test func helpTextListsEveryDeclaredOption() {
        let help = spec.helpText
        for o in spec.allOptions { #expect(help.contains("--" + o.long)) }
        #expect(help.contains("-j, --jobs N"))
    }

    @Test func editDistanceIsLevenshtein() {
        #expect(ArgumentParser.editDistance("kitten", "sitting") == 3)
        #expect(ArgumentParser.editDistance("", "abc") == 3)
        #expect(ArgumentParser.editDistance("same", "same") == 0)
    }
}
