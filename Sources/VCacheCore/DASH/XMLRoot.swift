/// The root element of an XML document as its first bytes show it, read without parsing the
/// document (recognising an MPD or a TTML file from a response's head): past a BOM, whitespace,
/// the XML declaration and comments, the first start tag.
enum XMLRoot {
    /// The root's qualified name and the text of its whole start tag; nil when the bytes do not
    /// reach the end of that tag, or do not start with one.
    static func startTag<Bytes: Collection<UInt8>>(_ firstBytes: Bytes) -> (name: Substring, tag: Substring)? {
        // Bytes that cannot begin with `<` past a BOM and whitespace (a video's box size, a TS
        // sync byte 'G') are answered without decoding 4 KiB as text, which was the largest cost
        // of serving a cached video (serve asks it of every cached head it sends).
        guard mayBeginWithTag(firstBytes.prefix(4096)) else { return nil }
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

    /// False only when the text `startTag` decodes cannot begin with `<` once a BOM and
    /// whitespace are dropped: its first scalar is neither (nor `<`), or one that begins a new
    /// character after whitespace is ASCII and not `<`. Anything it cannot tell so cheaply (a
    /// scalar that may extend the whitespace before it into one character) is left to `startTag`.
    static func mayBeginWithTag<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        var input = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        var first = true
        while true {
            switch parser.parseScalar(from: &input) {
            case .emptyInput: return true
            case .error: return !first  // U+FFFD first: no whitespace, no `<`
            case .valid(let encoded):
                let scalar = Unicode.UTF8.decode(encoded)
                if scalar == "<" { return true }
                defer { first = false }
                if scalar.properties.isWhitespace || (first && scalar == "\u{FEFF}") { continue }
                return !first && !scalar.isASCII
            }
        }
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
