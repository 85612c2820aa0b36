#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whether an item of a prefetch run (a video, or a stream with everything it names) can fit
/// under the cache's limit, decided before anything is evicted for it: evicting other videos
/// for an item that cannot fit even in an empty cache only loses them (Docs/hls.md, "Eviction").
/// Pure; `Prefetcher` feeds it the sizes the origin has said so far (a part's size is known once
/// its response began: its length, or the byte ranges asked for).
struct ItemFit: Equatable {
    enum Verdict: Equatable {
        /// The sizes known already need more than the limit with nothing else cached.
        case neverFits(needs: Int64)
        /// Every part's size is known and the whole fits an empty cache: other entries may go for it.
        case fits
        /// Some part's size is not known yet: nothing may be evicted for the item until it is;
        /// `holds` is what its known parts come to (allowed over the limit meanwhile).
        case undecided(holds: Int64)
    }

    /// - Parameters:
    ///   - sizes: each part's size, nil while unknown.
    ///   - fixed: what an empty cache uses (the catalog, the folders); `perPart`: a part's folder.
    static func verdict(_ sizes: [Int64?], fixed: Int64, perPart: Int64, limit: Int64) -> Verdict {
        // Saturating: sizes come from origins (a length near 2^63 never fits, it does not trap).
        let known = sizes.reduce(Int64(0)) { Checked.saturatingAdd($0, Checked.saturatingAdd($1 ?? 0, perPart)) }
        let needs = Checked.saturatingAdd(fixed, known)
        if needs > limit { return .neverFits(needs: needs) }
        return sizes.contains(nil) ? .undecided(holds: known) : .fits
    }
}
