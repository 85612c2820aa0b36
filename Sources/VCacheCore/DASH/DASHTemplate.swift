/// A SegmentTemplate `@media` or `@initialization` string, read once (ISO/IEC 23009-1
/// §5.3.9.4.4): `$RepresentationID$`, `$Number$`, `$Bandwidth$`, `$Time$`, `$SubNumber$`, each
/// but RepresentationID with an optional `%0<width>d` format tag, and `$$` for a `$`.
/// Identifiers are case-sensitive; an unknown one, an unclosed `$`, or a format tag other than
/// `%0Nd` (width 1 to 32) invalidates the template.
public struct DASHTemplate: Equatable, Sendable {
    public enum Identifier: String, Equatable, Sendable {
        case representationID = "RepresentationID", number = "Number", bandwidth = "Bandwidth", time = "Time", subNumber = "SubNumber"
    }

    public enum Part: Equatable, Sendable {
        case literal(String)
        case value(Identifier, width: Int)
    }

    public var parts: [Part]

    public static let maxWidth = 32

    public struct Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        public var template: String
        public var why: String
        public var description: String { "template '\(template)': \(why)" }
    }

    public init(_ template: String) throws(Error) {
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(template)
        while let dollar = rest.firstIndex(of: "$") {
            literal += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            guard let close = after.firstIndex(of: "$") else { throw Error(template: template, why: "a '$' is not closed") }
            let body = after[..<close]
            rest = after[after.index(after: close)...]
            if body.isEmpty {
                literal += "$"
                continue
            }
            var name = body
            var width = 1
            if let percent = body.firstIndex(of: "%") {
                name = body[..<percent]
                let tag = body[body.index(after: percent)...]
                guard tag.hasPrefix("0"), tag.hasSuffix("d"), tag.count >= 3,
                      let w = Int(tag.dropFirst().dropLast()), w >= 1, w <= Self.maxWidth else {
                    throw Error(template: template, why: "format tag '%\(tag)' is not %0<width>d with a width of 1 to \(Self.maxWidth)")
                }
                width = w
            }
            guard let id = Identifier(rawValue: String(name)) else {
                throw Error(template: template, why: "unknown identifier '$\(body)$'")
            }
            if id == .representationID && width != 1 || id == .representationID && body.contains("%") {
                throw Error(template: template, why: "$RepresentationID$ takes no format tag")
            }
            if !literal.isEmpty { parts.append(.literal(literal)); literal = "" }
            parts.append(.value(id, width: width))
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    public var identifiers: Set<Identifier> {
        Set(parts.compactMap { if case .value(let id, _) = $0 { id } else { nil } })
    }

    /// The template with its identifiers replaced; a number is zero-padded to its width.
    public func substitute(representationID: String, bandwidth: Int64, number: Int64? = nil, time: Int64? = nil) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let s): out += s
            case .value(let id, let width):
                let value: String
                switch id {
                case .representationID: out += representationID; continue
                case .bandwidth: value = String(bandwidth)
                case .number, .subNumber: value = number.map(String.init) ?? ""
                case .time: value = time.map(String.init) ?? ""
                }
                if value.count < width && !value.hasPrefix("-") { out += String(repeating: "0", count: width - value.count) }
                out += value
            }
        }
        return out
    }
}

extension DASHTemplate {
    /// A template whose one `$Number$`, `$SubNumber$` or `$Time$` is its only varying part,
    /// resolved once against `base`: every segment's URL is then the resolved text around the
    /// value, its digits put in. A run of digits (with a `-`) in a path is inert to resolution (no
    /// dot segment, slash, query, percent sign or space), which two probes confirm for this
    /// template and base; nil when they do not, or the template varies in more than one place.
    public struct Resolved: Sendable {
        let before: String
        let after: String
        let identifier: Identifier
        let width: Int

        public func url(number: Int64?, time: Int64?) -> String {
            let value = (identifier == .time ? time : number).map(String.init) ?? ""
            let pad = value.count < width && !value.hasPrefix("-") ? String(repeating: "0", count: width - value.count) : ""
            return before + pad + value + after
        }
    }

    public func resolved(representationID: String, bandwidth: Int64, against base: String) -> Resolved? {
        let varying = parts.filter { if case .value(let id, _) = $0 { id != .representationID && id != .bandwidth } else { false } }
        guard varying.count == 1, case .value(let identifier, let width) = varying[0] else { return nil }
        func path(_ digits: String) -> String {
            var out = ""
            for part in parts {
                switch part {
                case .literal(let s): out += s
                case .value(.representationID, _): out += representationID
                case .value(.bandwidth, let w):
                    let v = String(bandwidth)
                    out += (v.count < w && !v.hasPrefix("-") ? String(repeating: "0", count: w - v.count) : "") + v
                case .value: out += digits
                }
            }
            return out
        }
        let one = Array(HLSURI.resolve(path("1"), against: base).utf8), two = Array(HLSURI.resolve(path("22"), against: base).utf8)
        guard two.count == one.count + 1 else { return nil }
        var head = 0
        while head < one.count && one[head] == two[head] { head += 1 }
        guard head < one.count, one[head] == UInt8(ascii: "1"), two[head] == UInt8(ascii: "2"), two[head + 1] == UInt8(ascii: "2"),
              one[(head + 1)...] == two[(head + 2)...] else { return nil }
        return Resolved(before: String(decoding: one[..<head], as: UTF8.self), after: String(decoding: one[(head + 1)...], as: UTF8.self),
                        identifier: identifier, width: width)
    }
}
