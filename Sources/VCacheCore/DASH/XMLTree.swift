#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CLibXML2

/// One element of an XML document read by `XMLTree.parse`: its namespace-qualified name, its
/// attributes (namespace declarations left out) and children in document order, and its text
/// (the character data directly inside it, CDATA included, concatenated).
public struct XMLElement: Equatable, Sendable {
    /// The local name (`MPD`, `BaseURL`), without any prefix.
    public var name: String
    /// The namespace URI, or nil for none.
    public var namespace: String?
    public var attributes: [Attribute]
    public var children: [XMLElement]
    public var text: String

    public struct Attribute: Equatable, Sendable {
        public var name: String
        public var namespace: String?
        public var value: String
    }

    /// The value of the unqualified attribute `name` (DASH attributes have no namespace).
    public subscript(attribute name: String) -> String? {
        attributes.first { $0.name == name && $0.namespace == nil }?.value
    }

    /// The children named `name` in the parent's namespace.
    public func children(_ name: String) -> [XMLElement] {
        children.filter { $0.name == name && $0.namespace == namespace }
    }

    public func child(_ name: String) -> XMLElement? {
        children.first { $0.name == name && $0.namespace == namespace }
    }
}

/// Reads an XML document into `XMLElement`s with the system libxml2 (its `xmlTextReader`), the
/// only type that imports it (Docs/dash.md says why not FoundationXML). Hostile input is
/// refused, never expanded or fetched: a DTD or entity declaration anywhere, more bytes, depth,
/// elements or attributes than `Limits` allows (each an error naming the limit), and any
/// well-formedness error (libxml2's recovery mode is off). The network is never used
/// (`XML_PARSE_NONET`), and entities are not substituted (no `XML_PARSE_NOENT`).
public enum XMLTree {
    /// The libxml2 this binary was built against (its headers' `LIBXML_DOTTED_VERSION`: the
    /// runtime's version variable is a per-thread macro in some releases and not in others), for
    /// `--version`.
    public static var libraryVersion: String { LIBXML_DOTTED_VERSION }

    public struct Limits: Equatable, Sendable {
        public var maxBytes = 16 << 20
        public var maxDepth = 32
        public var maxElements = 500_000
        public var maxAttributes = 128
        /// One text node, comment, CDATA section, processing instruction or start tag: libxml2's
        /// reader joins a long one piece by piece (a 10 MB comment took it 20 s, and is past its
        /// own cap without XML_PARSE_HUGE); an MPD's longest is a few KB.
        public var maxTextBytes = 1 << 20
        public init() {}
    }

    public enum Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        case tooLarge(bytes: Int, limit: Int)
        case tooDeep(limit: Int)
        case tooManyElements(limit: Int)
        case tooManyAttributes(element: String, limit: Int)
        case textTooLong(limit: Int)
        case doctype
        case malformed(line: Int, message: String)
        case empty

