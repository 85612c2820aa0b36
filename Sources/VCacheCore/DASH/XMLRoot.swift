/// The root element of an XML document as its first bytes show it, read without parsing the
/// document (recognising an MPD or a TTML file from a response's head): past a BOM, whitespace,
/// the XML declaration and comments, the first start tag.
enum XMLRoot {
    /// The root's qualified name and the text of its whole start tag; nil when the bytes do not
    /// reach the end of that tag, or do not start with one.
    static func startTag<Bytes: Collection<UInt8>>(_ firstBytes: Bytes) -> (name: Substring, tag: Substring)? {
        guard mayStartWithTag(firstBytes) else { return nil }
        var head = Substring(String(decoding: firstBytes.prefix(4096), as: UTF8.self))
        if head.hasPrefix("\u{FEFF}") { head = head.dropFirst() }
        while true {
            head = head.drop { $0.isWhitespace }
            if head.hasPrefix("<?"), let end = head.firstRange(of: "?>") { head = head[end.upperBound...]; continue }
            if head.hasPrefix("<!--"), let end = head.firstRange(of: "-->") { head = head[end.upperBound...]; continue }
            break
        }
        guard head.hasPrefix("<"), let tagEnd = head.firstIndex(of: ">") else { return nil }
        let tag = head[head.index(after: head.startIndex)..<tagEnd]
        return (tag.prefix { !$0.isWhitespace && $0 != "/" }, tag)
    }

    /// False when the bytes cannot begin with a tag: past a BOM and ASCII whitespace, an ASCII
    /// byte other than `<` (a video's first box, say). Decoding them as text to find that out cost
    /// 6% of the fetch loop's time on a batch of 1 MiB video heads (Docs/performance.md). A
    /// non-ASCII byte (Unicode whitespace, say) leaves it to the decoded text, as does `<`.
    static func mayStartWithTag<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        var rest = bytes[...]
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        guard let first = rest.first(where: { !(0x09...0x0D).contains($0) && $0 != 0x20 }) else { return true }
        return first == UInt8(ascii: "<") || first >= 0x80
    }

    /// The TTML namespace (W3C TTML1/TTML2, IMSC): a raw TTML sidecar's `tt` root is in it.
    static let ttmlNamespace = "http://www.w3.org/ns/ttml"

    /// Whether the bytes are a TTML document: its root `tt` (or `prefix:tt`) naming the TTML
    /// namespace in its start tag; when `whole`, also well-formed with that root (`XMLTree`).
    static func isTTML<Bytes: Collection<UInt8>>(_ bytes: Bytes, whole: Bool) -> Bool {
        guard let (name, tag) = startTag(bytes), name == "tt" || name.hasSuffix(":tt"),
              tag.contains("\"\(ttmlNamespace)\"") || tag.contains("'\(ttmlNamespace)'") else { return false }
        guard whole else { return true }
        guard let root = try? XMLTree.parse(Array(bytes)) else { return false }
        return root.name == "tt" && root.namespace == ttmlNamespace
    }
}
