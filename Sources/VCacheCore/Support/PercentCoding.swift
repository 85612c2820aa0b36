/// Percent-encoding and -decoding of URL text, as Foundation's `addingPercentEncoding` and
/// `removingPercentEncoding` do it (PercentCodingTests compares them), without Foundation's
/// CharacterSet (FoundationEssentials has none).
package enum PercentCoding {
    /// `CharacterSet.urlPathAllowed`: ASCII letters and digits and `!$&'()*+,-./:=@_~`.
    package static let urlPathAllowed: Set<UInt8> = {
        var s = Set<UInt8>(Array("!$&'()*+,-./:=@_~".utf8))
        s.formUnion(UInt8(ascii: "a")...UInt8(ascii: "z"))
        s.formUnion(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        s.formUnion(UInt8(ascii: "0")...UInt8(ascii: "9"))
        return s
    }()

    /// Every UTF-8 byte not in `allowed` as `%XX` (upper-case hex).
    package static func encode(_ text: String, allowed: Set<UInt8>) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            if allowed.contains(b) {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `%XX` decoded; nil when a `%` is not followed by two hex digits or the bytes are not UTF-8.
    package static func decode(_ text: some StringProtocol) -> String? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let h = nibble(bytes[i + 1]), let l = nibble(bytes[i + 2]) else { return nil }
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}
