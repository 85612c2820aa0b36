/// A JSON object as `JSONSerialization.data(withJSONObject:options: [.sortedKeys])` writes it
/// (serve's `/status`; JSONTextTests compares the two), without Foundation's JSONSerialization,
/// which needs ICU. Values: Int, Int64, Double, String, and objects of them. Keys sort by their
/// UTF-8 bytes, which is JSONSerialization's (ICU, case-insensitive, numeric) order for the keys
/// written here: lower-case words with underscores and three-digit status codes.
package enum JSONText {
    package static func sortedObject(_ object: [String: Any]) -> String {
        var out = ""
        write(object, into: &out)
        return out
    }

    private static func write(_ v: Any, into out: inout String) {
        switch v {
        case let s as String: string(s, into: &out)
        case let i as Int: out += String(i)
        case let i as Int64: out += String(i)
        case let d as Double:
            var s = d.description
            if s.hasSuffix(".0") { s.removeLast(2) }
            out += s
        case let o as [String: Any]:
            out += "{"
            for (n, key) in o.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if n > 0 { out += "," }
                string(key, into: &out)
                out += ":"
                write(o[key]!, into: &out)
            }
            out += "}"
        case let o as [String: Int]: write(o as [String: Any], into: &out)
        default: out += "null"
        }
    }

    private static func string(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/": out += "\\/"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
    }
}
