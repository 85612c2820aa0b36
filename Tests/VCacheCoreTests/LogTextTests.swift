import Testing
import VCacheCore

/// `LogText.escaped`: origin text made one safe line (no CR/LF to forge a line with).
@Suite struct LogTextTests {
    @Test func controlCharactersNeverSurviveRaw() {
        #expect(LogText.escaped("http://h/\r\nX-Evil: 1/v") == "http://h/\\x0D\\x0AX-Evil: 1/v")
        #expect(LogText.escaped("a\u{0}b\u{7F}c\u{85}d\\e") == "a\\x00b\\x7Fc\\x85d\\x5Ce")
        #expect(LogText.escaped("x\u{202E}y\u{200B}z\u{FEFF}") == "x\\u202Ey\\u200Bz\\uFEFF")
        #expect(LogText.escaped("plain http://h/v/ü.mp4") == "plain http://h/v/ü.mp4")
        // A line that quotes text escaped already is not escaped twice, and still one line.
        #expect(LogText.escaped("invalid 'a\\x0Db' and \r", keepBackslashes: true) == "invalid 'a\\x0Db' and \\x0D")
    }
}
