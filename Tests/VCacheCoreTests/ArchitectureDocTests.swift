import Foundation
import Testing

/// Docs/architecture.md names every Swift file under Sources/ (its section "Every source file",
/// by folder) and no file that is gone: a file added, moved or removed without the map that says
/// where things are fails here.
@Suite struct ArchitectureDocTests {
    /// The repository's root, from this file's place in it (Tests/VCacheCoreTests/).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let heading = "## Every source file"

    /// What is wrong between the document's text and the Swift files (paths from the root, such
    /// as `Sources/VCacheCore/Ranges/RangeSet.swift`): one line each, naming the file and the fix.
    /// `others`: every other file of the repository a `.swift` named in the prose may be.
    static func problems(doc: String, sources: Set<String>, others: Set<String> = []) -> [String] {
        var out: [String] = []
        guard let start = doc.range(of: "\n" + heading + "\n") else {
            return ["Docs/architecture.md has no section '\(heading)': it lists every Swift file under Sources/, by folder"]
        }
        let section = doc[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        let body = section[..<end]
        var listed = Set<String>()
        for line in body.split(separator: "\n") where line.hasPrefix("- `") {
            // - `Sources/VCacheCore/Ranges/`: ByteRange, RangeSet
            let parts = line.dropFirst(3).split(separator: "`", maxSplits: 1)
            guard parts.count == 2, parts[0].hasSuffix("/"), parts[1].hasPrefix(":") else {
                out.append("Docs/architecture.md: '\(line)' is not '- `Folder/`: Name, Name'")
                continue
            }
            for name in parts[1].dropFirst().split(separator: ",") {
                let path = String(parts[0]) + name.trimmingCharacters(in: .whitespaces) + ".swift"
                if !listed.insert(path).inserted { out.append("Docs/architecture.md lists \(path) twice") }
                if !sources.contains(path) { out.append("Docs/architecture.md lists \(path), which does not exist: remove it from '\(heading)'") }
            }
        }
        for path in sources.sorted() where !listed.contains(path) {
            out.append("\(path) is not named in Docs/architecture.md: add it to '\(heading)' (and to the picture, if it is a new part)")
        }
        // A file the rest of the text names by its file name (`Sources/vcache/CLI/NoCork.swift`, `Walker.swift`).
        let prose = doc[..<start.lowerBound] + section[end...]
        let everything = sources.union(others)
        var seen = Set<String>()
        for word in prose.split(whereSeparator: { !($0.isLetter || $0.isNumber || "+/._-".contains($0)) }) {
            var named = String(word)
            while named.hasSuffix(".") { named.removeLast() }
            guard named.hasSuffix(".swift"), seen.insert(named).inserted else { continue }
            if !everything.contains(where: { $0 == named || $0.hasSuffix("/" + named) }) {
                out.append("Docs/architecture.md names \(named), which does not exist")
            }
        }
        return out
    }

    /// The Swift files under `folder` of the repository, as paths from the root.
    static func swiftFiles(under folder: String) -> Set<String> {
        let base = root.appendingPathComponent(folder)
        guard let walk = FileManager.default.enumerator(atPath: base.path) else { return [] }
        var out = Set<String>()
        while let p = walk.nextObject() as? String {
            if p.hasSuffix(".swift") { out.insert(folder + "/" + p) }
        }
        return out
    }

    @Test func architectureMdNamesEverySourceFileAndNoneThatIsGone() throws {
        let doc = try String(contentsOf: Self.root.appendingPathComponent("Docs/architecture.md"), encoding: .utf8)
        let sources = Self.swiftFiles(under: "Sources")
        #expect(sources.count > 100, "no sources found from \(Self.root.path)")
        let problems = Self.problems(doc: doc, sources: sources, others: Self.swiftFiles(under: "Tests"))
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    static let sample = """
        # How it is built
        `Sources/A/One.swift` and Two.swift do things.

        ## Every source file

        - `Sources/A/`: One, Two

        ## After
        Three.swift is named in the prose after the list.
        """

    @Test(arguments: [
        ("the list and the files agree", ["Sources/A/One.swift", "Sources/A/Two.swift"], ["Docs/architecture.md names Three.swift, which does not exist"]),
        ("a file not listed", ["Sources/A/One.swift", "Sources/A/Two.swift", "Sources/A/New.swift"],
         ["Sources/A/New.swift is not named in Docs/architecture.md: add it to '## Every source file' (and to the picture, if it is a new part)",
          "Docs/architecture.md names Three.swift, which does not exist"]),
        ("a listed file gone", ["Sources/A/One.swift"],
         ["Docs/architecture.md lists Sources/A/Two.swift, which does not exist: remove it from '## Every source file'",
          "Docs/architecture.md names Two.swift, which does not exist",
          "Docs/architecture.md names Three.swift, which does not exist"]),
    ] as [(String, [String], [String])])
    func theCheckFindsWhatIsMissingAndWhatIsGone(_ name: String, _ files: [String], _ expected: [String]) {
        #expect(Self.problems(doc: Self.sample, sources: Set(files)) == expected, "\(name)")
    }
}
