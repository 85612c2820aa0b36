// libFuzzer target: the size and duration parsers and formatters of the command line, on arbitrary
// text. Built by `make fuzz-build` against VCacheCore. Properties: a parsed size or duration is
// never negative and a duration never past the maximum; a byte count written as digits parses
// back to itself; a formatted size (its space removed) and a formatted duration parse back within
// their rounding; Duration's seconds and milliseconds agree.
import Foundation
import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUnits(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    let text = input.line(0)
    if let n = Units.parseSize(text) {
        precondition(n >= 0, "size \(n) from '\(text)'")
        _ = Units.formatSize(n)
    }
    if let d = Units.parseDuration(text) {
        precondition(d >= 0 && d <= Units.maxDuration && d.isFinite, "duration \(d) from '\(text)'")
        checkDuration(d)
    }
    // Below 1 PiB: formatSize writes PiB past it, a unit the command line does not take (sizes
    // of a cache stop well before), and past 2^53 a Double (what parseSize reads into) loses integers.
    let n = input.number(1, in: 0...((1 << 50) - 1))
    precondition(Units.parseSize(String(n)) == n, "\(n) does not parse back")
    precondition(Units.parseSize("\(n)B") == n && Units.parseSize(" \(n) ") == n)
    let shown = Units.formatSize(n)
    guard let back = Units.parseSize(shown.replacingOccurrences(of: " ", with: "")) else { preconditionFailure("'\(shown)' does not parse") }
    // One decimal (no decimal from 100 up): off by at most half the last digit shown.
    let unit = shown.hasSuffix(" B") ? 1.0 : pow1024((["KiB", "MiB", "GiB", "TiB"].firstIndex { shown.hasSuffix($0) } ?? 4) + 1)
    let value = Double(n) / unit
    let step = value >= 100 ? 1.0 : 0.1
    precondition(abs(Double(back) - Double(n)) <= (step / 2 + 1e-9) * unit + 1, "\(n) shown as '\(shown)' parses to \(back)")
    checkDuration(Double(input.number(2, in: 0...Int64(Units.maxDuration) * 1000)) / 1000)
    return 0
}

private func pow1024(_ k: Int) -> Double { (0..<k).reduce(1.0) { a, _ in a * 1024 } }

private func checkDuration(_ d: Double) {
    let shown = Units.formatDuration(d)
    guard let back = Units.parseDuration(shown) else { preconditionFailure("'\(shown)' (\(d) s) does not parse") }
    // Shown to a tenth below 10 s, to the second below an hour, to the minute below a day, to the hour after.
    let step: Double = d < 9.95 ? 0.1 : d < 3599.5 ? 1 : d < 86399.5 ? 60 : 3600
    precondition(abs(back - d) <= step + 1e-6, "\(d) s shown as '\(shown)' parses to \(back)")
    let duration = Duration.milliseconds(Int64(d * 1000))
    precondition(abs(duration.inSeconds - Double(Int64(d * 1000)) / 1000) < 1e-6 && duration.inMilliseconds == Int64(d * 1000))
}
