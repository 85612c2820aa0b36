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
}
