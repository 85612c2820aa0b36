#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CLibXML2

/// One element of a document being edited by `XMLTree.edit` (libxml2's tree, `xmlReadMemory`):
/// valid only inside the closure `edit` runs, never kept past it. What is not edited (namespace
/// prefixes and declarations, comments, CDATA, unknown elements and attributes) is written back
/// as it was read.
public struct XMLEditNode {
    fileprivate let node: xmlNodePtr

    public var name: String { node.pointee.name.map { String(cString: $0) } ?? "" }
    public var namespace: String? { node.pointee.ns?.pointee.href.map { String(cString: $0) } }

    /// The element children, in document order.
    public var children: [XMLEditNode] {
        var out: [XMLEditNode] = []
        var c = node.pointee.children
        while let n = c {
            if n.pointee.type == XML_ELEMENT_NODE { out.append(XMLEditNode(node: n)) }
            c = n.pointee.next
        }
        return out
    }

    public func children(_ name: String) -> [XMLEditNode] {
        children.filter { $0.name == name && $0.namespace == namespace }
    }

    /// The value of the unqualified attribute `name`, or of `name` in `namespace`.
    public func attribute(_ name: String, namespace: String? = nil) -> String? {
        let value = namespace.map { xmlGetNsProp(node, name, $0) } ?? xmlGetNoNsProp(node, name)
        guard let value else { return nil }
        defer { vc_xml_free(value) }
        return String(cString: value)
    }

    /// Sets an attribute that is there already (unqualified, or in `namespace`), keeping its prefix.
    public func setAttribute(_ name: String, namespace: String? = nil, _ value: String) {
        if let namespace {
            guard let attr = xmlHasNsProp(node, name, namespace) else { return }
            xmlSetNsProp(node, attr.pointee.ns, name, value)
        } else {
            xmlSetProp(node, name, value)
        }
    }

    /// Takes the attribute `name` (unqualified, or in `namespace`) off the element.
    public func removeAttribute(_ name: String, namespace: String? = nil) {
        if let namespace {
            guard let attr = xmlHasNsProp(node, name, namespace) else { return }
            xmlRemoveProp(attr)
        } else {
            xmlUnsetProp(node, name)
        }
    }

    /// The character data inside the element.
    public var text: String {
        guard let content = xmlNodeGetContent(node) else { return "" }
        defer { vc_xml_free(content) }
        return String(cString: content)
    }

    /// Replaces the element's content with `text` (escaped when written).
    public func setText(_ text: String) {
        xmlNodeSetContent(node, nil)
        xmlNodeAddContent(node, text)
    }

    /// Takes the element out of the document.
    public func remove() {
        xmlUnlinkNode(node)
        xmlFreeNode(node)
    }

    /// A new element `name` with `text`, in this element's namespace (its prefix), inserted as
    /// a child before `before` (or last).
    @discardableResult
    public func insertChild(_ name: String, text: String, before: XMLEditNode?) -> XMLEditNode? {
        guard let child = xmlNewDocNode(node.pointee.doc, node.pointee.ns, name, nil) else { return nil }
        if !text.isEmpty { xmlNodeAddContent(child, text) }
        if let before { xmlAddPrevSibling(before.node, child) } else { xmlAddChild(node, child) }
        return XMLEditNode(node: child)
    }
}

extension XMLTree {
    /// `bytes` edited by `body` on its root element and written again (UTF-8). The bytes pass
    /// `parse`'s checks first (`check`) (its limits, no DTD, well-formed), then libxml2 builds its tree with the same
    /// options (no network, no entity substitution).
    public static func edit(_ bytes: [UInt8], limits: Limits = Limits(), _ body: (XMLEditNode) -> Void) throws(Error) -> [UInt8] {
        try check(bytes, limits: limits)
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOWARNING.rawValue | XML_PARSE_NOERROR.rawValue)
        let made: xmlDocPtr? = bytes.withUnsafeBufferPointer { buf in
            buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buf.count) { xmlReadMemory($0, Int32(buf.count), nil, nil, options) }
        }
        guard let doc = made else { throw .malformed(line: 0, message: "libxml2 could not build the document") }
        defer { xmlFreeDoc(doc) }
        guard let root = xmlDocGetRootElement(doc) else { throw .empty }
        body(XMLEditNode(node: root))
        var out: UnsafeMutablePointer<xmlChar>?
        var size: Int32 = 0
        xmlDocDumpMemoryEnc(doc, &out, &size, "UTF-8")
        guard let out else { throw .malformed(line: 0, message: "libxml2 could not write the document") }
        defer { vc_xml_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(size)))
    }
}
