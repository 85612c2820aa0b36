/// What `trimming(_:)` takes off both ends: `CharacterSet.whitespaces` (tab, the Unicode space
/// separators and U+200B) or `.whitespacesAndNewlines` (those, U+000A to U+000D, U+0085, U+2028 and U+2029).
/// FoundationEssentials, all vcache's product targets import, has no CharacterSet.
package enum TrimSet: Sendable {
    case whitespaces, whitespacesAndNewlines

    func contains(_ u: Unicode.Scalar) -> Bool {
        if u == " " || u == "\t" { return true }
        if self == .whitespacesAndNewlines && ((0x0A...0x0D).contains(u.value) || u.value == 0x85 || u.value == 0x2028 || u.value == 0x2029) {
            return true
        }
        return u.value >= 0x80 && (u.properties.generalCategory == .spaceSeparator || u.value == 0x200B)
    }
}

extension StringProtocol {
    /// Foundation's `trimmingCharacters(in:)` for the two sets vcache trims.
    package func trimming(_ set: TrimSet) -> String {
        let s = unicodeScalars
        guard let from = s.firstIndex(where: { !set.contains($0) }), let to = s.lastIndex(where: { !set.contains($0) }) else { return "" }
        return String(String.UnicodeScalarView(s[from...to]))
    }
}

extension String {
    /// Foundation's `padding(toLength:withPad: " ", startingAt: 0)`: spaces added, or the text cut,
    /// to `length` UTF-16 units (NSString's length).
    package func padded(toLength length: Int) -> String {
        let n = utf16.count
        if n < length { return self + String(repeating: " ", count: length - n) }
        if n == length { return self }
        return String(utf16.prefix(length)) ?? String(decoding: Array(utf16.prefix(length)), as: UTF16.self)
    }
}
