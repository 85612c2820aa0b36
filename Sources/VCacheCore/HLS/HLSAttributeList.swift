/// An attribute list (RFC 8216 §4.2) as written: names and values in order, a quoted string's
/// value without its quotes (it may hold commas), and where each value lies in the parsed text,
/// so `HLSRewriter` can replace a value and leave every other byte alone.
///
/// Leniencies, each seen in the wild: spaces before a name, a trailing comma, lower-case names,
/// and strings or enumerations written with or without quotes (the typed getters take either).
/// Numbers are strict: a value that is not one, or does not fit 64 bits, is an error.
public struct HLSAttributeList: Equatable, Sendable {
    public struct Attribute: Equatable, Sendable {
        public var name: String
        /// As written, without the quotes of a quoted string.
        public var value: String
        public var isQuoted: Bool
        /// Where `value` lies in the text parsed (inside the quotes of a quoted string).
        public var valueRange: Range<String.Index>
    }

    public private(set) var attributes: [Attribute]
    /// For errors: the 1-based line and the tag the list was on.
    public let line: Int
    public let tag: String

    /// Parses `text` (a tag's value: what follows its colon). Indices in `valueRange` are `text`'s.
    public init(parsing text: Substring, line: Int = 0, tag: String = "") throws(HLSParseError) {
        self.line = line
        self.tag = tag
        attributes = []
        let u = text.utf8
        var i = u.startIndex
        func fail(_ why: String) -> HLSParseError { HLSParseError(line: line, tag: tag, .badAttributeList(why)) }
        func skipSpaces() { while i < u.endIndex, u[i] == 0x20 || u[i] == 0x09 { i = u.index(after: i) } }
        while true {
            skipSpaces()
            guard i < u.endIndex else { break }
            let nameStart = i
            while i < u.endIndex, u[i] != UInt8(ascii: "="), u[i] != UInt8(ascii: ",") { i = u.index(after: i) }
            let name = String(text[nameStart..<i])
            guard i < u.endIndex, u[i] == UInt8(ascii: "=") else { throw fail("'\(name)' has no '='") }
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isNameByte) else { throw fail("'\(name)' is not an attribute name") }
            guard !attributes.contains(where: { $0.name == name }) else { throw fail("\(name) appears twice") }
            i = u.index(after: i)
            let attribute: Attribute
            if i < u.endIndex, u[i] == UInt8(ascii: "\"") {
                let start = u.index(after: i)
                guard let close = u[start...].firstIndex(of: UInt8(ascii: "\"")) else { throw fail("\(name) has an unterminated quoted string") }
                attribute = Attribute(name: name, value: String(text[start..<close]), isQuoted: true, valueRange: start..<close)
                i = u.index(after: close)
                skipSpaces()
                if i < u.endIndex, u[i] != UInt8(ascii: ",") { throw fail("text after the quoted value of \(name)") }
            } else {
                let start = i
                while i < u.endIndex, u[i] != UInt8(ascii: ",") { i = u.index(after: i) }
                var end = i
                while end > start, u[u.index(before: end)] == 0x20 { end = u.index(before: end) }
                let value = text[start..<end]
                guard !value.isEmpty else { throw fail("\(name) has no value") }
                guard !value.utf8.contains(UInt8(ascii: "\"")) else { throw fail("\(name) has a stray quote") }
                attribute = Attribute(name: name, value: String(value), isQuoted: false, valueRange: start..<end)
            }
            attributes.append(attribute)
            if i < u.endIndex { i = u.index(after: i) }  // the comma
        }
    }

    static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
    }

    public subscript(_ name: String) -> Attribute? { attributes.first { $0.name == name } }

    func bad(_ a: Attribute, _ expected: String) -> HLSParseError {
        HLSParseError(line: line, tag: tag, .badAttribute(name: a.name, value: a.value, expected: expected))
    }

    /// The value of a quoted-string (or an unquoted one) attribute.
    public func string(_ name: String) -> String? { self[name]?.value }

    /// An enumerated-string, upper-cased (`YES`, `AES-128`); quotes tolerated.
    public func enumerated(_ name: String) -> String? { self[name]?.value.uppercased() }

    /// `YES`/`NO` (an enumerated-string); anything else is an error.
    public func flag(_ name: String) throws(HLSParseError) -> Bool? {
        guard let a = self[name] else { return nil }
        switch a.value.uppercased() {
        case "YES": return true
        case "NO": return false
        default: throw bad(a, "YES or NO")
        }
    }

    /// A decimal-integer (§4.2: 0 to 2^64-1; vcache takes up to 2^63-1).
    public func integer(_ name: String) throws(HLSParseError) -> Int? {
        guard let a = self[name] else { return nil }
        guard let n = Self.decimalInteger(a.value) else { throw bad(a, "decimal-integer below 2^63") }
        return n
    }

    /// A decimal-floating-point (non-negative, finite).
    public func decimal(_ name: String) throws(HLSParseError) -> Double? {
        guard let a = self[name] else { return nil }
        guard let d = Self.decimalFloat(a.value) else { throw bad(a, "decimal-floating-point") }
        return d
    }

    /// A hexadecimal-sequence (`0x` then hex digits), as written.
    public func hex(_ name: String) throws(HLSParseError) -> String? {
        guard let a = self[name] else { return nil }
        let v = a.value.utf8
        guard v.count > 2, v.starts(with: "0x".utf8) || v.starts(with: "0X".utf8),
              v.dropFirst(2).allSatisfy(Self.isHexByte) else { throw bad(a, "hexadecimal-sequence") }
        return a.value
    }

    /// A decimal-resolution (`<width>x<height>`).
    public func resolution(_ name: String) throws(HLSParseError) -> HLSMasterPlaylist.Resolution? {
        guard let a = self[name] else { return nil }
        let parts = a.value.split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Self.decimalInteger(parts[0]), let h = Self.decimalInteger(parts[1]) else {
            throw bad(a, "decimal-resolution")
        }
        return HLSMasterPlaylist.Resolution(width: w, height: h)
    }

    /// A value that must be there (§4.3: the tag's REQUIRED attributes).
    public func required<T>(_ value: T?, _ name: String) throws(HLSParseError) -> T {
        guard let value else { throw HLSParseError(line: line, tag: tag, .missingAttribute(name)) }
        return value
    }

    static func isHexByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
    }

    /// Digits only, at most Int.max (no sign, no spaces).
    static func decimalInteger<S: StringProtocol>(_ s: S) -> Int? {
        guard !s.isEmpty, s.utf8.count <= 20, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(s)
    }

    /// Digits with at most one '.', finite; no sign, no exponent.
    static func decimalFloat<S: StringProtocol>(_ s: S) -> Double? {
        let dots = s.utf8.filter { $0 == UInt8(ascii: ".") }.count
        guard !s.isEmpty, dots <= 1, s.utf8.contains(where: { $0 >= 0x30 && $0 <= 0x39 }),
              s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }),
              let d = Double(String(s)), d.isFinite else { return nil }
        return d
    }
}
