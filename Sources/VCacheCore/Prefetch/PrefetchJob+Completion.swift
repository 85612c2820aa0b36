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
        let validators = entry.validators, contentType = entry.contentType, needsDigest = !entry.wasComplete
        let drop = allClaimsDropper
        fetcher.offload(to: checkpointer.queue, {
            Self.finalize(checkpointer, data: data, batch: batch, validators: validators, contentType: contentType, needsDigest: needsDigest,
                          dropAllClaims: drop)
        }, then: { [self] outcome in
            switch outcome {
            case .failed(let e): finish(e)
            case .completed: finish(nil, completed: true)
            case .partial: finish(nil)
            }
        })
    }

    enum FinalOutcome: Sendable { case partial, completed, failed(PrefetchError) }

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
    static func finalize(_ checkpointer: Checkpointer, data: RawFile, batch: RangeSet, validators: Validators,
                         contentType: String?, needsDigest: Bool, dropAllClaims: (Validators) throws -> Void) -> FinalOutcome {
        var digest: ChunkStates?
        var all = checkpointer.committed
        all.formUnion(batch)
        if needsDigest, let length = validators.length, all.contains(ByteRange(0, length)) {
            do {
                try data.sync()
                digest = try checkpointer.finalDigest(length: length)
            } catch {
                return .failed(PrefetchError(error))
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
        if batch.isEmpty && digest == nil && checkpointer.commitCount > 0 { return .partial }
        testPause("complete-before-commit", checkpointer.key)
        guard checkpointer.commitNow(batch, validators: validators, contentType: contentType, digest: digest) else {
            return .failed(checkpointer.firstError ?? .catalog("the catalog commit failed"))
        }
        return digest != nil ? .completed : .partial
    }
}
