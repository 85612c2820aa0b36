/// A password in a URL is never shown: `redacted(_:)` rewrites every password in a text (a log
/// line, a JSON line, an error) as `***`, as curl and rclone do; the user name stays.
///
/// It reads URLs as libcurl does and then some, because what is printed is often a URL libcurl
/// refused: a scheme of any case followed by any number of `/` or `\` (`http:/a:pw@h`,
/// `http:\\a:pw@h`, `HTTP:a:pw@h`, which libcurl reads as user `http`, password `a:pw`), no
/// scheme at all (`a:pw@h`), the delimiters percent-encoded (`http%3A%2F%2Fa%3Apw%40h`), and a
/// password that holds an `@`, a space or a `/` of its own. Over-redacting a line that only looks
/// like one is the price of never printing a password.
///
/// Invariant: for every authority found (after a scheme, or at the start of a token), everything
/// between the first `:` of its user information and the last `@` that ends it is replaced.
public enum PasswordRedaction {
    public static func redacted(_ text: String) -> String {
        // Fast path: no `@`, raw or encoded, means no user information.
        guard text.utf8.contains(UInt8(ascii: "@")) || text.utf8.contains(UInt8(ascii: "%")) else { return text }
        let bytes = Array(text.utf8)
        let units = Unit.split(bytes)
        guard units.contains(where: { $0.char == UInt8(ascii: "@") }) else { return text }
        var spans: [Range<Int>] = []  // in unit indices: the password's units
        for start in units.indices {
            if let s = schemeAuthority(units, at: start), let p = password(units, authority: s.start, spaces: s.slashes > 0) { spans.append(p) }
            if isTokenStart(units, start) {
                // A scheme-relative URL (`//a:pw@h`, `\\a:pw@h`): its authority follows the slashes.
                var authority = start
                while authority < units.count, units[authority].char == UInt8(ascii: "/") || units[authority].char == UInt8(ascii: "\\") { authority += 1 }
                if let p = password(units, authority: authority, spaces: false) { spans.append(p) }
            }
        }
        guard !spans.isEmpty else { return text }
        spans.sort { $0.lowerBound < $1.lowerBound }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var u = 0
        for span in spans {
            if span.upperBound <= u { continue }
            let from = max(span.lowerBound, u)
            for k in u..<from { out += units[k].bytes(in: bytes) }
            if from == span.lowerBound { out += Array("***".utf8) }
            u = span.upperBound
        }
        for k in u..<units.count { out += units[k].bytes(in: bytes) }
        return String(decoding: out, as: UTF8.self)
    }

    /// One character as a URL parser sees it: a byte, or a `%XX` that encodes a delimiter.
    struct Unit {
        var char: UInt8
        var offset: Int
        var length: Int

        func bytes(in all: [UInt8]) -> ArraySlice<UInt8> { all[offset..<offset + length] }

        static func split(_ b: [UInt8]) -> [Unit] {
            var units: [Unit] = []
            units.reserveCapacity(b.count)
            var i = 0
            while i < b.count {
                if b[i] == UInt8(ascii: "%"), i + 2 < b.count, let hi = hex(b[i + 1]), let lo = hex(b[i + 2]),
                   "/\\:@".utf8.contains(hi << 4 | lo) {
                    units.append(Unit(char: hi << 4 | lo, offset: i, length: 3))
                    i += 3
                } else {
                    units.append(Unit(char: b[i], offset: i, length: 1))
                    i += 1
                }
            }
            return units
        }

        static func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }

    private static func isSchemeChar(_ c: UInt8) -> Bool {
        isAlpha(c) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
    }

    private static func isAlpha(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == 0x0B || c == 0x0C }

    /// Where a token may begin: the start, or after a space or a character that quotes or
    /// introduces a value in a message or a JSON line.
    private static func isTokenStart(_ u: [Unit], _ i: Int) -> Bool {
        guard i > 0 else { return true }
        let p = u[i - 1].char
        return isSpace(p) || "'\"(<[{=,;`".utf8.contains(p)
    }

    /// `scheme:` then any number of `/` and `\` at `i`: where the authority starts, and how many
    /// slashes came before it.
    private static func schemeAuthority(_ u: [Unit], at i: Int) -> (start: Int, slashes: Int)? {
        guard isAlpha(u[i].char), u[i].length == 1, i == 0 || !isSchemeChar(u[i - 1].char) else { return nil }
        var j = i + 1
        while j < u.count, u[j].length == 1, isSchemeChar(u[j].char) { j += 1 }
        guard j < u.count, u[j].char == UInt8(ascii: ":") else { return nil }
        j += 1
        var slashes = 0
        while j < u.count, u[j].char == UInt8(ascii: "/") || u[j].char == UInt8(ascii: "\\") { j += 1; slashes += 1 }
        guard j < u.count, !isSpace(u[j].char) else { return nil }
        return (j, slashes)
    }

    /// The units of the password in the authority starting at `start`, if it has one: from after
    /// the first `:` of the user information to the last `@` before the authority ends (a `/`, the
    /// line's end, an unescaped `"`, and a space unless `spaces`). When no `@` comes before the
    /// `/` but what follows the `:` cannot be a port (`a:p/w@h`, refused by libcurl), the password
    /// runs on to the last `@` of the token.
    private static func password(_ u: [Unit], authority start: Int, spaces: Bool) -> Range<Int>? {
        var end = start
        var lastAt: Int?
        var firstColon: Int?
        func ends(_ k: Int) -> Bool {
            let c = u[k].char
            if c == 0x0A || c == 0x0D || c == UInt8(ascii: "/") { return true }
            if c == UInt8(ascii: "\"") && (k == 0 || u[k - 1].char != UInt8(ascii: "\\")) { return true }
            return !spaces && isSpace(c)
        }
        while end < u.count, !ends(end) {
            if u[end].char == UInt8(ascii: "@") { lastAt = end }
            if u[end].char == UInt8(ascii: ":") && firstColon == nil { firstColon = end }
            end += 1
        }
        if lastAt == nil, let colon = firstColon, colon > start, end < u.count, u[end].char == UInt8(ascii: "/"),
           !u[start..<end].contains(where: { $0.char == UInt8(ascii: "[") || $0.char == UInt8(ascii: "]") }) {
            let port = u[(colon + 1)..<end]
            if !port.isEmpty && !port.allSatisfy({ $0.char >= UInt8(ascii: "0") && $0.char <= UInt8(ascii: "9") }) {
                var k = end
                while k < u.count, !isSpace(u[k].char), u[k].char != UInt8(ascii: "\"") {
                    if u[k].char == UInt8(ascii: "@") { lastAt = k }
                    k += 1
                }
            }
        }
        guard let at = lastAt else { return nil }
        guard let colon = u[start..<at].firstIndex(where: { $0.char == UInt8(ascii: ":") }), colon + 1 < at else { return nil }
        return (colon + 1)..<at
    }
}
