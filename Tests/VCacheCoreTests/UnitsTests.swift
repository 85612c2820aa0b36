import Testing
@testable import VCacheCore

@Suite struct UnitsTests {
    static let sizes: [(String, Int64)] = [
        ("512K", 524_288), ("2M", 2_097_152), ("1.5G", 1_610_612_736), ("2MB", 2_000_000),
        ("100", 100), ("100B", 100), ("1KiB", 1024), ("3kb", 3000), ("1T", 1_099_511_627_776), ("0", 0),
    ]

    @Test(arguments: sizes)
    func parsesSizes(text: String, bytes: Int64) {
        #expect(Units.parseSize(text) == bytes)
    }

    @Test func rejectsBadSizes() {
        for bad in ["", "M", "2X", "-1", "1.2.3M", "two", "1e3"] { #expect(Units.parseSize(bad) == nil, "\(bad)") }
    }

    static let durations: [(String, Double)] = [
        ("30s", 30), ("5m", 300), ("12h", 43200), ("7d", 604800), ("1h30m", 5400), ("500ms", 0.5), ("90", 90), ("2w", 1_209_600),
    ]

    @Test(arguments: durations)
    func parsesDurations(text: String, seconds: Double) {
        #expect(Units.parseDuration(text) == seconds)
    }

    /// Found by the Units fuzzer: `-0` parsed as -0.0, shown as "-0.0s", which does not parse. A
    /// bare number is now decimal digits only, so `-0` is refused like any other sign.
    @Test func zeroShowsAsAParsableDuration() {
        #expect(Units.parseDuration("0") == 0)
        #expect(Units.parseDuration("0").map { Units.formatDuration($0) } == "0.0s")
        #expect(Units.parseDuration("0.0s") == 0)
    }

    /// `Double(_:)` takes hexadecimal and exponents: `--seconds 0x10` was 16 seconds (probe M3).
    @Test func rejectsBadDurations() {
        for bad in ["", "s", "5x", "m5", "-3s", "-0", "0x10", "0x10s", "1e3", "1e308", "inf", "nan", "+5", "1.2.3", "."] {
            #expect(Units.parseDuration(bad) == nil, "\(bad)")
        }
    }

    /// Spaces, a unit given twice, and a positive duration under a millisecond were taken
    /// (`--seconds ' 5'`, `1h1h` as 2h, `0.0000000000000000000001`; hostile probe h1, F10).
    @Test func rejectsSpacesRepeatedUnitsAndDurationsUnderAMillisecond() {
        for bad in [" 5", "5 ", " 5s", "1 h", "1h1h", "1d1d1d", "30m1h30m", "0.0000000000000000000001", "0.0004", "0.0009s", "0.5ms"] {
            #expect(Units.parseDuration(bad) == nil, "'\(bad)'")
        }
        #expect(Units.parseDuration("0.001") == 0.001)
        #expect(Units.parseDuration("1ms") == 0.001)
        #expect(Units.parseDuration("1h30m10s") == 5410)
    }

    @Test func formatsSizesInBinaryUnits() {
        #expect(Units.formatSize(512) == "512 B")
        #expect(Units.formatSize(1536) == "1.5 KiB")
        #expect(Units.formatSize(64 << 20) == "64.0 MiB")
        #expect(Units.formatSize(1_048_575) == "1.0 MiB")  // not "1024 KiB"
        #expect(Units.formatSize(1_048_064) == "1.0 MiB")
        #expect(Units.formatSize(1_048_063) == "1023 KiB")
        #expect(Units.formatSize(1_047_000) == "1022 KiB")
        #expect(Units.formatSize((1 << 50) - 1) == "1024 TiB")  // not "1.0 PiB", which no option takes
        #expect(Units.formatSize(300 << 20) == "300 MiB")
    }
}
