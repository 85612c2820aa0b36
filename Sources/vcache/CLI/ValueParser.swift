import VCacheCore

/// How an option's text becomes its typed value: the value name help shows, what a shell may
/// complete, and the parse, whose usage error names the text, the option and what to give instead.
struct ValueParser<Value: Sendable>: Sendable {
    var valueName: String
    var completion: Completion = .anything
    /// `option` is the option's long form (`--jobs`), for the error.
    var parse: @Sendable (_ text: String, _ option: String) throws -> Value

    /// The same parser shown under another value name (`RATE` for a size).
    func named(_ name: String) -> ValueParser {
        var p = self
        p.valueName = name
        return p
    }

    func spec(long: String, short: Character?, arity: OptionSpec.Arity, help: String, global: Bool = false) -> OptionSpec {
        let parse = self.parse
        return OptionSpec(long: long, short: short, arity: arity, valueName: valueName, help: help, completion: completion,
                          global: global, parse: { try parse($0, "--" + long) })
    }
}

extension ValueParser where Value == String {
    /// Any text, as given.
    static func text(_ valueName: String, completion: Completion = .anything) -> ValueParser {
        ValueParser(valueName: valueName, completion: completion) { text, _ in text }
    }
    static var file: ValueParser { .path("FILE", completion: .file) }
    static var folder: ValueParser { .path("DIR", completion: .folder) }
    /// A path: never empty (an empty --cache-dir would quietly mean the default folder).
    static func path(_ valueName: String, completion: Completion) -> ValueParser {
        ValueParser(valueName: valueName, completion: completion) { text, option in
            guard !text.isEmpty else { throw UsageError("\(option) needs a path, not an empty value") }
            return text
        }
    }
    static var url: ValueParser { .text("URL") }
}

extension ValueParser where Value == Int64 {
    /// Bytes: `512K`, `2M`, `1.5G` (binary), `2MB` (decimal), a bare number.
    static func size(minimum: Int64 = 0) -> ValueParser {
        ValueParser(valueName: "SIZE") { text, option in
            guard let n = Units.parseSize(text), n >= minimum else {
                throw UsageError("invalid size '\(text)' for \(option); use e.g. 2M, 512K, 1.5G" + (minimum > 0 ? " (at least \(Units.formatSize(minimum)))" : ""))
            }
            return n
        }
    }
}

extension ValueParser where Value == Double {
    /// Seconds, more than 0: `500ms`, `30s`, `5m`, `1h30m`, a bare number.
    static var duration: ValueParser {
        ValueParser(valueName: "DURATION") { text, option in
            guard let d = Units.parseDuration(text), d > 0 else {
                throw UsageError("invalid duration '\(text)' for \(option); use e.g. 30s, 5m, 2h (at most \(Units.maxDurationText))")
            }
            return d
        }
    }
}

extension ValueParser where Value == Int {
    /// A whole number in `range`.
    static func count(_ range: ClosedRange<Int>) -> ValueParser {
        ValueParser(valueName: "N") { text, option in
            guard let n = Int(text), range.contains(n) else {
                let advice = range.upperBound == Int.max ? "use a whole number >= \(range.lowerBound)" : "use \(range.lowerBound) to \(range.upperBound)"
                throw UsageError("invalid count '\(text)' for \(option); \(advice)")
            }
            return n
        }
    }

    /// A TCP port in `range` (0: any free one, where a server allows it).
    static func port(_ range: ClosedRange<Int>) -> ValueParser {
        ValueParser(valueName: "N") { text, option in
            guard let n = Int(text), range.contains(n) else {
                throw UsageError("invalid port '\(text)' for \(option); use \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
    }
}

extension ValueParser where Value == RangeRequest {
    /// `A-B` inclusive, `A-` to the end, `-N` the last N bytes (as in HTTP).
    static var byteRange: ValueParser {
        ValueParser(valueName: "A-B") { text, option in
            guard let r = RangeRequest(httpSpec: text) else { throw UsageError("invalid range '\(text)' for \(option); use A-B, A- or -N (bytes, inclusive)") }
            return r
        }
    }
}

extension ValueParser where Value == ExpectedDigest {
    /// `ALGO=VALUE`: md5, sha1, sha256 or sha512, in hex (or base64, as digest headers write it).
    static var checksum: ValueParser {
        let words = DigestAlgorithm.allCases.map { Completion.Word(value: $0.rawValue + "=", help: "\($0.byteCount * 2) hex digits") }
        return ValueParser(valueName: "ALGO=HEX", completion: .words(words)) { text, option in
            do {
                return try ExpectedDigest.parse(text, source: .option)
            } catch {
                throw UsageError("invalid \(option): \(error)")
            }
        }
    }
}

extension ValueParser where Value: CLIChoice {
    /// One of the type's cases: the value name, the completion and the error list them.
    static func choice() -> ValueParser {
        let words = Value.allCases.map { Completion.Word(value: $0.rawValue, help: $0.help) }
        return ValueParser(valueName: words.map(\.value).joined(separator: "|"), completion: .words(words)) { text, option in
            guard let v = Value(rawValue: text) else {
                let names = words.map(\.value)
                let list = names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
                throw UsageError("invalid \(Value.noun) '\(text)' for \(option); use \(list)")
            }
            return v
        }
    }
}

extension ValueParser where Value == String {
    /// `--audio LANG`: a language tag as EXT-X-MEDIA's LANGUAGE holds one (RFC 5646: letters,
    /// digits and hyphens, `en`, `pt-BR`, `yue-Hant-HK`); an empty or other value matches no
    /// rendition and would only fail later, against the stream.
    static var language: ValueParser {
        ValueParser(valueName: "LANG") { text, option in
            let subtags = text.split(separator: "-", omittingEmptySubsequences: false)
            guard !text.isEmpty, text.utf8.count <= 64,
                  subtags.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) } }) else {
                throw UsageError("invalid language '\(Console.escaped(text))' for \(option); give a language tag such as en, fr or pt-BR")
            }
            return text
        }
    }
}

extension ValueParser where Value == HLSPlan.VariantChoice {
    /// `--variant`: a word, a height, a height bound or a bandwidth; the words are completed.
    static var variant: ValueParser {
        let words = [Completion.Word(value: "best", help: "the highest BANDWIDTH"), Completion.Word(value: "worst", help: "the lowest BANDWIDTH"),
                     Completion.Word(value: "all", help: "every variant")]
        return ValueParser(valueName: "best|worst|all|720p|<=720p|BANDWIDTH", completion: .words(words)) { v, option in
            guard let choice = HLSPlan.VariantChoice(argument: v) else {
                throw UsageError("invalid variant '\(v)' for \(option); use best, worst, all, a height such as 720p, <=720p, or a BANDWIDTH in bits/s")
            }
            return choice
        }
    }
}
