#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a URL becomes an entry key: SHA-256 hex of the normalised URL after the user's key rules
/// (ExoPlayer's `CacheKeyFactory`). Signed URLs carry expiring tokens in the query, so the rules
/// can ignore the query or strip named parameters to keep one entry per video.
public struct CacheKeyRules: Equatable, Sendable {
    public var ignoreQuery: Bool
    public var stripParameters: Set<String>

    public init(ignoreQuery: Bool = false, stripParameters: Set<String> = []) {
        self.ignoreQuery = ignoreQuery
        self.stripParameters = stripParameters
    }

    /// Scheme and host lower-cased, default port and fragment dropped, query rules applied.
    public func normalise(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.absoluteString }
        parts.scheme = parts.scheme?.lowercased()
        parts.host = parts.host?.lowercased()
        if (parts.scheme == "http" && parts.port == 80) || (parts.scheme == "https" && parts.port == 443) { parts.port = nil }
        parts.fragment = nil
        if parts.path.isEmpty { parts.path = "/" }
        if ignoreQuery {
            parts.query = nil
        } else if !stripParameters.isEmpty, let items = parts.percentEncodedQueryItems {
            // Empty items (`&&`, a trailing `&`) go too: else `?token=a&` kept a bare `?`, a key
            // apart from `?token=b`'s (found by the Keys fuzzer).
            let kept = items.filter { !stripParameters.contains($0.name) && !($0.name.isEmpty && ($0.value ?? "").isEmpty) }
            parts.percentEncodedQueryItems = kept.isEmpty ? nil : kept
        }
        return parts.string ?? normaliseText(url.absoluteString)
    }

    /// The same rules on the text, for a URL URLComponents parses but will not write back once
    /// changed (a host percent-encoded as a character it refuses, `%EF%BF%BB`): the scheme
    /// lowered, the fragment dropped, the query ignored or its parameters stripped. (Such a URL
    /// was keyed as given, its query kept under `--ignore-query`: found by the Keys fuzzer.)
    func normaliseText(_ text: String) -> String {
        var s = Substring(text)
        if let hash = s.firstIndex(of: "#") { s = s[..<hash] }
        if let colon = s.firstRange(of: "://") { s = s[..<colon.lowerBound].lowercased() + s[colon.lowerBound...] }
        guard let mark = s.firstIndex(of: "?") else { return String(s) }
        let base = s[..<mark]
        if ignoreQuery { return String(base) }
        guard !stripParameters.isEmpty else { return String(s) }
        let kept = s[s.index(after: mark)...].split(separator: "&").filter { !stripParameters.contains(String($0.prefix { $0 != "=" })) }
        return kept.isEmpty ? String(base) : base + "?" + kept.joined(separator: "&")
    }

    public func key(for url: URL) -> CacheKey {
        CacheKey(stored: SHA256Digest.hash(normalise(url)))
    }

    /// The key of a URL as given: normalised when it parses, else the hash of the text itself
    /// (such a URL is refused before any request, but still has one stable key).
    /// A pure function of the rules and the text, remembered for the URLs asked last: serve
    /// works out the key of the same URL several times a request (two URL parses and a SHA-256
    /// each time, Docs/performance.md).
    public func key(for url: String) -> CacheKey {
        if let known = Self.recentKeys.known(url), known.rules == self { return known.key }
        let made = URL(string: url).map { key(for: $0) } ?? CacheKey(stored: SHA256Digest.hash(url))
        Self.recentKeys.remember((self, made), for: url)
        return made
    }

    /// The keys of the URLs asked last, with the rules each was made under.
    private static let recentKeys = RecentAnswers<(rules: CacheKeyRules, key: CacheKey)>()
}

/// One entry's key: the SHA-256 of its normalised URL in 64 lower-case hex digits, which also
/// names its folder (`entries/<first two>/<key>`). Made by `CacheKeyRules` from a URL, read back
/// from the catalog, or taken from a user's argument only when it has a key's shape, so a text
/// that is a URL, a path or a name is never used as a key by mistake.
public struct CacheKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let hex: String

    /// A key as the catalog stores it (written by this type, so not checked again).
    init(stored: String) { hex = stored }

    /// A user's text when it has a key's shape (64 lower-case hex digits), else nil.
    public init?(_ text: String) {
        guard text.utf8.count == 64, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }) else { return nil }
        hex = text
    }

    public var description: String { hex }
    public static func < (a: CacheKey, b: CacheKey) -> Bool { a.hex < b.hex }
}

/// A pause point (`testPause`) with an entry's key as its detail. (Here, not in RawFile.swift:
/// the fuzzers build RawFile without the store.)
@inline(__always) func testPause(_ name: String, _ key: CacheKey) {
    #if DEBUG
    TestSeam.pause(name, key.hex)
    #endif
}

#if DEBUG
extension TestSeam {
    static func setHook(_ name: String, key: CacheKey, _ hook: (@Sendable (String) -> Void)?) {
        setHook(name, key: key.hex, hook)
    }
}
#endif
