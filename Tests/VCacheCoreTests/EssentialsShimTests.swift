import Foundation
import Testing
@testable import VCacheCore

/// The small replacements for what FoundationEssentials lacks (Docs/performance.md, A lean
/// binary), each against full Foundation's own answer on the same inputs: the product's output
/// must stay byte for byte what it was.
@Suite struct EssentialsShimTests {
    static let paths = ["", "/", "ab", "/a", "ab/", "/a/", "a/b", "/a/b", "/a/b/", "a//b", "/a/b.mp4", "b.mp4", ".mp4",
                        "/x/.hidden", "a.", "/a/b.", "a.b.c", "/a.b/c", "/a.b/c.d", "x.tar.gz", "..", "/..", "../a.b", "./a", "/a/b/..",
                        "video.mp4?x=1", "é/ß.mkv", "日本/動画.mp4", "a b/c d.m4s", "/a/b.mp4/"]

    @Test func pathTextAnswersAsNSString() {
        for p in Self.paths {
            let s = p as NSString
            #expect(PathText.lastPathComponent(p) == s.lastPathComponent, "lastPathComponent of '\(p)'")
            #expect(PathText.deletingLastPathComponent(p) == s.deletingLastPathComponent, "deletingLastPathComponent of '\(p)'")
            #expect(PathText.deletingPathExtension(p) == s.deletingPathExtension, "deletingPathExtension of '\(p)'")
            #expect(PathText.pathExtension(p) == s.pathExtension, "pathExtension of '\(p)'")
            for c in ["", "b", "b.mp4", "/b", "b/"] {
                #expect(PathText.appendingPathComponent(p, c) == s.appendingPathComponent(c), "'\(p)' + '\(c)'")
            }
        }
    }

    /// Where swift-corelibs-foundation's NSString answers "" for the root (`//`, `///`) or traps
    /// (`a///b//`; deletingLastPathComponent of `a` and `a/`), PathText answers as for the path
    /// with its slashes fixed.
    @Test func pathTextFixesRunsOfSlashes() {
        for p in ["a", "a/"] {
            #expect(PathText.deletingLastPathComponent(p) == "")
            #expect(PathText.lastPathComponent(p) == "a")
        }
        for p in ["//", "///"] {
            #expect(PathText.lastPathComponent(p) == "/")
            #expect(PathText.deletingLastPathComponent(p) == "/")
            #expect(PathText.pathExtension(p) == "")
        }
        #expect(PathText.lastPathComponent("a///b.mp4//") == "b.mp4")
        #expect(PathText.deletingLastPathComponent("a///b.mp4//") == "a")
        #expect(PathText.pathExtension("a///b.mp4//") == "mp4")
        #expect(PathText.deletingPathExtension("/x//a.b.mp4/") == "/x/a.b")
    }

    @Test func cFormatWritesWhatStringFormatWrites() {
        for d in [0, 0.04, 0.05, 0.25, 0.35, 1.5, 2.5, 9.95, 9.96, 99.95, 100, 123.456, 1e6 + 0.5, 1234567.891, -0.0, -1.25] {
            for f in ["%.0f", "%.1f", "%.3f", "%.1fs", "PT%.3fS", "%.0f%%", "%.1fms"] {
                #expect(String(cFormat: f, d) == String(format: f, d), "\(f) of \(d)")
            }
            #expect(String(cFormat: "%.1f of %.1f s", d, d * 3) == String(format: "%.1f of %.1f s", d, d * 3))
        }
        for i in [0, 5, 59, 60, 99, 100, 12345] {
            #expect(String(cFormat: "%ldm%02lds", i, i % 60) == String(format: "%dm%02ds", i, i % 60))
            #expect(String(cFormat: " %3ld%%", i) == String(format: " %3d%%", i))
        }
        for u: UInt32 in [0, 0x1F, 0x7F, 0xA0, 0x2028, 0x1F600] {
            #expect(String(cFormat: "\\x%02X", u) == String(format: "\\x%02X", u))
            #expect(String(cFormat: "U+%04X", u) == String(format: "U+%04X", u))
        }
        let long = String(repeating: "x", count: 500)
        #expect(String(cFormat: "%.1f " + long, 1.25) == "1.2 " + long)
    }

    @Test func trimmingTakesWhatFoundationTakes() {
        let samples = ["", " ", " a ", "\ta\t", "\n a \r\n", "\u{A0}a\u{3000}", "\u{200B}a\u{200B}", "\u{85}a\u{2028}", "\u{0B}a\u{0C}", "a b", "  é  ", "\r\n"]
        for s in samples {
            #expect(s.trimming(.whitespaces) == s.trimmingCharacters(in: .whitespaces), "whitespaces of \(Array(s.unicodeScalars))")
            #expect(s.trimming(.whitespacesAndNewlines) == s.trimmingCharacters(in: .whitespacesAndNewlines), "and newlines of \(Array(s.unicodeScalars))")
            #expect(s[...].trimming(.whitespaces) == s[...].trimmingCharacters(in: .whitespaces))
        }
    }

