#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sizes and durations as the command line writes them (Docs/cli.md).
public enum Units {
    /// `512K`, `2M`, `1.5G`, `1T` are binary (KiB, MiB, ...); `2KB`, `2MB` are decimal; a bare number
    /// (optionally with `B`) is bytes. `KiB`/`MiB` spellings are binary too. Case-insensitive.
    public static func parseSize(_ text: String) -> Int64? {
        let s = text.trimming(.whitespaces)
        guard !s.isEmpty else { return nil }
        var numberEnd = s.startIndex
        while numberEnd < s.endIndex, s[numberEnd].isNumber || s[numberEnd] == "." { numberEnd = s.index(after: numberEnd) }
        let numberText = String(s[..<numberEnd])
        let suffix = s[numberEnd...].lowercased()
        guard !numberText.isEmpty, numberText.filter({ $0 == "." }).count <= 1, let value = Double(numberText) else { return nil }
        let multiplier: Double
        switch suffix {
        case "", "b": multiplier = 1
        case "k", "kib": multiplier = 1024
        case "m", "mib": multiplier = 1024 * 1024
        case "g", "gib": multiplier = 1024 * 1024 * 1024
        case "t", "tib": multiplier = 1024 * 1024 * 1024 * 1024
        case "kb": multiplier = 1e3
        case "mb": multiplier = 1e6
        case "gb": multiplier = 1e9
        case "tb": multiplier = 1e12
        default: return nil
        }
        let bytes = (value * multiplier).rounded(.down)
        guard bytes.isFinite, bytes >= 0, bytes < 9.0e18 else { return nil }
        return Int64(bytes)
    }

    /// The longest duration accepted (ten years): longer ones would overflow the clocks they set.
    public static let maxDuration: Double = 3650 * 86400
    public static let maxDurationText = "3650d"

    /// `90s`, `30m`, `12h`, `7d`, `2w`, `500ms`, or a bare number of seconds; `1h30m` combines
    /// (each unit once). nil for anything malformed (a space, `1h1h`), longer than `maxDuration`,
    /// or more than 0 but shorter than a millisecond (no clock vcache sets counts finer).
    public static func parseDuration(_ text: String) -> Double? {
        guard let d = parseAnyDuration(text), d <= maxDuration, d == 0 || d >= 0.001 else { return nil }
        return d
    }

    private static func parseAnyDuration(_ text: String) -> Double? {
        let s = text.lowercased()
        guard !s.isEmpty else { return nil }
        // A bare number is decimal digits with at most one point: `Double(_:)` alone would also take
        // `0x10` (16), `1e3`, `-0` and `inf`, none of which the command line documents.
        if s.allSatisfy({ ("0"..."9").contains($0) || $0 == "." }) {
            guard let plain = Double(s), plain.isFinite else { return nil }
            return plain
        }
        var total = 0.0
        var rest = Substring(s)
        var units = Set<Substring>()
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { $0.isLetter }
            rest = rest.dropFirst(unit.count)
            guard units.insert(unit).inserted else { return nil }
            switch unit {
            case "ms": total += value / 1000
            case "s": total += value
            case "m": total += value * 60
            case "h": total += value * 3600
            case "d": total += value * 86400
            case "w": total += value * 7 * 86400
            default: return nil
            }
        }
        return total.isFinite ? total : nil
    }

    /// `1.5 MiB`, `512 B`: binary units, one decimal above KiB.
    public static func formatSize(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(bytes)
        var i = 0
        while abs(value) >= 1024 && i < units.count - 1 { value /= 1024; i += 1 }
        if i == 0 { return "\(bytes) B" }
        // What would show as 1024 of a unit (1,048,575 B: "1024 KiB") is 1.0 of the next.
        // (Never into PiB from below it: the command line takes sizes up to TiB.)
        if abs(value) >= 1023.5 && i < units.count - 2 { value /= 1024; i += 1 }
        return String(cFormat: value >= 100 ? "%.0f " : "%.1f ", value) + units[i]
    }

    /// `0.4s`, `12s`, `3m05s`, `2h10m`.
    public static func formatDuration(_ seconds: Double) -> String {
        guard !seconds.isNaN else { return "?" }
        if seconds < 10 { return String(cFormat: "%.1fs", max(0, seconds)) }
        // Past 10^6 days (an ETA from a length near 2^63) the figure says nothing more.
        guard let s = Checked.int(seconds.rounded()), s < 86_400 * 1_000_000 else { return ">1000000d" }
        if s < 60 { return "\(s)s" }
        if s < 3600 { return String(cFormat: "%ldm%02lds", s / 60, s % 60) }
        if s < 86400 { return String(cFormat: "%ldh%02ldm", s / 3600, (s % 3600) / 60) }
        return String(cFormat: "%ldd%02ldh", s / 86400, (s % 86400) / 3600)
    }
}
