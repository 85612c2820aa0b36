/// The parts of an HTTP response head that vcache acts on.
public struct ResponseHead: Equatable, Sendable {
    public var status: Int
    public var reason: String
    public var headers: [(String, String)]
    /// The URL after redirects.
    public var effectiveURL: String
    /// The status line's protocol: `HTTP/1.1`, `HTTP/1.0`, `HTTP/2`...
    public var version = "HTTP/1.1"

    public init(status: Int, reason: String, headers: [(String, String)], effectiveURL: String) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.effectiveURL = effectiveURL
    }

    public static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.effectiveURL == b.effectiveURL && a.headers.elementsEqual(b.headers, by: { $0 == $1 })
    }

    /// The last value of a header, matched case-insensitively.
    public func header(_ name: String) -> String? {
        headers.last { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// nil when absent or not a length (a negative number is not one).
    public var contentLength: Int64? { header("Content-Length").flatMap(ContentRange.digits) }
    public var contentRange: ContentRange? { header("Content-Range").flatMap(ContentRange.init) }
    public var etag: String? { header("ETag") }
    public var lastModified: String? { header("Last-Modified") }
    public var contentType: String? { header("Content-Type") }

    /// How the end of the body is known (RFC 9112 §6.3): a chunked body ends with its last chunk,
    /// one with a Content-Length after that many bytes, an HTTP/2 or HTTP/3 stream with its
    /// END_STREAM; an HTTP/1 body with neither header ends only where the origin closes the
    /// connection, so a cut looks exactly like its end (rule 8).
    public enum BodyEnd: Equatable, Sendable { case length, chunked, stream, connectionClose }

    public var bodyEnd: BodyEnd {
        if !version.hasPrefix("HTTP/1") && !version.hasPrefix("HTTP/0") { return .stream }
        if let te = header("Transfer-Encoding"), te.split(separator: ",").last?.trimming(.whitespaces).lowercased() == "chunked" {
            return .chunked
        }
        return header("Content-Length") != nil ? .length : .connectionClose
    }


    /// `Retry-After` in seconds: delta-seconds, digits only (RFC 9110 §10.2.3). An HTTP-date, and
    /// anything else `Double` would take (`nan`, `inf`, `-5`, `1e308`, `0x1p3`), is treated as
    /// absent; a run of digits too long for a Double is a day (the caller caps the wait anyway).
    public var retryAfter: Double? {
        guard let v = header("Retry-After")?.trimming(.whitespaces), !v.isEmpty,
              v.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return min(Double(v) ?? 86_400, 86_400)
    }
}

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `Content-Range: bytes first-last/complete` (RFC 9110 §14.4); `complete` may be `*`.
public struct ContentRange: Equatable, Sendable {
    public var first: Int64
    public var last: Int64
    public var complete: Int64?

    public init(first: Int64, last: Int64, complete: Int64?) {
        self.first = first
        self.last = last
        self.complete = complete
    }

    public init?(_ text: String) {
        let t = text.trimming(.whitespaces)
        guard t.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = t.dropFirst(6).trimming(.whitespaces)
        let halves = spec.split(separator: "/", maxSplits: 1).map(String.init)
        guard halves.count == 2 else { return nil }
        let ends = halves[0].split(separator: "-", maxSplits: 1).map(String.init)
        // `b < Int64.max`: the range's end (b + 1) must be a number too.
        guard ends.count == 2, let a = Self.digits(ends[0]), let b = Self.digits(ends[1]), a <= b, b < Int64.max else { return nil }
        if halves[1] == "*" {
            complete = nil
        } else {
            guard let c = Self.digits(halves[1]), b < c else { return nil }
            complete = c
        }
        first = a
        last = b
    }

    public var range: ByteRange { ByteRange(first, last + 1) }

    /// A number as HTTP writes one (1*DIGIT, RFC 9110 §14.4 and §8.6): `Int64` alone would take
    /// `+296069` and `-1` too. Nil past Int64.
    static func digits<S: StringProtocol>(_ text: S) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int64(text)
    }
}
