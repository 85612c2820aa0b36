#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Text from outside (a URL, a header, a name an MPD or playlist gives) made safe for one log
/// line: every message that embeds origin-controlled text goes through `escaped` before it is
/// printed, so a CR or LF can never start a forged line (log forging).
public enum LogText {
    /// Control characters (C0, DEL, C1) and backslashes written as `\xNN`; bidirectional
    /// controls, zero-width characters and a stray byte-order mark as `\uNNNN`.
    /// `keepBackslashes`: for a whole line that may already hold text escaped by this function
    /// (a usage error quoting its argument), so it is not escaped twice; still one line.
    public static func escaped(_ text: String, keepBackslashes: Bool = false) -> String {
        // The common case: nothing to escape, the same string.
        guard text.unicodeScalars.contains(where: { needsEscape($0) && !(keepBackslashes && $0 == "\\") }) else { return text }
        var out = ""
        for u in text.unicodeScalars {
            if keepBackslashes && u == "\\" {
                out.unicodeScalars.append(u)
            } else if u.value < 0x20 || u.value == 0x7F || u == "\\" || (0x80...0x9F).contains(u.value) {
                out += String(cFormat: "\\x%02X", u.value)
            } else if needsEscape(u) {
                // Bidirectional controls would reorder what a terminal shows of the line; zero-width
                // characters and a stray byte-order mark would hide in it.
                out += String(cFormat: "\\u%04X", u.value)
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    private static func needsEscape(_ u: Unicode.Scalar) -> Bool {
        u.value < 0x20 || u.value == 0x7F || u == "\\" || (0x80...0x9F).contains(u.value)
            || (0x202A...0x202E).contains(u.value) || (0x2066...0x2069).contains(u.value) || (0x200B...0x200F).contains(u.value)
            || u.value == 0x2060 || u.value == 0xFEFF
    }
}
