/// Completing an entry: the last checkpoint, the digest when the video is whole, one commit.
extension PrefetchJob {
    /// Every wanted byte is written: the last checkpoint, the digest when the video is now
    /// whole, and the catalog commit all run on the checkpoint queue; the loop carries on.
    func complete() {
        guard let writer else { return finish(nil) }
        if let e = writer.writeStaged() { return finish(e) }
        let batch = writer.takePending()
        enter(.completing)
        let checkpointer = writer.checkpointer, data = writer.data
        // A complete entry is hashed again only when an expectation is new to it.
        let validators = entry.validators, contentType = entry.contentType, needsDigest = !entry.wasComplete || entry.needsCheck
        let drop = allClaimsDropper, checks = entry.checks, shape = memberShape
        fetcher.offload(to: checkpointer.queue, {
            Self.finalize(checkpointer, data: data, batch: batch, validators: validators, contentType: contentType, needsDigest: needsDigest,
                          checks: checks, member: shape, dropAllClaims: drop)
        }, then: { [self] outcome in
            switch outcome {
            case .failed(let e): finish(e)
            case .completed: finish(nil, completed: true)
            case .partial: finish(nil)
            }
        })
    }

    enum FinalOutcome: Sendable { case partial, completed, failed(PrefetchError) }

    /// What a stream member's stored bytes must be once written (`HLSMemberCheck.wholeProblem`,
    /// `rangeProblem`): its check, and the MPD's byte ranges of it (a DASH member's only).
    struct MemberShape: Sendable {
        var check: HLSMemberCheck?
        var ranges: [ByteRange] = []

        /// Why the bytes held (`held`, of `length`) are not the member: a DASH range piece held
        /// that is not whole segment boxes, or, when `whole` (every byte newly held), a segment
        /// whose top-level boxes do not tile it. Nil: nothing wrong found.
        func problem(held: RangeSet, length: Int64?, whole: Bool, read: @escaping MP4Walker.Read) -> String? {
            guard let check else { return nil }
            for r in ranges where held.contains(r) {
                if let why = HLSMemberCheck.rangeProblem(first: r.lowerBound, last: r.upperBound - 1, read: read) { return why }
            }
            guard whole, let length else { return nil }
            return check.wholeProblem(length: length, read: read)
        }
    }

    /// This job's `MemberShape`.
    var memberShape: MemberShape {
        guard let check = item.checkSegment else { return MemberShape() }
        var shape = MemberShape(check: check)
        if check == .dashSegment, item.rangesMustFit {
            for case .span(let first, let last?) in item.requests where last >= first { shape.ranges.append(ByteRange(first, last + 1)) }
        }
        return shape
    }

    /// Drops every claim of the entry and gives it a new `data` (`CacheStore.dropVersion`).
    /// Under a lock shared with other jobs (serve), only when none of them can still write the
    /// old file and claim its bytes afterwards: now if this job is alone, else by the last job to
    /// leave; no job joins meanwhile (`SharedEntryLock.dropAlone`).
    var allClaimsDropper: @Sendable (Validators) throws -> Void {
        let store = self.store, key = self.key, shared = options.sharedLock
        return { validators in
            let drop: @Sendable () throws -> Void = { try store.dropVersion(key: key, validators: validators).close() }
            if let shared { try shared.dropAlone(drop) } else { try drop() }
        }
    }

    /// On the checkpoint queue: fsync, compute the digest if the entry is now whole, one commit.
    /// `dropAllClaims`: drops every claim and gives the entry a new, empty `data` (the job's own stays open, unlinked),
    /// or has it done once no other job shares the entry (`allClaimsDropper`).
    /// `checks`: the digests the video is expected to have, computed with the SHA-256; one that
    /// does not match drops every claim (`.failed(.checksumMismatch)`), the outcome recorded.
    static func finalize(_ checkpointer: Checkpointer, data: RawFile, batch: RangeSet, validators: Validators,
                         contentType: String?, needsDigest: Bool, checks: [DigestCheck] = [], member: MemberShape = MemberShape(),
                         dropAllClaims: (Validators) throws -> Void) -> FinalOutcome {
        var digest: ChunkStates?
        var all = checkpointer.committed
        all.formUnion(batch)
        // A stream member is checked where it is about to be kept (complete, or its MPD's ranges
        // held): bytes that are not one are never claimed, none of them (as a cut body).
        let whole = needsDigest && validators.length.map { all.contains(ByteRange(0, $0)) } == true
        if let why = member.problem(held: all, length: validators.length, whole: whole, read: { offset, count in try data.bytes(count, at: offset) }) {
            do {
                try dropAllClaims(validators)
            } catch {
                return .failed(PrefetchError(error))
            }
            return .failed(.notTheVideo(why))
        }
        if needsDigest, let length = validators.length, all.contains(ByteRange(0, length)) {
            var others: [DigestAlgorithm: String] = [:]
            do {
                try data.sync()
                (digest, others) = try checkpointer.finalDigest(length: length, others: Set(checks.map(\.expected.algorithm)))
            } catch {
                return .failed(PrefetchError(error))
            }
            if let d = digest, !checks.isEmpty {
                others[.sha256] = d.sha256
                let (judged, mismatch) = DigestCheck.judged(checks, computed: others)
                if let mismatch {
                    // Not the file expected: none of its bytes is kept (a new `data`, as at every
                    // drop), and the outcome of the given expectations is recorded for `info`.
                    do {
                        try dropAllClaims(validators)
                        try checkpointer.recordChecks(judged.filter(\.expected.source.isGiven))
                    } catch {
                        return .failed(PrefetchError(error))
                    }
                    return .failed(.checksumMismatch(ChecksumMismatch(mismatch)))
                }
                checkpointer.setExpectations(judged)
            }
            // Whole again after `verify --fix` dropped damaged chunks: the bytes must lead to the
            // digest this version had. Otherwise none of them is trusted (a chunk kept then may
            // have been damaged since, or the origin changed its bytes under the same validators).
            if let d = digest, let kept = checkpointer.keptDigest(), kept.sha256 != d.sha256 {
                // `data` is replaced too, as at every drop: a reader (serve) holding this file still
                // trusts the claims it read about it, and the next writer, holding no byte of the
                // entry, would take any version's bytes into it, under that reader.
                do {
                    try dropAllClaims(validators)
                } catch {
                    return .failed(PrefetchError(error))
                }
                return .failed(.notAsCompleted)
            }
        }
        // Nothing new to record and this run already committed (so last use and the URL are
        // current): skip the transaction. A run that fetched nothing still commits, as its "use".
        if batch.isEmpty && digest == nil && checkpointer.commitCount > 0 && !checkpointer.expectationsPending { return .partial }
        testPause("complete-before-commit", checkpointer.key)
        guard checkpointer.commitNow(batch, validators: validators, contentType: contentType, digest: digest) else {
            return .failed(checkpointer.firstError ?? .catalog("the catalog commit failed"))
        }
        return digest != nil ? .completed : .partial
    }
}
