#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

// The values of the network options (addresses, hosts, rules), each parsed with its usage error.

extension ValueParser where Value == String {
    /// `--proxy [SCHEME://]HOST[:PORT]`, with a scheme libcurl speaks to proxies (empty: none).
    static var proxyURL: ValueParser {
        ValueParser(valueName: "URL") { p, option in
            if let range = p.firstRange(of: "://") {
                let scheme = p[..<range.lowerBound].lowercased()
                guard ["http", "https", "socks4", "socks4a", "socks5", "socks5h"].contains(scheme), !p[range.upperBound...].isEmpty else {
                    throw UsageError("invalid proxy '\(Console.escaped(p))' for \(option); use [http|https|socks5h://]HOST[:PORT], e.g. http://proxy.lan:3128")
                }
            }
            guard !p.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
                throw UsageError("invalid proxy '\(Console.escaped(p))' for \(option): it holds a space or a control character")
            }
            return p
        }
    }

    /// A header value given whole (`--user-agent`): no control character may end its line.
    static func headerValue(_ name: String) -> ValueParser {
        ValueParser(valueName: name) { v, option in
            guard !v.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7f }) else {
                throw UsageError("invalid value '\(Console.escaped(v))' for \(option): it holds a control character (CR, LF or NUL)")
            }
            return v
        }
    }

    /// curl's `--resolve HOST:PORT:ADDR`.
    static var resolveRule: ValueParser {
        ValueParser(valueName: "HOST:PORT:ADDR") { r, option in
            let parts = r.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count >= 3, !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port),
                  !parts[2...].joined(separator: ":").isEmpty else {
                throw UsageError("invalid value '\(r)' for \(option); use HOST:PORT:ADDR, e.g. cdn.example:443:10.0.0.5")
            }
            return r
        }
    }
}

/// A host (or IP address) and a port, as `--listen` gives them.
struct HostPort: Sendable, Equatable {
    var host: String
    var port: UInt16
}

extension ValueParser where Value == HostPort {
    /// serve's `--listen ADDR:PORT` (an IPv6 address in brackets or not).
    static var listenAddress: ValueParser {
        ValueParser(valueName: "ADDR:PORT") { l, option in
            guard let colon = l.lastIndex(of: ":"), let n = UInt16(l[l.index(after: colon)...]) else {
                throw UsageError("invalid address '\(l)' for \(option); use ADDR:PORT, e.g. 0.0.0.0:\(ServeCommand.defaultPort)")
            }
            return HostPort(host: String(String(l[..<colon]).drop { $0 == "[" || $0 == "]" }.reversed().drop { $0 == "[" || $0 == "]" }.reversed()), port: n)
        }
    }

    /// url's `--listen HOST:PORT`: where players reach serve (a host and a port that is not 0).
    static var playerAddress: ValueParser {
        ValueParser(valueName: "HOST:PORT") { l, option in
            guard let colon = l.lastIndex(of: ":"), let p = UInt16(l[l.index(after: colon)...]), p > 0, colon != l.startIndex else {
                throw UsageError("invalid address '\(l)' for \(option); use HOST:PORT, e.g. 192.168.1.20:8089")
            }
            return HostPort(host: String(l[..<colon]), port: p)
        }
    }
}

extension ValueParser where Value == Set<String> {
    /// `--metrics-from`: one IP address, as the server reports clients (with an IPv4 one's mapped IPv6 twin).
    static var clientAddress: ValueParser {
        ValueParser(valueName: "ADDR") { a, option in
            guard let canonical = ServeCommand.canonicalAddress(a) else {
                throw UsageError("invalid address '\(Console.escaped(a))' for \(option); give one IP address (no names, no ranges), e.g. 192.168.1.5")
            }
            return canonical
        }
    }
}

/// An origin host serve may contact, and its port when one is given.
struct OriginRule: Sendable, Equatable {
    var host: String
    var port: Int?
}

extension ValueParser where Value == OriginRule {
    /// `--allow-host HOST[:PORT]`.
    static var originRule: ValueParser {
        ValueParser(valueName: "HOST[:PORT]") { h, option in
            guard let rule = AllowedOrigins.rule(h) else {
                throw UsageError("invalid host '\(Console.escaped(h))' for \(option); use HOST, HOST:PORT or *.DOMAIN (a name, not an address, after '*.'), e.g. cdn.example.com:443")
            }
            return OriginRule(host: rule.host, port: rule.port)
        }
    }
}
