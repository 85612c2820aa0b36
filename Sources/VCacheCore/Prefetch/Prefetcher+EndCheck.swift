#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The origin re-encoding in place while a run fetches a stream: the run's later members are the
/// new encode under the manifest it read, and nothing ties a segment's validators to its
/// manifest. So a run that fetched members of a stream whose root manifest is static (an MPD of
/// `type="static"`, an HLS master or VOD playlist) asks for that manifest once more when the
/// last of them has ended, under the stream's lock, conditionally (Docs/dash.md, Docs/hls.md,
/// "Changed during a run"). A 304, the same bytes, or the same under the key rules: the run
/// stands. Otherwise what it fetched of the stream is dropped and the item fails (`changed`,
/// exit 3): the stream is partial, so the next run asks for the manifest again and completes the
/// stream from the new one. A live manifest changes by design: never asked. Invariant as in
/// `Prefetcher+Revalidate.swift`: a stream is never completed from members of two versions.
extension Prefetcher {
    /// The copy of a stream's root manifest a run read, to be compared with the origin's at its end.
    struct ReadManifest {
        let url: String
        let bytes: [UInt8]
        let base: String
        let validators: Validators
        let mpd: Bool
    }

    /// The static manifest cached whole under `url` (the copy the run read, or the one its
    /// revalidation stored); nil for a live one, or none.
    func readManifest(_ url: String) -> ReadManifest? {
        guard let m = cachedManifest(url), !m.live, let bytes = store.cachedBytes(of: m.entry), Int64(bytes.count) == m.entry.length else { return nil }
        let base = ((try? store.catalog.finalURL(of: m.key)) ?? nil) ?? m.entry.latestURL
        return ReadManifest(url: url, bytes: bytes, base: base, validators: m.entry.validators, mpd: m.mpd)
    }

    /// Whether the origin's answer `outcome` about `m`, asked at the end of a run that fetched
    /// members of its stream, is another encode: not when unchanged, the same encode
    /// (`ManifestRevalidation.sameEncode`: tokens in URL queries, an MPD's `publishTime`), or
    /// no answer to judge by (the run stands, its stream left unconfirmed). The question is
    /// whether the origin re-encoded during the run: the same bytes answered from another
    /// location (a per-answer redirect) are no re-encode, since the members were fetched from
    /// the URLs the copy the run read named.
    func changedDuringRun(_ m: ReadManifest, _ outcome: ManifestRevalidation.Outcome) -> Bool {
        guard case .changed(let body, _, _, _, let tokens) = outcome else { return false }
        return !ManifestRevalidation.sameEncode(body, m.bytes, mpd: m.mpd, rules: options.keyRules, queriesAreTokens: tokens)
    }

    /// Those of `keys` cached whole, with their validators (`ManifestRevalidation.cachedMembers`).
    func cachedMembers(_ keys: [CacheKey], root: CacheKey) -> [ManifestRevalidation.Member] {
        ManifestRevalidation.cachedMembers(keys, root: root, store: store)
    }

    /// What the end check's answer about `m` was, for `-v`.
    func endCheckSaid(_ m: ReadManifest, _ outcome: ManifestRevalidation.Outcome) -> String {
        switch outcome {
        case .unchanged: return "unchanged (the version this run read)"
        case .failed(let why, _): return "no answer to judge by (\(why))"
        case .changed:
            return changedDuringRun(m, outcome) ? "another encode: what this run fetched of the stream is dropped"
                : "the same encode in other bytes (key rules, URL query strings, publishTime, or another location): unchanged"
        }
    }

    /// Drops the entries `fetched` (what this run fetched of a stream whose manifest changed
    /// under it), each on its own: they stay members of the stream, so it is partial, and the
    /// next run asks for its manifest again and drops what the old one named. The error says so.
    func dropFetched(_ fetched: [CacheKey]) -> PrefetchError {
        var c = Evictor.Criteria()
        c.keys = Set(fetched)
        c.alone = true
        guard let out = try? Evictor(store: store).evict(c, dryRun: false) else {
            return .manifestChangedDuringRun(dropped: 0, busy: fetched.count)
        }
        return .manifestChangedDuringRun(dropped: out.evicted.count, busy: out.skipped.count)
    }
}
