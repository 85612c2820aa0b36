import Foundation

/// The transfer side of `PrefetchJob`: carrying out `ResponseJudge`'s verdict on a response head,
/// writing bytes, dropping an old version off the loop, and deciding what follows a finished
/// transfer (the next gap, a retry, or the end). Loop thread only.
extension PrefetchJob {
    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        responseStatus = head.status
        var verdict = judge.judge(head)
        if case .accept(let offset, let limit, let v) = verdict, let promised = options.expectedVersion, !promised.admits(v) {
            // Readers of this file were promised another version: never into their file.
            verdict = .replace(offset: offset, limit: limit, validators: v, reason: "the origin's version is not the one being served")
        }
        if options.verbose {
            let fields = ["Content-Range", "Content-Length", "ETag", "Last-Modified", "Transfer-Encoding"].compactMap { n in head.header(n).map { "\(n): \($0)" } }
            trace("< \(head.status) \(head.reason)" + (fields.isEmpty ? "" : " " + fields.joined(separator: " ")))
            switch verdict {
            case .accept(let offset, let limit, _): trace("accepted: bytes go at offset \(offset)" + (limit.map { " up to \($0)" } ?? ""))
            case .replace(_, _, _, let reason): trace("another version: dropping the cached bytes first (\(reason))")
            case .learnLength(let v, let drop): trace("length learned: \(v.length ?? -1)" + (drop ? ", a different version: dropped" : ""))
            case .reject(let e): trace("refused: \(e.description)")
            }
        }
        switch verdict {
        case .accept(let offset, let limit, let v):
            adopt(v, contentType: head.contentType)
            beginWriting(at: offset, limit: limit)
            return .proceed
        case .replace(let offset, let limit, let v, let reason):
            if let e = countVersionChange(reason) {
                transferFailure = e
                return .stop
            }
            guard mayDropVersion() else {
                transferFailure = .lockBusy
                return .stop
            }
            if let type = head.contentType { contentType = type }
            dropVersion(to: v, reason: reason) { [self] in
                // Still held (a body is waiting): write it where the verdict said.
                if let t = self.transfer {
                    beginWriting(at: offset, limit: limit)
                    fetcher.release(t)
                }
            }
            return .hold
        case .learnLength(let v, let drop):
            if drop {
                if let e = countVersionChange("its length changed") {
                    transferFailure = e
                    return .stop
                }
                guard mayDropVersion() else {
                    transferFailure = .lockBusy
                    return .stop
                }
                dropVersion(to: v, reason: "its length changed") {}
            } else {
                adopt(v, contentType: nil)
            }
            return .stop
        case .reject(let e):
            transferFailure = e
            retryAfter = head.retryAfter
            return .stop
        }
    }

    /// Counts a version change in this run; the error when it is one too many (an origin whose
    /// version flips per response would otherwise be dropped and fetched for ever).
    func countVersionChange(_ reason: String) -> PrefetchError? {
        versionChanges += 1
        return versionChanges >= Self.maxVersionChanges ? .unstableVersion(changes: versionChanges, reason: reason) : nil
    }

    /// Records the validators of the same version (already merged with what was held).
    private func adopt(_ v: Validators, contentType newType: String?) {
        validators = v
        if let newType { contentType = newType }
        // The length was unknown until now, so nothing of the request was cached before.
        if alreadyCached == nil && v.length != nil { alreadyCached = 0 }
    }

    /// Some byte of this entry is cached, on its way to the catalog, or just written.
    var hasAnyBytes: Bool {
        !pending.isEmpty || !(checkpointer?.durableOrPending.isEmpty ?? true)
    }

    /// Drops every held byte (invariant 2) without blocking the loop: on the checkpoint queue,
    /// after any commit already queued, the catalog rows go first (durably), then `data` is
    /// replaced by a new empty file. `then` runs on the loop afterwards, followed by `afterDrop`
    /// when a transfer ended meanwhile. A failure finishes the job with its error.
    func dropVersion(to new: Validators, reason: String, then: @escaping () -> Void) {
        guard let checkpointer, let old = data else { return finish(.catalog("no entry to drop")) }

        dropping = true
        stage.discard()
        pending = RangeSet()
        pendingBytes = 0
        checkpointer.streamDigest(false)
        let store = self.store, key = self.key
        fetcher.offload(to: checkpointer.queue, { () -> Result<RawFile, PrefetchError> in
            do {
                try store.catalog.invalidate(key: key, validators: new)
                testPause("drop-after-invalidate", key)
                return .success(try store.replaceData(key: key, closing: old))
            } catch {
                return .failure(PrefetchError(error))
            }
        }, then: { [self] outcome in
            dropping = false
            options.sharedLock?.endExclusive()
            guard result == nil else { return }
            switch outcome {
            case .success(let fresh):
                data = fresh
                self.checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: fresh, committed: RangeSet(),
                                                 carrying: checkpointer, onCommit: fetcher.waker)
                validators = new
                wasComplete = false
                alreadyCached = 0
                heldFromThisRunOnly = true
                mp4Ranges = RangeSet()  // the new version's boxes are walked again
                mp4Settled = false
                emit(.videoChanged(url: item.url, reason: reason))
                then()
                if let next = afterDrop {
                    afterDrop = nil
                    next()
                }
            case .failure(let e):
                afterDrop = nil
                abort(e)
            }
        })
    }

    private func beginWriting(at offset: Int64, limit: Int64?) {
        writeOffset = offset
        writeLimit = limit
        // Keep the digest running only when this run can complete the video (not for a head).
        if let length = validators.length {
            var after = targetRanges(length: length)
            after.formUnion(checkpointer?.durableOrPending ?? RangeSet())
            checkpointer?.streamDigest(after.contains(ByteRange(0, length)))
        }
    }

    func transferShouldWait(_ transfer: CurlTransfer) -> Bool {
        guard overCommitted else { return false }
        checkpoint(wait: false)  // hand what is pending over now; tick releases the transfer
        return overCommitted
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        guard data != nil else { return false }
        var count = bytes.count
        let limit = min(writeLimit ?? .max, options.stopAt?() ?? .max)
        if limit < .max {
            if writeOffset >= limit {
                stoppedAtLimit = true
                return false
            }
            count = Int(min(Int64(count), limit - writeOffset))
        }
        if writeOffset == 0, count >= 8, let why = Self.notAnMP4Start(url: item.url, bytes) {
            transferFailure = .notTheVideo(why)
            return false
        }
        // A new response elsewhere in the file: what is staged goes out first.
        if !stage.isEmpty && stage.end != writeOffset, let e = writeStaged() {
            transferFailure = e
            return false
        }
        var rest = UnsafeRawBufferPointer(rebasing: bytes[0..<count])
        while !rest.isEmpty {
            let n = stage.append(rest, at: writeOffset)
            writeOffset += Int64(n)
            fetched += Int64(n)
            transferBytes += Int64(n)
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if stage.isDue, let e = writeStaged() {
                transferFailure = e
                return false
            }
        }
        if count < bytes.count { stoppedAtLimit = true }
        return count == bytes.count
    }

    /// For a URL naming an MP4 (.mp4, .m4v, .m4a, .mov, .3gp): why `bytes` (the first of the file)
    /// cannot start one: an ISO BMFF file begins with a box, a 32-bit size (0, 1, or at least 8)
    /// and a four-character type. An error page or a redirect notice answered with 200 does not.
    /// Boxes an MP4 or QuickTime file starts with (ISO/IEC 14496-12, QuickTime's `wide`/`pnot`).
    static let firstBoxTypes: Set<String> = ["ftyp", "styp", "moov", "mdat", "free", "skip", "wide", "pnot", "sidx", "moof", "uuid", "pdin", "meta", "prfl"]

    static func notAnMP4Start(url: String, _ bytes: UnsafeRawBufferPointer) -> String? {
        let ext = ((URL(string: url)?.path ?? url) as NSString).pathExtension.lowercased()
        guard ["mp4", "m4v", "m4a", "mov", "3gp"].contains(ext), bytes.count >= 8 else { return nil }
        let size = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        let type = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[4..<8]), as: UTF8.self)
        guard Self.firstBoxTypes.contains(type) && (size == 0 || size == 1 || size >= 8) else {
            let shown = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<8]).map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
            return "origin's answer for a .\(ext) is not an MP4: its first bytes '\(shown)' are not an ISO BMFF box header (ftyp, moov, mdat...)"
        }
        return nil
    }

    /// Writes the staged bytes (StagedWrite.swift) to `data`; from then on they are pending, to
    /// be claimed by the next checkpoint. Returns the error when the write failed (those bytes
    /// are then never claimed).
    func writeStaged() -> PrefetchError? {
        guard let data, let (bytes, offset) = stage.take() else { return nil }
        do {
            try data.write(bytes, toAbsoluteOffset: offset)
        } catch {
            // Part of it may have reached the file (a full disk fails a write midway): those
            // blocks are given back when the job ends, with every byte it could not claim.
            writtenToData.insert(ByteRange(offset, offset + Int64(bytes.count)))
            return PrefetchError(error)
        }
        checkpointer?.feedDigest(bytes, at: offset)
        let range = ByteRange(offset, offset + Int64(bytes.count))
        writtenToData.insert(range)
        pending.insert(range)
        pendingBytes += range.count
        if let id = dataID { options.onWrite?(id, range) }
        return nil
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        self.transfer = nil
        if dropping {
            afterDrop = { [self] in transferEnded(error: error) }
            return
        }
        transferEnded(error: error)
    }

    private func transferEnded(error: TransportError?) {
        guard result == nil else { return }
        let failure = transferFailure ?? error.map(PrefetchError.transport)
        // A 200 that ended cleanly is the whole representation: with no length announced, its
        // length is what arrived (never ask for it again).
        if failure == nil && responseStatus == 200 && validators.length == nil && !stoppedAtLimit {
            validators.length = writeOffset
            if alreadyCached == nil { alreadyCached = 0 }
        }
        checkpoint(wait: false)
        if transferBytes > 0 { attempt = 0 }
        if let failure {
            if failure.isRetryable && attempt < options.retries && !fetcher.isStopped {
                attempt += 1
                let backoff = options.retryDelay * pow(2, Double(attempt - 1)) * Double.random(in: 0.8...1.2)
                let delay = min(retryAfter ?? backoff, 120)
                emit(.retrying(url: item.url, attempt: attempt, delay: delay, reason: failure.description))
                fetcher.after(delay) { [self] in nextRequest() }
                return
            }
            return finish(failure)
        }
        if transferBytes > 0 {
            fruitlessTransfers = 0
        } else if plan() != nil {
            // Nothing arrived and the same request would go out again.
            fruitlessTransfers += 1
            if fruitlessTransfers >= 3 { return finish(.noProgress) }
        }
        nextRequest()
    }
}
