import Testing
@testable import VCacheCore

/// Attribute lists, RFC 8216 §4.2, one line per rule.
@Suite struct HLSAttributeListTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var text: String
        /// name, value, quoted
        var expected: [Triple]
        var testDescription: String { name }
    }

    struct Triple: Equatable, Sendable {
        var name: String
        var value: String
        var quoted: Bool
        init(_ name: String, _ value: String, _ quoted: Bool) {
            self.name = name
            self.value = value
            self.quoted = quoted
        }
    }

    static let cases: [Case] = [
        Case(name: "§4.2 NAME=VALUE pairs separated by commas", text: "BANDWIDTH=1280000,AVERAGE-BANDWIDTH=1000000",
             expected: [.init("BANDWIDTH", "1280000", false), .init("AVERAGE-BANDWIDTH", "1000000", false)]),
        Case(name: "§4.2 a quoted-string may contain commas", text: "CODECS=\"avc1.4d401f,mp4a.40.2\",RESOLUTION=640x360",
             expected: [.init("CODECS", "avc1.4d401f,mp4a.40.2", true), .init("RESOLUTION", "640x360", false)]),
        Case(name: "§4.2 a quoted-string may contain '=' and spaces", text: "URI=\"k?a=1&b= 2\",IV=0x0A",
             expected: [.init("URI", "k?a=1&b= 2", true), .init("IV", "0x0A", false)]),
        Case(name: "§4.2 an empty quoted-string is a value", text: "NAME=\"\"", expected: [.init("NAME", "", true)]),
        Case(name: "§4.2 attribute order is kept", text: "Z=1,A=2,M=3",
             expected: [.init("Z", "1", false), .init("A", "2", false), .init("M", "3", false)]),
        Case(name: "leniency: spaces after a comma and a trailing comma", text: "A=1, B=\"x\",",
             expected: [.init("A", "1", false), .init("B", "x", true)]),
        Case(name: "§4.2 a signed-decimal-floating-point stays as written", text: "TIME-OFFSET=-4.5",
             expected: [.init("TIME-OFFSET", "-4.5", false)]),
    ]

    @Test(arguments: cases) func parses(_ c: Case) throws {
        let list = try HLSAttributeList(parsing: Substring(c.text))
        #expect(list.attributes.map { Triple($0.name, $0.value, $0.isQuoted) } == c.expected)
        for a in list.attributes { #expect(String(c.text[a.valueRange]) == a.value) }
    }

    @Test(arguments: [
        ("§4.2 a name needs '='", "BANDWIDTH", "'BANDWIDTH' has no '='"),
        ("§4.2 a quoted-string is closed", "URI=\"seg.ts,A=1", "URI has an unterminated quoted string"),
        ("§4.2 nothing between a closing quote and the comma", "URI=\"a\"b,A=1", "text after the quoted value of URI"),
        ("§4.2 a name occurs at most once", "A=1,A=2", "A appears twice"),
        ("§4.2 a name is [A-Z0-9-]", "A B=1", "'A B' is not an attribute name"),
        ("§4.2 a value is not empty", "A=,B=1", "A has no value"),
        ("§4.2 an unquoted value holds no quote", "A=x\"y", "A has a stray quote"),
    ] as [(String, String, String)])
    func refuses(_ rule: String, _ text: String, _ why: String) {
        #expect(throws: HLSParseError(line: 7, tag: "EXT-X-T", .badAttributeList(why)), "\(rule)") {
            try HLSAttributeList(parsing: Substring(text), line: 7, tag: "EXT-X-T")
        }
    }

    @Test func typedValuesFollowTheirTypes() throws {
        let a = try HLSAttributeList(parsing: "N=42,F=29.970,R=1920x1080,H=0x0123456789abcdefABCDEF0123456789,D=YES,E=aes-128,S=\"x\"")
        #expect(try a.integer("N") == 42)
        #expect(try a.decimal("F") == 29.97)
        #expect(try a.resolution("R") == HLSMasterPlaylist.Resolution(width: 1920, height: 1080))
        #expect(try a.hex("H") == "0x0123456789abcdefABCDEF0123456789")
        #expect(try a.flag("D") == true)
        #expect(a.enumerated("E") == "AES-128")
        #expect(a.string("S") == "x")
        #expect(try a.integer("MISSING") == nil)
    }

    @Test(arguments: [
        ("§4.2 decimal-integer: digits only", "N=-1", "N", "decimal-integer below 2^63"),
        ("§4.2 decimal-integer: 2^64 does not fit", "N=18446744073709551616", "N", "decimal-integer below 2^63"),
        ("§4.2 decimal-integer: 2^63 is refused, not wrapped", "N=9223372036854775808", "N", "decimal-integer below 2^63"),
        ("§4.2 decimal-floating-point: no exponent", "F=1e400", "F", "decimal-floating-point"),
        ("§4.2 decimal-resolution: <w>x<h>", "R=1920*1080", "R", "decimal-resolution"),
        ("§4.2 hexadecimal-sequence: 0x and hex digits", "H=0xZZ", "H", "hexadecimal-sequence"),
        ("§4.3.4.1 YES or NO", "D=maybe", "D", "YES or NO"),
    ] as [(String, String, String, String)])
    func refusesBadTypedValues(_ rule: String, _ text: String, _ name: String, _ expected: String) throws {
        let a = try HLSAttributeList(parsing: Substring(text), line: 3, tag: "T")
        let value = String(text.split(separator: "=", maxSplits: 1)[1])
        let error = HLSParseError(line: 3, tag: "T", .badAttribute(name: name, value: value, expected: expected))
        #expect(throws: error, "\(rule)") {
            _ = try a.integer("N")
            _ = try a.decimal("F")
            _ = try a.resolution("R")
            _ = try a.hex("H")
            _ = try a.flag("D")
        }
    }
}
