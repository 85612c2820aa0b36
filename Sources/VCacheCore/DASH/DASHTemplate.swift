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
