/// `check` with expected checksums (a list line's `md5=HEX`): the cached copy counts as ready
/// only when it was checked against that very value and matched.
extension Readiness {
    /// Why `item`'s checksums make `entry` not ready (nil: they do not). `checks`: the entry's
    /// stored expectations and their outcomes. Reads only the catalog: no byte is hashed here.
    public static func ofChecksums(_ item: PrefetchItem, entry: CacheEntry, checks: [DigestCheck]) -> Readiness? {
        for e in item.expected {
            let name = e.algorithm.rawValue
            let stored = checks.first { $0.expected.source.isGiven && $0.expected.algorithm == e.algorithm }
            if let stored, stored.expected.hex != e.hex {
                return .missing(bytes: nil, why: "its cached copy is expected to have another \(name) (\(stored.expected.hex), from \(stored.expected.source.description)); prefetch fetches it again")
            }
            if stored?.matched == false {
                return .missing(bytes: nil, why: "its bytes did not have this \(name) (\(stored?.computed ?? "?")) and were dropped")
            }
            guard entry.isComplete, stored?.matched != true else { continue }
            // The origin's digest of this very value matched the cached bytes (GCS's x-goog-hash).
            if checks.contains(where: { $0.matched == true && $0.expected.algorithm == e.algorithm && $0.expected.hex == e.hex }) { continue }
            // Complete, and never checked against this value: its SHA-256 is known anyway.
            if e.algorithm == .sha256, let sha = entry.sha256 {
                if sha != e.hex { return .missing(bytes: nil, why: "its cached copy's sha256 is \(sha), not \(e.hex)") }
                continue
            }
            return .missing(bytes: nil, why: "its cached copy was never checked against this \(name); prefetch checks it (no download unless it differs)")
        }
        return nil
    }
}
