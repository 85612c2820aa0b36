#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON document read with JSONDecoder, as the `[String: Any]` tree `JSONLines` writes
/// (serve's `/status`, read by `vcache status`): JSONSerialization is not in FoundationEssentials.
/// A number is an Int when it is one, else a Double, as JSONSerialization's NSNumbers wrote.
enum JSONValue: Decodable {
    case null, bool(Bool), int(Int), double(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    /// The tree as Any: Bool, Int, Double, String, [Any], [String: Any] or JSONNull.
    var any: Any {
        switch self {
        case .null: JSONNull()
        case .bool(let b): b
        case .int(let i): i
        case .double(let d): d
        case .string(let s): s
        case .array(let a): a.map(\.any)
        case .object(let o): o.mapValues(\.any)
        }
    }

    /// The document as an object, or nil when it is not one.
    var object: [String: Any]? {
        if case .object = self { return any as? [String: Any] }
        return nil
    }
}
