#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A DASH resource under several sibling BaseURLs (ISO/IEC 23009-1 §5.6.5: alternatives, the
/// first that answers is used): the same relative path under each base. Its cache key stays the
/// URL under the first, so `ls`, `check` and serve's offline answers find it whichever base
/// answered; prefetch fetches it from `url(at:)` of the first base the run has not found dead.
public struct DASHMirrors: Equatable, Sendable {
    /// The BaseURLs' folders, resolved, in the MPD's order (each ends with `/`); the BaseURLs
    /// themselves when each names the file (SegmentBase, a lone file), with `path` empty.
    public var bases: [String]
    /// What follows the folder: the URL under base `k` is `bases[k] + path`.
    public var path: String

    public func url(at k: Int) -> String { bases[k] + path }

    /// `url`'s mirrors among a Representation's `baseURLs`: nil when it has one BaseURL, or when
    /// `url` is not under the first's folder (an absolute reference, or one that climbed out).
    public static func of(_ url: String, baseURLs: [String]) -> DASHMirrors? {
        guard baseURLs.count > 1 else { return nil }
        var seen = Set<String>()
        if url == baseURLs[0] {
            let unique = baseURLs.filter { seen.insert($0).inserted }
            return unique.count > 1 ? DASHMirrors(bases: unique, path: "") : nil
        }
        let folders = baseURLs.map(folder)
        let first = folders[0]
        guard url.hasPrefix(first), url.count > first.count else { return nil }
        let unique = folders.filter { seen.insert($0).inserted }
        guard unique.count > 1 else { return nil }
        return DASHMirrors(bases: unique, path: String(url.dropFirst(first.count)))
    }

    /// `base` up to and including its last `/` before any query or fragment (RFC 3986 §5.2.3:
    /// what a relative reference resolves under).
    static func folder(_ base: String) -> String {
        let end = base.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? base.endIndex
        let head = base[..<end]
        guard let slash = head.lastIndex(of: "/") else { return String(head) }
        return String(head[...slash])
    }
}
