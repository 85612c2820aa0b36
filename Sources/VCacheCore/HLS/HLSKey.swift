/// An `EXT-X-KEY` (RFC 8216 §4.3.2.4) or `EXT-X-SESSION-KEY` (§4.3.4.5): how the segments after
/// it are encrypted, until the next `EXT-X-KEY`.
public struct HLSKey: Hashable, Sendable {
    public enum Method: Hashable, Sendable {
        case none, aes128, sampleAES
        /// Anything else (`SAMPLE-AES-CTR`, ...): kept, never fetched.
        case other(String)

        /// As a playlist writes it (`METHOD=...`).
        public var name: String {
            switch self {
            case .none: "NONE"
            case .aes128: "AES-128"
            case .sampleAES: "SAMPLE-AES"
            case .other(let s): s
            }
        }
    }

    public var method: Method

    /// What a note names it by: its key format, or its method under the plain `identity` format.
    public var label: String { keyFormat == "identity" ? method.name : keyFormat }
    /// Resolved against the playlist's final URL; nil for `METHOD=NONE`.
    public var uri: String?
    /// As written; nil when absent (the IV is then the media sequence number, §5.2).
    public var iv: String?
    /// `identity` when absent.
    public var keyFormat: String
    public var keyFormatVersions: String?

    public init(method: Method, uri: String? = nil, iv: String? = nil, keyFormat: String = "identity", keyFormatVersions: String? = nil) {
        self.method = method
        self.uri = uri
        self.iv = iv
        self.keyFormat = keyFormat
        self.keyFormatVersions = keyFormatVersions
    }

    init(_ a: HLSAttributeList, base: String) throws(HLSParseError) {
        let m = try a.required(a.enumerated("METHOD"), "METHOD")
        switch m {
        case "NONE": method = .none
        case "AES-128": method = .aes128
        case "SAMPLE-AES": method = .sampleAES
        default: method = .other(m)
        }
        if method == .none {
            uri = nil
        } else {
            uri = HLSURI.resolve(try a.required(a.string("URI"), "URI"), against: base)
        }
        iv = try a.hex("IV")
        keyFormat = a.string("KEYFORMAT") ?? "identity"
        keyFormatVersions = a.string("KEYFORMATVERSIONS")
    }

    /// A key file vcache can fetch and keep for offline play: `KEYFORMAT` identity (a plain
    /// 16-byte resource) at an http(s) URL. Other formats are DRM systems: passed through, never
    /// fetched, and the stream will not play offline.
    public var isFetchable: Bool {
        guard method != .none, keyFormat == "identity", let uri else { return false }
        return HLSURI.isHTTP(uri)
    }
}
