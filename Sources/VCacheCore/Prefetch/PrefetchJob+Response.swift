import Foundation

/// The transfer side of `PrefetchJob`: judging a response head, writing bytes, and deciding what
/// follows a finished transfer (the next gap, a retry, or the end). Loop thread only.
extension PrefetchJob {
    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> Bool {
        switch head.status {
        case 206:
            return acceptPartial(head)
        case 200:
            return acceptWhole(head)
        case 416:
            // Asked past the end (e.g. `--range` beyond a video whose length was unknown): learn
            // the length from `Content-Range: bytes */N`, stop this transfer, and plan again.
            if let total = head.header("Content-Range").flatMap(Self.unsatisfiedLength) {
                _ = applyValidators(Validators(length: total, etag: head.etag, lastModified: head.lastModified), contentType: nil, force: false)
            } else {
                transferFailure = .http(status: 416, reason: head.reason)
            }
            return false
        default:
            transferFailure = .http(status: head.status, reason: head.reason)
            retryAfter = head.retryAfter
            return false
        }
    }

    static func unsatisfiedLength(_ value: String) -> Int64? {
        let t = value.trimmingCharacters(in: .whitespaces)
        guard t.hasPrefix("bytes */") else { return nil }
        return Int64(t.dropFirst(8))
    }

    /// A 206 must answer exactly the range asked (a shorter tail is allowed: the rest is asked
    /// again). Anything else is refused before a byte is written (invariant 3).
    private func acceptPartial(_ head: ResponseHead) -> Bool {
        let raw = head.header("Content-Range") ?? "(none)"
        guard let cr = head.contentRange else {
            transferFailure = .badContentRange(asked: asked, got: raw)
            return false
        }
        guard let total = cr.complete else {
            transferFailure = .missingLength
            return false
        }
        let expectedStart = askedSuffix.map { max(0, total - $0) } ?? askedStart ?? 0
        let beyondAsked = askedEnd.map { cr.last + 1 > $0 } ?? false
        guard cr.first == expectedStart, !beyondAsked else {
            transferFailure = .badContentRange(asked: asked, got: raw)
            return false
        }
        let new = Validators(length: total, etag: head.etag, lastModified: head.lastModified)
        guard applyValidators(new, contentType: head.contentType, force: false) else { return false }
        beginWriting(at: cr.first, limit: cr.last + 1)
        return true
    }

    /// A 200 to a ranged request: the video changed (If-Range failed) or the origin ignores
    /// ranges. Either way the body is the current video from byte 0. Old bytes stay only when
    /// the same strong ETag proves it is the same video (an origin that ignores ranges).
    private func acceptWhole(_ head: ResponseHead) -> Bool {
        let new = Validators(length: head.contentLength, etag: head.etag, lastModified: head.lastModified)
        let sameStrongETag = new.etag != nil && new.etag == validators.etag && !(new.etag!.hasPrefix("W/"))
        guard applyValidators(new, contentType: head.contentType, force: !sameStrongETag) else { return false }
        var limit: Int64?
        if let length = validators.length {
            limit = missing(length: length).map(\.upperBound).max() ?? 0
        }
        beginWriting(at: 0, limit: limit)
        return true
    }

    /// Some byte of this entry is cached, on its way to the catalog, or just written.
    var hasAnyBytes: Bool {
        !pending.isEmpty || !(checkpointer?.durableOrPending.isEmpty ?? true)
    }

    /// Records a response's validators. When they name another version than the catalog's, or
    /// `force`, every cached range is dropped first (invariant 2): catalog rows go before `data`
    /// is truncated, so a crash between leaves a catalog that claims nothing.
    func applyValidators(_ new: Validators, contentType newType: String?, force: Bool) -> Bool {
        let differs = validators.differs(from: new)
        let invalidate = (differs || force) && hasAnyBytes
        do {
            if invalidate {
                checkpointer?.reset()
                pending = RangeSet()
                pendingBytes = 0
            }
            if differs {
                validators = new
            } else {
                validators = Validators(length: new.length ?? validators.length, etag: new.etag ?? validators.etag,
                                        lastModified: new.lastModified ?? validators.lastModified)
            }
            if newType != nil { contentType = newType }
            // Catalog rows go before `data` is truncated; otherwise the validators travel with the next commit.
            if invalidate { try store.catalog.invalidate(key: key, validators: validators) }
            // The length was unknown until now, so nothing of the request was cached before.
            if alreadyCached == nil && validators.length != nil { alreadyCached = 0 }
            if invalidate {
                let fresh = try store.replaceData(key: key, closing: data)
                data = fresh
                checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: fresh, committed: RangeSet(),
                                            carrying: checkpointer)
                wasComplete = false
                alreadyCached = 0
                emit(.videoChanged(url: item.url, reason: force ? "origin sent the whole video (200) to a range request" : "its validators changed"))
            }
            return true
        } catch let e as SystemError {
            transferFailure = .disk(e)
        } catch {
            transferFailure = .catalog("\(error)")
        }
        return false
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

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        guard let data else { return false }
        var count = bytes.count
        if let limit = writeLimit {
            if writeOffset >= limit { return false }
            count = Int(min(Int64(count), limit - writeOffset))
        }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[0..<count])
        do {
            try data.write(slice, toAbsoluteOffset: writeOffset)
        } catch {
            transferFailure = .disk(error as? SystemError ?? SystemError("write", path: data.path, errno: EIO))
            return false
        }
        let range = ByteRange(writeOffset, writeOffset + Int64(count))
        pending.insert(range)
        pendingBytes += range.count
        fetched += range.count
        transferBytes += range.count
        writeOffset = range.upperBound
        return count == bytes.count
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        self.transfer = nil
        checkpoint(wait: false)
        if transferBytes > 0 { attempt = 0 }
        if let failure = transferFailure ?? error.map(PrefetchError.transport) {
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
        if transferBytes == 0 {
            fruitlessTransfers += 1
            if fruitlessTransfers >= 3 { return finish(.noProgress) }
        } else {
            fruitlessTransfers = 0
            attempt = 0
        }
        nextRequest()
    }
}