    @Test func paddingAsFoundationPads() {
        for s in ["", "a", "abcdefghij", "é", "日本", "😀x", "abcdefghijklmnopqrstuvwxyz"] {
            for n in [0, 1, 5, 20] {
                #expect(s.padded(toLength: n) == s.padding(toLength: n, withPad: " ", startingAt: 0), "'\(s)' to \(n)")
            }
        }
    }

    @Test func percentCodingAsFoundationDoes() {
        let names = ["video.mp4", "a b.mp4", "a/b?c#d;e.mp4", "é ß 日本.mp4", "100%.mp4", "x+y=z&w@v~u.mp4", "'quote'\"dq\".ts", "\u{1}\u{7F}"]
        let proxyAllowed = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#;"))
        for n in names {
            #expect(PercentCoding.encode(n, allowed: PercentCoding.urlPathAllowed) == n.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed))
            #expect(PercentCoding.encode(n, allowed: PercentCoding.urlPathAllowed.subtracting("/?#;".utf8)) == n.addingPercentEncoding(withAllowedCharacters: proxyAllowed))
        }
        for e in ["", "a", "%41", "%e9", "%C3%A9", "%C3", "%", "%4", "%zz", "a%2Fb", "%FF", "%00x", "100%25", "%%41", "a+b"] {
            #expect(PercentCoding.decode(e) == e.removingPercentEncoding, "'\(e)'")
        }
    }

    @Test func statusJSONAsJSONSerializationWroteIt() throws {
        let o: [String: Any] = ["requests": 12, "requests_by_status": ["200": 3, "206": 9], "responses_by_cache": ["hit": 1, "miss": 2, "partial": 0],
                                "from_cache_bytes": Int64(1) << 40, "started": "2026-11-28T10:00:00Z", "byte_hit_ratio": 0.5, "cap_bytes": 0,
                                "origin_errors": ["cut": 1, "status": 0, "unreachable": 2] as [String: Int], "open_connections": 3]
        for ratio in [0.5, 1.0, 0.0, 1e-05, 0.123456789012345678, 2.5e-7, 1.0 / 3] {
            var x = o
            x["byte_hit_ratio"] = ratio
            let expected = String(decoding: try JSONSerialization.data(withJSONObject: x, options: [.sortedKeys]), as: UTF8.self)
            #expect(JSONText.sortedObject(x) == expected)
        }
    }

    @Test func utcTimeAsTheFormattersWroteIt() {
        let iso = ISO8601DateFormatter()
        let compact = DateFormatter()
        compact.dateFormat = "yyyyMMdd-HHmmss"
        compact.timeZone = TimeZone(identifier: "UTC")
        for t in [0, 1, 951_782_400.5, 1_764_324_000.999, 4_102_444_799, 1_000_000_000] as [Double] {
            let d = Date(timeIntervalSince1970: t)
            #expect(UTCTime.iso8601(d) == iso.string(from: d), "\(t)")
            #expect(UTCTime.compact(d) == compact.string(from: d), "\(t)")
        }
    }

    @Test func uriAssignmentAsTheRegularExpressionFindsIt() {
        for s in ["URI=\"a\"", "X,URI =1", "URI\t=", "URIX=", "UR I=", "", "URI", "A,URI\u{A0}=", "URI\u{2028}=x", "XURI  ="] {
            #expect(HLSRewriter.hasURIAssignment(s) == (s.range(of: #"URI\s*="#, options: .regularExpression) != nil), "'\(s)'")
        }
    }

    /// The product's targets import FoundationEssentials, never all of Foundation unconditionally:
    /// one use of Foundation proper links it all, ICU's 30-odd MB of data with it.
    @Test func productSourcesImportOnlyFoundationEssentials() throws {
        var offenders: [String] = []
        var scanned = 0
        for target in ["Sources/VCacheCore", "Sources/vcache"] {
            let dir = ArchitectureDocTests.root.appendingPathComponent(target)
            let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                scanned += 1
                let lines = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
                for (n, line) in lines.enumerated() {
                    let t = line.trimming(.whitespaces)
                    guard t.hasPrefix("import Foundation") || t.hasPrefix("@_exported import Foundation") || t.hasPrefix("@preconcurrency import Foundation"),
                          !t.hasPrefix("import FoundationEssentials") else { continue }
                    // Allowed only as the fallback of `#if canImport(FoundationEssentials) ... #else`.
                    let before = lines[..<n].reversed().map { $0.trimming(.whitespaces) }.first { !$0.isEmpty && !$0.hasPrefix("//") }
                    let opening = n >= 3 ? lines[n - 3].trimming(.whitespaces) : ""
                    if before != "#else" || opening != "#if canImport(FoundationEssentials)" { offenders.append("\(target)/\(file):\(n + 1)") }
                }
            }
        }
        #expect(scanned > 100, "found \(scanned) source files")
        #expect(offenders.isEmpty, "import FoundationEssentials (#if canImport(FoundationEssentials) import FoundationEssentials #else import Foundation #endif): \(offenders)")
    }
}
