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
    /// The root's own row, when a manifest it names changed on the origin since the stream was
    /// cached (a media playlist prefetched by its own URL and found re-encoded), or went alone
    /// (`evict` of it, `verify --fix` dropping it): the stream is partial until its root is asked
    /// for again (`Catalog.markRootToAsk`). Read by a vcache
    /// that does not know it as a `segment` role of the root's own row, which changes nothing.
    case manifestToAsk = "manifest-to-ask"
    /// The root's own row while a run fetches members of its static stream and has not yet found
    /// its manifest unchanged at their end (`Prefetcher+EndCheck.swift`): set before the first
    /// member is stored, cleared when the end check passes. Partial for `ls`, `check`, `export`
    /// and `evict --partial`, and the next run asks for the manifest again: a run killed or
    /// stopped before its end check leaves it. Read by a vcache that does not know it as a
    /// `segment` role of the root's own row (no migration).
    case manifestUnconfirmed = "manifest-unconfirmed"
    /// A manifest the root names (an HLS variant's or rendition's media playlist).
    case playlist
    case segment
    /// An initialisation section (HLS EXT-X-MAP, DASH Initialization).
    case initSection = "init"
    /// A decryption key.
    case key

    /// A root marked partial whatever its members hold (`manifestToAsk`, `manifestUnconfirmed`).
    public var isMarked: Bool { self == .manifestToAsk || self == .manifestUnconfirmed }

    /// The root's own row, marked or not.
    public var isRoot: Bool { self == .manifest || isMarked }
}
