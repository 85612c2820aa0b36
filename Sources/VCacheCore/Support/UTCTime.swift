#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A date as UTC text, the formats vcache writes (without ISO8601DateFormatter or DateFormatter,
/// which live in full Foundation with ICU): `2026-03-01T12:00:00Z` and `20260301-120000`.
package enum UTCTime {
    private static func parts(_ date: Date) -> tm {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        return parts
    }

    private static func pad(_ n: Int32, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    /// RFC 3339 / ISO 8601 to the second, as `ISO8601DateFormatter()` writes it.
    package static func iso8601(_ date: Date) -> String {
        let p = parts(date)
        return pad(p.tm_year + 1900, 4) + "-" + pad(p.tm_mon + 1, 2) + "-" + pad(p.tm_mday, 2)
            + "T" + pad(p.tm_hour, 2) + ":" + pad(p.tm_min, 2) + ":" + pad(p.tm_sec, 2) + "Z"
    }

    /// `yyyyMMdd-HHmmss`.
    package static func compact(_ date: Date) -> String {
        let p = parts(date)
        return pad(p.tm_year + 1900, 4) + pad(p.tm_mon + 1, 2) + pad(p.tm_mday, 2)
            + "-" + pad(p.tm_hour, 2) + pad(p.tm_min, 2) + pad(p.tm_sec, 2)
    }
}
