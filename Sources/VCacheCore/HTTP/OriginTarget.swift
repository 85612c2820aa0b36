import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The host and port libcurl will actually contact for a URL, read by libcurl's own URL parser
/// (`curl_url`), so an allow-list is checked on exactly what the transfer uses, never on another
/// parser's idea of the URL (Foundation and libcurl disagree on userinfo, NUL bytes and more).
public struct OriginTarget: Equatable, Sendable, CustomStringConvertible {
    /// Lower-cased; an IPv6 literal without brackets, its zone after `%` (`fe80::1%eth0`); a
    /// trailing dot removed.
    public var host: String
    public var port: Int

    /// An IP literal rather than a name: IPv6 holds a colon; IPv4 ends in a number (WHATWG URL's
    /// "ends in a number": `127.0.0.1`, and forms this libcurl already rewrites to it, such as
    /// `0x7f.0.0.1` or `2130706433`, which another may not).
    public var isAddress: Bool {
        if host.contains(":") { return true }
        let last = host.split(separator: ".").last ?? Substring(host)
        if !last.isEmpty && last.allSatisfy({ $0.isASCII && $0.isNumber }) { return true }
        let hex = last.lowercased()
        return hex.hasPrefix("0x") && hex.dropFirst(2).allSatisfy { $0.isHexDigit }
    }

    public init(host: String, port: Int) {
        self.host = OriginTarget.canonicalHost(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static func canonicalHost(_ h: String) -> String {
        var host = h.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host.removeLast() }
        return host
    }

    /// Why `url` must never reach libcurl as it is: a control character (NUL, CR, LF, ...) or a
    /// space. libcurl reads a C string, so a NUL would end the URL it contacts early. Nil when clean.
    public static func controlProblem(_ url: String) -> String? {
        for u in url.unicodeScalars where u.value < 0x21 || (0x7F...0x9F).contains(u.value) {
            return String(cFormat: "contains the character U+%04X, which a URL must not hold raw", u.value)
        }
        return nil
    }

    /// `url` with an internationalised host name converted to its ASCII (punycode) form, as
    /// libcurl will contact it; `url` itself when there is nothing to convert or it cannot be.
    public static func asciiHost(_ url: String) -> String {
        guard url.unicodeScalars.contains(where: { $0.value > 0x7F }), controlProblem(url) == nil, let h = curl_url() else { return url }
        defer { curl_url_cleanup(h) }
        guard curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK else { return url }
        var host: UnsafeMutablePointer<CChar>?
        // CURLU_PUNYCODE: libidn2 reads the name in the locale's encoding, so the process must run
        // with a UTF-8 LC_CTYPE (the vcache executable sets C.UTF-8 at start).
        guard curl_url_get(h, CURLUPART_HOST, &host, 1 << 12) == CURLUE_OK, let host else { return url }
        defer { curl_free(host) }
        guard curl_url_set(h, CURLUPART_HOST, host, 0) == CURLUE_OK else { return url }
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(h, CURLUPART_URL, &out, 0) == CURLUE_OK, let out else { return url }
        defer { curl_free(out) }
        return String(cString: out)
    }

    /// What libcurl would connect to for `url`, or nil when it would refuse the URL.
    public static func of(_ url: String) -> OriginTarget? {
        guard controlProblem(url) == nil, let h = curl_url() else { return nil }
        defer { curl_url_cleanup(h) }
        guard curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        func part(_ p: CURLUPart, _ flags: UInt32) -> String? {
            var out: UnsafeMutablePointer<CChar>?
            guard curl_url_get(h, p, &out, flags) == CURLUE_OK, let out else { return nil }
            defer { curl_free(out) }
            return String(cString: out)
        }
        // Credentials that decode to control characters (`%00`) are refused too: libcurl would
        // fail on them later, after the check; better a clear refusal now.
        for p in [CURLUPART_USER, CURLUPART_PASSWORD] where part(p, 0) != nil {
            guard let v = part(p, 64), controlProblem(v.replacing(" ", with: "_")) == nil else { return nil }  // 64: CURLU_URLDECODE
        }
        guard let host = part(CURLUPART_HOST, 0), !host.isEmpty,
              let port = part(CURLUPART_PORT, 1).flatMap({ Int($0) }) else { return nil }  // 1: CURLU_DEFAULT_PORT
        // An IPv6 zone (`[fe80::1%25eth0]`) is part of the host: libcurl connects through that
        // interface, and a link-local address on another link is another machine.
        guard let zone = part(CURLUPART_ZONEID, 0) else { return OriginTarget(host: host, port: port) }
        return OriginTarget(host: OriginTarget.canonicalHost(host) + "%" + zone, port: port)
    }
}

/// `--allow-host HOST[:PORT]`: the origins a proxy reachable beyond loopback may contact.
public struct AllowedOrigins: Sendable, Equatable {
    /// Host and, when given, the one port allowed for it (nil: any port of that host).
    public var rules: [(host: String, port: Int?)] {
        get { entries.map { ($0.host, $0.port) } }
        set { entries = newValue.map { Rule(host: OriginTarget.canonicalHost($0.host), port: $0.port) } }
    }
    private struct Rule: Equatable, Sendable { var host: String; var port: Int? }
    private var entries: [Rule] = []

    public init() {}

    /// Parses `HOST`, `HOST:PORT`, `[V6]`, `[V6]:PORT`, and `*.DOMAIN[:PORT]` (every name under
    /// DOMAIN, not DOMAIN itself: a CDN's edges); nil when malformed.
    public static func rule(_ text: String) -> (host: String, port: Int?)? {
        let t = text.trimming(.whitespaces)
        guard !t.isEmpty, OriginTarget.controlProblem(t) == nil, !t.contains("/"), !t.contains("@") else { return nil }
        // `*` only as the whole first label, before a domain of at least one label.
        if t.contains("*") {
            guard t.hasPrefix("*."), !t.dropFirst().contains("*"), let r = rule(String(t.dropFirst(2))),
                  !r.host.isEmpty, !r.host.hasPrefix("."), !OriginTarget(host: r.host, port: 0).isAddress else { return nil }
            return ("*." + r.host, r.port)
        }
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]") else { return nil }
            let host = String(t[t.index(after: t.startIndex)..<close])
            let rest = t[t.index(after: close)...]
            if rest.isEmpty { return (host, nil) }
            guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()), (1...65535).contains(p) else { return nil }
            return (host, p)
        }
        let parts = t.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return (t, nil)
        case 2:
            guard !parts[0].isEmpty, let p = Int(parts[1]), (1...65535).contains(p) else { return nil }
            return (String(parts[0]), p)
        default: return (t, nil)  // an IPv6 literal without brackets
        }
    }

    public mutating func add(host: String, port: Int?) { entries.append(Rule(host: OriginTarget.canonicalHost(host), port: port)) }

    public func allows(_ target: OriginTarget) -> Bool {
        entries.contains { rule in
            guard rule.port == nil || rule.port == target.port else { return false }
            guard rule.host.hasPrefix("*.") else { return rule.host == target.host }
            // A name under the domain; never an address (`*.0.0.1` is no way to allow 127.0.0.1).
            let suffix = rule.host.dropFirst()
            return target.host.hasSuffix(suffix) && target.host.count > suffix.count && !target.isAddress
        }
    }

    public static func == (a: AllowedOrigins, b: AllowedOrigins) -> Bool { a.entries == b.entries }
}
