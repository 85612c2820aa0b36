/// The one door through which a number from outside (a header, a playlist, an MP4 box, a list,
/// an option, the config, the environment) becomes an integer, and through which arithmetic on
/// such integers goes. Swift traps on a NaN or out-of-range conversion and on an overflowing
/// `+`, `-`, `*`: a hostile origin must get an error or a documented clamp, never a SIGILL.
///
/// Two families, and each caller says which it means:
/// - the checked ones return nil (the caller names the value and its source in an error);
/// - the saturating ones clamp to `Int64.max`/`Int64.min` (for figures that only report, such
///   as a sum of sizes shown by `ls`, or a limit where "more than can exist" means "no limit").
/// Docs/reliability.md lists every caller (the audit).
public enum Checked {
    /// `x` truncated toward zero, when it is finite and inside Int64; nil for NaN, an infinity
    /// or a value past either end (`Int64(x)` would trap on each).
    public static func int64(_ x: Double) -> Int64? {
        // 2^63 is exactly representable; every double below it converts.
        guard x.isFinite, x >= -9_223_372_036_854_775_808.0, x < 9_223_372_036_854_775_808.0 else { return nil }
        return Int64(x)
    }

    /// `x` truncated toward zero, when it is finite and inside Int.
    public static func int(_ x: Double) -> Int? {
        int64(x).flatMap { Int(exactly: $0) }
    }

    /// `x` clamped into `range`: NaN gives nil, an infinity or a value past an end gives that end.
    public static func clamp(_ x: Double, to range: ClosedRange<Double>) -> Double? {
        guard !x.isNaN else { return nil }
        return min(max(x, range.lowerBound), range.upperBound)
    }

    /// `x` as an Int64 clamped into `range` (NaN: nil).
    public static func int64(_ x: Double, clampedTo range: ClosedRange<Int64>) -> Int64? {
        guard !x.isNaN else { return nil }
        if x <= Double(range.lowerBound) { return range.lowerBound }
        if x >= Double(range.upperBound) { return range.upperBound }
        return min(max(Int64(x), range.lowerBound), range.upperBound)
    }

    public static func add(_ a: Int64, _ b: Int64) -> Int64? {
        let (r, overflow) = a.addingReportingOverflow(b)
        return overflow ? nil : r
    }

    public static func subtract(_ a: Int64, _ b: Int64) -> Int64? {
        let (r, overflow) = a.subtractingReportingOverflow(b)
        return overflow ? nil : r
    }

    public static func multiply(_ a: Int64, _ b: Int64) -> Int64? {
        let (r, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? nil : r
    }

    /// The sum of `values`, nil when it overflows.
    public static func sum<S: Sequence>(_ values: S) -> Int64? where S.Element == Int64 {
        var total: Int64 = 0
        for v in values {
            guard let t = add(total, v) else { return nil }
            total = t
        }
        return total
    }

    public static func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
        add(a, b) ?? (b > 0 ? .max : .min)
    }

    public static func saturatingSubtract(_ a: Int64, _ b: Int64) -> Int64 {
        subtract(a, b) ?? (b < 0 ? .max : .min)
    }

    public static func saturatingMultiply(_ a: Int64, _ b: Int64) -> Int64 {
        multiply(a, b) ?? ((a < 0) == (b < 0) ? .max : .min)
    }

    /// The sum of `values`, clamped at the ends.
    public static func saturatingSum<S: Sequence>(_ values: S) -> Int64 where S.Element == Int64 {
        values.reduce(0, saturatingAdd)
    }
}
