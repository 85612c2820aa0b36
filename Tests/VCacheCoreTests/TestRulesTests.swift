import Foundation
import Testing

/// Rules of the suite itself, read from its sources.
@Suite struct TestRulesTests {
    /// No test carries a `.timeLimit` trait. Swift Testing starts a time limit's clock when the
    /// test is scheduled, not when its body gets one of the pool's threads; the pool has one
    /// thread per core, and the end-to-end tests hold them for minutes, so on a busy machine
    /// tests failed "Time limit was exceeded" before their body had run (CI of 7ad543b: two with
    /// 2 minutes; a loaded run: twenty with 5). Every wait inside a test is bounded instead.
    @Test func noTestCarriesATimeLimit() throws {
        let tests = ArchitectureDocTests.root.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        #expect(files.count > 50, "found \(files.count) test files under \(tests.path)")
        let trait = ".time" + "Limit("  // split, so this file does not name it
        var offenders: [String] = []
        for file in files {
            let text = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains(trait) && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                offenders.append("Tests/\(file):\(n + 1)")
            }
        }
        #expect(offenders.isEmpty, "a .timeLimit trait fails tests that have not run yet on a busy machine; bound the test's waits instead: \(offenders)")
    }

    /// A descriptor a `defer` closes is not closed by name again before the scope ends. Once
    /// closed, its number goes to the next socket or file any test of the process opens, and the
    /// `defer` closes that one: ServeSlowLinkTests closed its player twice, and the second close
    /// took another suite's in-process origin (its accept loop then took a third origin's
    /// connections and answered 404 for what that one held, or nothing answered at all: a loaded
    /// CI run, HLSExportTests and JSONSchemaTests failing together). Close early through a
    /// variable the `defer` checks (set it to -1), as ServeDescriptorLimitTests does.
    @Test func noDescriptorIsClosedInADeferAndAgainByName() throws {
        let root = ArchitectureDocTests.root
        var files: [String] = []
        for folder in ["Tests", "Sources/VCacheTestSupport"] {
            let names = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)?.compactMap { $0 as? String } ?? []
            files += names.filter { $0.hasSuffix(".swift") }.map { folder + "/" + $0 }
        }
        #expect(files.count > 50, "found \(files.count) test files under \(root.path)")
        let deferred = try Regex(#"defer\s*\{\s*(?:_ = )?close\((\w+)\)\s*\}"#)
        let literal = try Regex(#""(?:[^"\\]|\\.)*""#)
        var offenders: [String] = []
        for file in files {
            let lines = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                .split(separator: "\n", omittingEmptySubsequences: false).map { line in
                    // Code only: string literals and comments hold braces and names that are not.
                    let code = String(line).replacing(literal, with: "\"\"")
                    return code.range(of: "//").map { String(code[..<$0.lowerBound]) } ?? code
                }
            for (n, line) in lines.enumerated() {
                guard let name = line.firstMatch(of: deferred)?.output[1].substring else { continue }
                let again = try Regex("(^|[^\\w.])close\\(\(name)\\)")
                // The rest of the scope the defer is in: until its closing brace.
                var depth = 0
                for (m, later) in lines.enumerated().dropFirst(n + 1) {
                    if later.contains(again) && !later.contains("defer") { offenders.append("\(file):\(m + 1) closes \(name), closed again by the defer of line \(n + 1)") }
                    depth += later.filter { $0 == "{" }.count - later.filter { $0 == "}" }.count
                    if depth < 0 { break }
                }
            }
        }
        #expect(offenders.isEmpty, "a second close of a number closes another test's socket or file: \(offenders)")
    }
}
