#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The digests a video may be checked against: those `--checksum`, a list line or the origin's
/// headers name. SHA-256 is also the one vcache keeps of every complete entry.
public enum DigestAlgorithm: String, CaseIterable, Comparable, Sendable {
    case md5, sha1, sha256, sha512

    /// The digest's size in bytes.
    public var byteCount: Int {
        switch self {
        case .md5: 16
        case .sha1: 20
        case .sha256: 32
        case .sha512: 64
        }
    }

    /// Its name as written by a user or a header: `md5`, `SHA-256`, `sha512` (case and a hyphen
    /// after `sha` ignored).
    public init?(name: String) {
        let n = name.lowercased()
        self.init(rawValue: n.hasPrefix("sha-") ? "sha" + n.dropFirst(4) : n)
    }

    public static func < (a: Self, b: Self) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// A digest the whole video must have, and where that expectation came from.
public struct ExpectedDigest: Equatable, Sendable {
    public var algorithm: DigestAlgorithm
    /// Lowercase hex, `2 * algorithm.byteCount` digits.
    public var hex: String
    public var source: Source

    public enum Source: Equatable, Sendable {
        /// `prefetch --checksum`.
        case option
        /// A `-i` list's line N (1-based).
        case listLine(Int)
        /// A header of the origin's response (`x-goog-hash`, `Repr-Digest`, `Digest`,
        /// `Content-MD5`): true of the version it came with only.
        case origin(header: String)

        /// Given by whoever runs vcache (not the origin): kept across versions.
        public var isGiven: Bool {
            if case .origin = self { return false }
            return true
        }

        /// As said in messages and stored in the catalog: `--checksum`, `list line 3`,
        /// `the origin's x-goog-hash`.
        public var description: String {
            switch self {
            case .option: "--checksum"
            case .listLine(let n): "list line \(n)"
            case .origin(let header): "the origin's \(header)"
            }
        }

        /// The inverse of `description` (a catalog's text); an unknown text is an origin's header.
        public init(description text: String) {
            if text == "--checksum" {
                self = .option
            } else if text.hasPrefix("list line "), let n = Int(text.dropFirst(10)) {
                self = .listLine(n)
            } else {
                self = .origin(header: text.hasPrefix("the origin's ") ? String(text.dropFirst(13)) : text)
            }
        }
    }

    public init(algorithm: DigestAlgorithm, hex: String, source: Source) {
        self.algorithm = algorithm
        self.hex = hex
        self.source = source
    }

    /// `ALGO=VALUE` as given to `--checksum` or on a list line: VALUE is hex, or base64 (as the
    /// header forms write it, optionally between colons as `Repr-Digest` does).
    public static func parse(_ token: String, source: Source) throws(ChecksumTokenError) -> ExpectedDigest {
        guard let eq = token.firstIndex(of: "="), eq != token.startIndex else { throw .notAChecksum(token) }
        let name = String(token[..<eq])
        guard let algorithm = DigestAlgorithm(name: name) else { throw .unknownAlgorithm(token, name: name) }
        var value = Substring(token[token.index(after: eq)...])
        if value.count >= 2, value.hasPrefix(":"), value.hasSuffix(":") { value = value.dropFirst().dropLast() }
        let hexLength = algorithm.byteCount * 2, base64Length = (algorithm.byteCount + 2) / 3 * 4
        if value.utf8.count == hexLength {
            guard let hex = Self.hex(value) else { throw .notHex(token, algorithm: algorithm) }
            return ExpectedDigest(algorithm: algorithm, hex: hex, source: source)
        }
        if value.utf8.count == base64Length {
            guard let bytes = Self.base64(value), bytes.count == algorithm.byteCount else { throw .notHex(token, algorithm: algorithm) }
            return ExpectedDigest(algorithm: algorithm, hex: SHA256Digest.hex(bytes), source: source)
        }
        throw .wrongLength(token, algorithm: algorithm, length: value.utf8.count)
    }

    /// `text` as lowercase hex, when it is hex digits only.
    static func hex<S: StringProtocol>(_ text: S) -> String? {
        guard text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }) else { return nil }
        return text.lowercased()
    }

    /// The bytes of standard or URL-safe base64 (padding required to a multiple of 4), or nil.
    static func base64<S: StringProtocol>(_ text: S) -> [UInt8]? {
        guard text.utf8.count % 4 == 0,
              text.utf8.allSatisfy({ c in (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || (0x30...0x39).contains(c)
                  || c == UInt8(ascii: "+") || c == UInt8(ascii: "/") || c == UInt8(ascii: "-") || c == UInt8(ascii: "_") || c == UInt8(ascii: "=") })
        else { return nil }
        let standard = String(text).replacing("-", with: "+").replacing("_", with: "/")
        return Data(base64Encoded: standard).map { Array($0) }
    }
}

/// Why an `ALGO=VALUE` token is not a checksum; each message names the token.
public enum ChecksumTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAChecksum(String)
    case unknownAlgorithm(String, name: String)
    case wrongLength(String, algorithm: DigestAlgorithm, length: Int)
    case notHex(String, algorithm: DigestAlgorithm)

    /// The token as shown: printable ASCII only, at most 140 characters (a list is untrusted text).
    static func shown(_ token: String) -> String {
        let printable = String(token.unicodeScalars.map { (0x20...0x7E).contains($0.value) ? Character($0) : "?" })
        return printable.count > 140 ? printable.prefix(140) + "..." : printable
    }

    public var description: String {
        switch self {
        case .notAChecksum(let t):
            "'\(Self.shown(t))' is not a checksum; give ALGO=VALUE, e.g. sha256=<64 hex digits>"
        case .unknownAlgorithm(let t, let name):
            "unknown checksum algorithm '\(Self.shown(name))' in '\(Self.shown(t))'; use md5, sha1, sha256 or sha512"
        case .wrongLength(let t, let a, let n):
            "checksum '\(Self.shown(t))' has \(n) characters after '='; \(a.rawValue) takes \(a.byteCount * 2) hex digits (or \((a.byteCount + 2) / 3 * 4) base64)"
        case .notHex(let t, let a):
            "checksum '\(Self.shown(t))' is not hex (nor base64); \(a.rawValue) takes \(a.byteCount * 2) hex digits, 0-9 and a-f"
        }
    }
}

/// A complete video whose bytes do not have a digest expected of them.
public struct ChecksumMismatch: Equatable, Sendable, CustomStringConvertible {
    public var algorithm: DigestAlgorithm
    public var expected: String
    public var computed: String
    /// Where the expectation came from (`ExpectedDigest.Source.description`).
    public var source: String
    /// The whole video was fetched once more and did not match either.
    public var refetched = false

    public init(_ check: DigestCheck) {
        algorithm = check.expected.algorithm
        expected = check.expected.hex
        computed = check.computed ?? ""
        source = check.expected.source.description
    }

    public var description: String {
        "its \(algorithm.rawValue) is \(computed), not \(expected) (expected by \(source)); its bytes were dropped"
            + (refetched ? ", also after fetching it whole once more: check the checksum, or what the origin serves" : "")
    }
}
