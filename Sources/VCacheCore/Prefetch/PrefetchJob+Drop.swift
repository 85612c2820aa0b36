/// Dropping the entry's version (invariant 2) without blocking the loop.
extension PrefetchJob {
    /// On the checkpoint queue, after any commit already queued, `CacheStore.dropVersion`: the
    /// catalog rows go first (durably), then `data` is replaced by a new empty file; meanwhile the job is in
    /// `droppingVersion`, the interrupted exchange's transfer held. Back on the loop, `then`
    /// follows, and a transfer that ended meanwhile is carried out. A failure ends the job.
    /// `changed`: the origin showed another version; false when the cached bytes are dropped
    /// for what they are (no strong validator to combine them by, not this stream member).
    func dropVersion(to new: Validators, reason: String, changed: Bool = true, interrupting exchange: Exchange?, then: AfterDrop) {
        guard let writer else { preconditionFailure("prefetch job for \(item.url): a drop before the entry was opened") }
        enter(.droppingVersion(exchange, then: then))
        detachLanes(deferred: true)  // (a response head's callback may have called this)
        writer.discard()
        if let file = writer.fileID { options.onDrop?(file) }
        let store = self.store, key = self.key, old = writer.data
        fetcher.offload(to: writer.checkpointer.queue, { () -> Result<RawFile, PrefetchError> in
            do {
                return .success(try store.dropVersion(key: key, validators: new, closing: old, pausePoint: "drop-after-invalidate"))
            } catch {
                return .failure(PrefetchError(error))
            }
        }, then: { [self] outcome in
            dropEnded(outcome, version: new, reason: reason, changed: changed)
        })
    }

    private func dropEnded(_ outcome: Result<RawFile, PrefetchError>, version: Validators, reason: String, changed: Bool) {
        options.sharedLock?.endExclusive()
        guard case .droppingVersion(let exchange, let then) = phase else {
            precondition(isFinished, "prefetch job for \(item.url): a drop ended in \(phase)")
            return
        }
        // Back to what the drop interrupted: the held transfer, or none.
        if let exchange, exchange.ended == nil { enter(.fetching(exchange)) } else { enter(.idle) }
        switch outcome {
        case .success(let fresh):
            beginVersion(version, in: fresh)
            emit(.videoChanged(url: item.url, reason: reason, changed: changed))
            switch then {
            case .nextRequest:
                nextRequest()
            case .write(let offset, let limit):
                // Still held (a body is waiting): write it where the verdict said.
                if case .fetching(var x) = phase {
                    beginWriting(&x, at: offset, limit: limit)
                    splitAcrossConnections(&x, validators: version)
                    update(x)
                    fetcher.release(x.transfer)
                }
            case .awaitEnd:
                break
            }
            if let exchange, let ending = exchange.ended { transferEnded(exchange, error: ending.error) }
        case .failure(let e):
            abort(e)
        }
    }
}
