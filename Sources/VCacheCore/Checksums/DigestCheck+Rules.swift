/// What the expected digests become as they are given, sent by the origin and checked (pure).
extension DigestCheck {
    /// The stored expectations with `given` ones laid over them: a given value for an algorithm
    /// replaces the one given before (unchecked, unless it is the same value: then only its
    /// source is the new one; or unless the origin's digest of that value matched these bytes:
    /// then it matched too). The origin's are kept as they are.
    public static func merged(stored: [DigestCheck], given: [ExpectedDigest]) -> [DigestCheck] {
        var out = stored
        for e in given {
            var fresh = DigestCheck(expected: e)
            if let known = stored.first(where: { !$0.expected.source.isGiven && $0.matched == true && $0.expected.algorithm == e.algorithm && $0.expected.hex == e.hex }) {
                (fresh.matched, fresh.computed) = (known.matched, known.computed)
            }
            if let i = out.firstIndex(where: { $0.expected.source.isGiven && $0.expected.algorithm == e.algorithm }) {
                if out[i].expected.hex == e.hex { out[i].expected.source = e.source } else { out[i] = fresh }
            } else {
                out.append(fresh)
            }
        }
        return sorted(out)
    }

    /// The first of the origin's `digests` that contradicts one it sent before for the same
    /// version (same algorithm, another value): the bytes held are not the bytes it has now.
    public static func contradiction(in checks: [DigestCheck], origin digests: [ExpectedDigest]) -> (now: ExpectedDigest, before: ExpectedDigest)? {
        for d in digests {
            if let old = checks.first(where: { !$0.expected.source.isGiven && $0.expected.algorithm == d.algorithm }), old.expected.hex != d.hex {
                return (d, old.expected)
            }
        }
        return nil
    }

    /// `checks` with the origin's `digests` of the same version added (one of an algorithm
    /// already held with the same value keeps its outcome).
    public static func withOrigin(_ checks: [DigestCheck], _ digests: [ExpectedDigest]) -> [DigestCheck] {
        var out = checks
        for d in digests {
            if let i = out.firstIndex(where: { !$0.expected.source.isGiven && $0.expected.algorithm == d.algorithm }) {
                if out[i].expected.hex != d.hex { out[i] = DigestCheck(expected: d) }
            } else {
                out.append(DigestCheck(expected: d))
            }
        }
        return sorted(out)
    }

    /// Each expectation checked against the digests `computed` of the whole video (one the
    /// library could not compute stays unchecked), and the first that does not match (given ones
    /// first).
    public static func judged(_ checks: [DigestCheck], computed: [DigestAlgorithm: String]) -> (checks: [DigestCheck], mismatch: DigestCheck?) {
        var out = checks
        for i in out.indices {
            guard let value = computed[out[i].expected.algorithm] else { continue }
            out[i].computed = value
            out[i].matched = value == out[i].expected.hex
        }
        return (out, out.first { $0.matched == false })
    }

    /// Given first, then by algorithm.
    static func sorted(_ checks: [DigestCheck]) -> [DigestCheck] {
        checks.sorted { a, b in
            a.expected.source.isGiven != b.expected.source.isGiven ? a.expected.source.isGiven : a.expected.algorithm < b.expected.algorithm
        }
    }
}
