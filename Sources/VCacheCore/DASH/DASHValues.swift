#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The value types of MPD attributes, read strictly: numbers that do not fit, negative ones where
/// the schema says unsigned, NaN and infinities are errors, never a trap or a wrapped value.
enum DASHValues {
    /// An `xs:unsignedInt`/`xs:unsignedLong` that fits in Int64 (0 to 2^63-1).
    static func unsigned(_ s: String) -> Int64? {
        let t = s.trimming(.whitespaces)
        guard !t.isEmpty, t.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(t)
    }

    /// An `xs:integer` that fits in Int64 (`S@r` may be -1).
    static func integer(_ s: String) -> Int64? {
        let t = s.trimming(.whitespaces)
        if t.hasPrefix("-") { return unsigned(String(t.dropFirst())).flatMap { $0 == 0 ? 0 : -$0 } }
        return unsigned(t)
    }

    /// An `xs:duration` in seconds (`PT1H2M3.5S`, `P1DT2H`). Years and months have no fixed
    /// length: refused. Nil for anything else, negative, or not finite.
    static func duration(_ s: String) -> Double? {
        var t = Substring(s.trimming(.whitespaces))
        guard t.hasPrefix("P") else { return nil }
        t = t.dropFirst()
        var seconds = 0.0
        var inTime = false
        var number = ""
        var any = false
        for c in t {
            switch c {
            case "T":
                guard !inTime, number.isEmpty else { return nil }
                inTime = true
            case "0"..."9", ".":
                number.append(c)
            case "D", "H", "M", "S":
                guard let v = Double(number), v.isFinite, v >= 0, !number.hasPrefix(".") else { return nil }
                // Only seconds may have a fraction (ISO 8601 allows it on the last; that is enough).
                if c != "S" && number.contains(".") { return nil }
                switch (c, inTime) {
                case ("D", false): seconds += v * 86_400
                case ("H", true): seconds += v * 3_600
                case ("M", true): seconds += v * 60
                case ("S", true): seconds += v
                default: return nil
                }
                number = ""
                any = true
            default:
                return nil
            }
        }
        guard any, number.isEmpty, seconds.isFinite else { return nil }
        return seconds
    }

    /// An `xs:dateTime` (`2026-11-28T03:00:00Z`, `...00.5+01:00`; no zone: UTC) in seconds since 1970.
    static func dateTime(_ s: String) -> Double? {
        let u = Array(s.trimming(.whitespaces).utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= u.count else { return nil }
            var v = 0
            for b in u[from..<(from + count)] {
                guard b >= 0x30 && b <= 0x39 else { return nil }
                v = v * 10 + Int(b - 0x30)
            }
            return v
        }
        guard u.count >= 19, u[4] == 0x2D, u[7] == 0x2D, u[10] == 0x54, u[13] == 0x3A, u[16] == 0x3A,
              let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2), let sec = num(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61 else { return nil }
        var i = 19
        var fraction = 0.0
        if i < u.count, u[i] == 0x2E {
            var scale = 0.1
            i += 1
            let start = i
            while i < u.count, u[i] >= 0x30, u[i] <= 0x39 { fraction += Double(u[i] - 0x30) * scale; scale /= 10; i += 1 }
            guard i > start else { return nil }
        }
        var offset = 0
        if i < u.count {
            if u[i] == 0x5A, i + 1 == u.count {
                i += 1
            } else if u[i] == 0x2B || u[i] == 0x2D, i + 6 == u.count, u[i + 3] == 0x3A, let oh = num(i + 1, 2), let om = num(i + 4, 2) {
                offset = (oh * 60 + om) * 60 * (u[i] == 0x2D ? -1 : 1)
            } else {
                return nil
            }
        }
        // Days from civil (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Double(days * 86_400 + h * 3_600 + mi * 60 + sec - offset) + fraction
    }

    /// `first-last` (`@range`, `@mediaRange`, `@indexRange`), first <= last.
    static func byteSpan(_ s: String) -> MPD.ByteSpan? {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = unsigned(String(parts[0])), let b = unsigned(String(parts[1])), a <= b, b < Int64.max else { return nil }
        return MPD.ByteSpan(first: a, last: b)
    }
}