        public var description: String {
            switch self {
            case .tooLarge(let bytes, let limit): "the document is \(bytes) bytes, over the limit of \(limit) bytes"
            case .tooDeep(let limit): "elements are nested deeper than the limit of \(limit) levels"
            case .tooManyElements(let limit): "the document has more than the limit of \(limit) elements"
            case .tooManyAttributes(let element, let limit): "element <\(element)> has more than the limit of \(limit) attributes"
            case .textTooLong(let limit): "one text node, comment or tag is longer than the limit of \(limit) bytes"
            case .doctype: "the document declares a DTD or entities (<!DOCTYPE or <!ENTITY): refused"
            case .malformed(let line, let message): "not well-formed XML (line \(line)): \(message)"
            case .empty: "the document has no root element"
            }
        }
    }

    /// The root element of `bytes`.
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(Error) -> XMLElement {
        guard let root = try read(bytes, limits: limits, building: true) else { throw .empty }
        return root
    }

    /// Whether `bytes` pass `parse` (its limits, no DTD, well-formed), without building the
    /// elements: `edit`'s check before libxml2 builds its own tree (building `XMLElement`s of an
    /// MPD of 500,000 elements cost more than libxml2's whole read).
    public static func check(_ bytes: [UInt8], limits: Limits = Limits()) throws(Error) {
        _ = try read(bytes, limits: limits, building: false)
    }

    /// `parse`; with `building` false, every check made and nil returned for a document that passes.
    private static func read(_ bytes: [UInt8], limits: Limits, building: Bool) throws(Error) -> XMLElement? {
        guard bytes.count <= limits.maxBytes else { throw .tooLarge(bytes: bytes.count, limit: limits.maxBytes) }
        // Refused before libxml2 reads a declaration: an entity is expanded as it is declared.
        if declaresDTD(bytes) { throw .doctype }
        guard !bytes.isEmpty else { throw .empty }
        // libxml2 checks a start tag's attributes for duplicates pair by pair before it hands the
        // element over: 100,000 attributes on one element (1 MB) took half a minute, a 16 MiB
        // MPD hours. A start tag with more than twice the limit (attributes and namespace
        // declarations: one `=` each outside quotes) is refused before libxml2 reads it.
        switch scan(bytes, attributesOver: 2 * limits.maxAttributes, textOver: limits.maxTextBytes) {
        case .crowded(let name)?: throw .tooManyAttributes(element: name, limit: limits.maxAttributes)
        case .long?: throw .textTooLong(limit: limits.maxTextBytes)
        case nil: break
        }
        let errors = ErrorSink()
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOCDATA.rawValue | XML_PARSE_NOWARNING.rawValue)
        let made: OpaquePointer? = bytes.withUnsafeBufferPointer { buf in
            buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buf.count) {
                xmlReaderForMemory($0, Int32(buf.count), nil, nil, options)
            }
        }
        guard let reader = made else { throw .malformed(line: 0, message: "libxml2 could not start a reader") }
        defer { xmlFreeTextReader(reader) }
        let context = Unmanaged.passUnretained(errors).toOpaque()
        // libxml2 prints its errors on stderr unless given a handler: they are kept, and thrown.
        xmlTextReaderSetStructuredErrorHandler(reader, { context, error in
            guard let context, let error else { return }
            let sink = Unmanaged<ErrorSink>.fromOpaque(context).takeUnretainedValue()
            guard sink.first == nil, error.pointee.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
            let message = error.pointee.message.map { String(cString: $0) } ?? "error \(error.pointee.code)"
            sink.first = (Int(error.pointee.line), message.trimming(.whitespacesAndNewlines))
        }, context)

        // Open elements, innermost last; a closed one joins its parent's children.
        var stack: [XMLElement] = []
        var root: XMLElement?
        var count = 0, depth = 0, sawRoot = false
        func close() {
            depth -= 1
            guard building else { return }
            let done = stack.removeLast()
            if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
        }
        while true {
            let status = xmlTextReaderRead(reader)
            if status == 0 { break }
            if status < 0 || errors.first != nil {
                let (line, message) = errors.first ?? (0, "unreadable")
                throw .malformed(line: line, message: message)
            }
            switch xmlTextReaderNodeType(reader) {
            case 1:  // element
                count += 1
                guard count <= limits.maxElements else { throw .tooManyElements(limit: limits.maxElements) }
                guard depth < limits.maxDepth else { throw .tooDeep(limit: limits.maxDepth) }
                var element = XMLElement(name: building ? string(xmlTextReaderConstLocalName(reader)) ?? "" : "",
                                         namespace: building ? string(xmlTextReaderConstNamespaceUri(reader)) : nil,
                                         attributes: [], children: [], text: "")
                let empty = xmlTextReaderIsEmptyElement(reader) == 1
                var attributes = 0
                while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                    if xmlTextReaderIsNamespaceDecl(reader) == 1 { continue }
                    guard attributes < limits.maxAttributes else {
                        xmlTextReaderMoveToElement(reader)
                        throw .tooManyAttributes(element: string(xmlTextReaderConstLocalName(reader)) ?? "", limit: limits.maxAttributes)
                    }
                    attributes += 1
                    guard building else { continue }
                    element.attributes.append(.init(name: string(xmlTextReaderConstLocalName(reader)) ?? "",
                                                    namespace: string(xmlTextReaderConstNamespaceUri(reader)),
                                                    value: string(xmlTextReaderConstValue(reader)) ?? ""))
                }
                depth += 1
                sawRoot = true
                if building { stack.append(element) }
                if empty { close() }
            case 3, 4, 13:  // text, CDATA, significant whitespace
                if building, !stack.isEmpty, let text = string(xmlTextReaderConstValue(reader)) { stack[stack.count - 1].text += text }
            case 15:  // end of element
                if depth > 0 { close() }
            case 10, 5, 6, 17:  // document type, entity reference, entity, entity declaration
                throw .doctype
            default:
                break
            }
        }
        if let (line, message) = errors.first { throw .malformed(line: line, message: message) }
        guard sawRoot else { throw .empty }
        return root
    }

    private final class ErrorSink {
        var first: (Int, String)?
    }

    private static func string(_ p: UnsafePointer<xmlChar>?) -> String? {
        p.map { String(cString: $0) }
    }

    /// The local name of the first start tag in `b` with more than `limit` `=` outside quoted
    /// values (comments, CDATA sections and processing instructions skipped), or nil. Only for an
    /// encoding where ASCII is one byte (UTF-8, ISO-8859-x); UTF-16 or UTF-32 is not scanned.
    static func crowdedStartTag(_ bytes: [UInt8], over limit: Int) -> String? {
        if case .crowded(let name)? = scan(bytes, attributesOver: limit, textOver: .max) { return name }
        return nil
    }

    enum ScanFinding: Equatable {
        /// A start tag with more `=` than the limit: its local name.
        case crowded(String)
        /// A text run, comment, CDATA section, processing instruction or tag past the text limit.
        case long
    }

    /// `crowdedStartTag`'s pass, which also finds a run longer than `textOver` bytes.
    static func scan(_ bytes: [UInt8], attributesOver limit: Int, textOver: Int) -> ScanFinding? {
        if bytes.count >= 2, (bytes[0] == 0xFE && bytes[1] == 0xFF) || (bytes[0] == 0xFF && bytes[1] == 0xFE) { return nil }
        if bytes.prefix(4).contains(0) { return nil }
        // One pass over the bytes with no allocation per byte: a 16 MiB comment took 20 s of a
        // debug build when each step built an array.
        return bytes.withUnsafeBufferPointer { b -> ScanFinding? in
            let lt = UInt8(ascii: "<"), gt = UInt8(ascii: ">"), eq = UInt8(ascii: "="), slash = UInt8(ascii: "/")
            func at(_ i: Int, _ u: [UInt8]) -> Bool {
                guard i + u.count <= b.count else { return false }
                for k in 0..<u.count where b[i + k] != u[k] { return false }
                return true
            }
            func past(_ i: Int, _ end: [UInt8]) -> Int {
                var j = i
                while j < b.count {
                    if b[j] == end[0], at(j, end) { return j + end.count }
                    j += 1
                }
                return b.count
            }
            let comment = Array("<!--".utf8), commentEnd = Array("-->".utf8), cdata = Array("<![CDATA[".utf8), cdataEnd = Array("]]>".utf8)
            let pi = Array("<?".utf8), piEnd = Array("?>".utf8)
            var i = 0, text = 0
            while i < b.count {
                guard b[i] == lt else { i += 1; continue }
                if i - text > textOver { return .long }
                if at(i, comment) || at(i, cdata) || at(i, pi) {
                    let end = at(i, comment) ? past(i + 4, commentEnd) : at(i, cdata) ? past(i + 9, cdataEnd) : past(i + 2, piEnd)
                    if end - i > textOver { return .long }
                    (i, text) = (end, end)
                    continue
                }
                var j = i + 1
                while j < b.count {
                    let c = b[j]
                    if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == gt || c == slash { break }
                    j += 1
                }
                let nameRange = (i + 1)..<j
                var quote: UInt8 = 0
                var count = 0
                while j < b.count {
                    let c = b[j]
                    if quote != 0 {
                        if c == quote { quote = 0 }
                    } else if c == 0x22 || c == 0x27 {
                        quote = c
                    } else if c == gt {
                        break
                    } else if c == eq {
                        count += 1
                    }
                    j += 1
                }
                if count > limit {
                    let name = Array(b[nameRange])
                    let local = name.lastIndex(of: UInt8(ascii: ":")).map { name[(name.index(after: $0))...] } ?? name[...]
                    return .crowded(String(decoding: local, as: UTF8.self))
                }
                if j - i > textOver { return .long }
                i = j + 1
                text = i
            }
            return b.count - text > textOver ? .long : nil
        }
    }

    /// Whether `bytes` hold `<!DOCTYPE` or `<!ENTITY` anywhere (a DTD after a long comment too).
    static func declaresDTD(_ bytes: [UInt8]) -> Bool {
        contains(bytes, "<!DOCTYPE") || contains(bytes, "<!ENTITY")
    }

    private static func contains(_ bytes: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard bytes.count >= n.count else { return false }
        return bytes.withUnsafeBufferPointer { b in
            var i = 0
            while i <= b.count - n.count {
                if b[i] == n[0] {
                    var k = 1
                    while k < n.count && b[i + k] == n[k] { k += 1 }
                    if k == n.count { return true }
                }
                i += 1
            }
            return false
        }
    }
}
