#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What an entry is to the stream it belongs to. Nothing here is HLS-only: a DASH manifest
/// would be a `manifest` with `segment` and `init` members too.
public enum StreamRole: String, Sendable, CaseIterable {
    /// The stream's top manifest (an HLS master or a lone media playlist; a DASH MPD): its root.
    case manifest
    /// A manifest the root names (an HLS variant's or rendition's media playlist).
    case playlist
    case segment
    /// An initialisation section (HLS EXT-X-MAP, DASH Initialization).
    case initSection = "init"
    /// A decryption key.
    case key
}
