#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The transfer side of `PrefetchJob`: carrying out `ResponseJudge`'s verdict on a response head,
/// writing the body through the `EntryWriter`, and handing a transfer that ended to `RetryPolicy`.
extension PrefetchJob {
    // MARK: - Transfers

    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        fetcher.preconditionOnLoop()
        guard case .fetching(var x) = phase, x.transfer === transfer else {
            preconditionFailure("prefetch job for \(item.url): a response head in \(phase)")
        }
        x.status = head.status
        let verdict = verdict(on: head, asked: x.asked)
        // A stream member that is empty (a 200 with no body, a 416 for `bytes */0`: a CDN's
        // failure) is no segment and no key.
        switch verdict {
        case .accept(_, _, let v), .learnLength(let v, _):
            if v.length == 0, let why = item.checkSegment?.problem(length: 0, firstBytes: [UInt8]()) {
                x.failure = .notTheVideo(why)
                update(x)
                return .stop
            }
        default: break
        }
        switch verdict {
        case .accept(let offset, let limit, let v):
            adopt(v, contentType: head.contentType)
            let digests = OriginDigests.parse(head)
            if !digests.isEmpty { adoptChecks(DigestCheck.withOrigin(entry.checks, digests), stored: entry.checks) }
            noteFinalURL(head.effectiveURL)
            x.closeDelimited = head.status == 200 && head.bodyEnd == .connectionClose && v.length == nil
            beginWriting(&x, at: offset, limit: limit)
            splitAcrossConnections(&x, validators: v)
            update(x)
            return .proceed
        case .replace(let offset, let limit, let v, let reason):
            if isRangePlannedMember, head.status == 200, let writer, writer.writeStaged() == nil,
               let check = SameBytesCheck(held: writer.held, old: entry.validators, answer: v, contentType: head.contentType, reason: reason) {
                // The whole file under other validators: compared with what is held before any of
                // it is written; the same bytes are the same file (`compareWithHeld`), and no
                // version change is counted for it (per-answer ETags and a connection cut: the
                // retries' limit, exit 3, not "the version changed 3 times", exit 4).
                trace("the whole file under other validators: compared with the \(check.held.count) bytes held")
                x.sameBytes = check
                beginWriting(&x, at: 0, limit: max(limit ?? check.end, check.end))
                update(x)
                return .proceed
            }
            if let e = versionChangeRefused(reason) {
                x.failure = e
                update(x)
                return .stop
            }
            if isRangePlannedMember {
                // Ranges a manifest or sidx gave for the old version cut the new one wrong: the old
                // version goes, and the item fails, so the next run plans from the new one.
                x.failure = .changedUnderRanges(reason)
                update(x)
                dropVersion(to: v, reason: reason, interrupting: x, then: .awaitEnd)
                return .stop
            }
            if let type = head.contentType { noteContentType(type) }
            noteNextOriginDigests(OriginDigests.parse(head))
            dropVersion(to: v, reason: reason, interrupting: x, then: .write(offset: offset, limit: limit))
            return .hold
        case .learnLength(let v, let drop):
            if !drop {
                adopt(v, contentType: nil)
                update(x)
            } else if let e = versionChangeRefused("its length changed") {
                x.failure = e
                update(x)
            } else {
                // (A member asked for by ranges fails as for a replace, below.)
                if isRangePlannedMember { x.failure = .changedUnderRanges("its length changed") }
                dropVersion(to: v, reason: "its length changed", interrupting: x, then: .awaitEnd)
            }
            return .stop
        case .reject(let e):
            x.failure = e
            x.retryAfter = head.retryAfter
            update(x)
            return .stop
        }
    }

    /// The part of `bytes` (at `x.offset`) before the end of the held bytes, compared with them
    /// (`SameBytesCheck`); what follows it is returned, to be written as any body. Every held byte
    /// equal: the file is the same under the answer's validators, adopted, and the bytes between
    /// held ranges are written. One differing: the version changed, dropped as any other, the item
    /// failing (`changedUnderRanges`); nil then (the transfer stops).
    private func compareWithHeld(_ x: inout Exchange, _ bytes: UnsafeRawBufferPointer, writer: EntryWriter) -> UnsafeRawBufferPointer? {
        guard var check = x.sameBytes else { return bytes }
        let n = Int(min(Int64(bytes.count), check.end - x.offset))
        guard check.take(UnsafeRawBufferPointer(rebasing: bytes[0..<n]), at: x.offset, read: { try writer.data.bytes(Int($0.count), at: $0.lowerBound) }) else {
            x.sameBytes = nil
            x.failure = .changedUnderRanges(check.reason)
            if let e = versionChangeRefused(check.reason) {
                x.failure = e
                update(x)
                return nil
            }
            update(x)
            dropVersion(to: check.validators, reason: check.reason, interrupting: x, then: .awaitEnd)
            return nil
        }
        x.offset += Int64(n)
        guard x.offset == check.end else {
            x.sameBytes = check
            return UnsafeRawBufferPointer(rebasing: bytes[n...])
        }
        x.sameBytes = nil
        trace("the same bytes: kept under the new validators")
        adopt(check.validators, contentType: check.contentType)
        for gap in check.gaps {
            let (staged, error) = gap.bytes.withUnsafeBytes { writer.stage($0, at: gap.offset) }
            x.bytes += Int64(staged)
            received(staged)
            if let error {
                x.failure = error
                update(x)
                return nil
            }
        }
        return UnsafeRawBufferPointer(rebasing: bytes[n...])
    }

    /// A stream member asked for by byte ranges its manifest or sidx gave (`rangesMustFit`): they
    /// hold for the version they were planned from only.
    var isRangePlannedMember: Bool { item.rangesMustFit && item.checkSegment != nil }

    func beginWriting(_ x: inout Exchange, at offset: Int64, limit: Int64?) {
        x.offset = offset
        x.limit = limit
        // Keep the digest running only when this run can complete the video (not for a head).
        // (With the other digests the video is expected to have: from the same bytes.)
        if let digest = digestWanted() { writer?.checkpointer.streamDigest(digest, others: entry.checkedAlgorithms) }
    }

    func transferShouldWait(_ transfer: CurlTransfer) -> Bool {
        fetcher.preconditionOnLoop()
        guard overCommitted else { return false }
        checkpoint(wait: false)  // hand what is pending over now; tick releases the transfer
        return overCommitted
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        fetcher.preconditionOnLoop()
        guard case .fetching(var x) = phase, let writer else { return false }
        var bytes = bytes
        if x.sameBytes != nil {
            guard let rest = compareWithHeld(&x, bytes, writer: writer) else { return false }
            bytes = rest
            guard !bytes.isEmpty else {
                update(x)
                return true
            }
        }
        defer { update(x) }
        var count = bytes.count
        if x.offset < 4096, x.offset == Int64(x.manifest.start.count) { x.manifest.start += bytes.prefix(4096 - Int(x.offset)) }
        if let l = x.limit, x.offset + Int64(count) > l, let whole = wholeManifestLimit(x) { x.limit = whole }
        let limit = min(x.limit ?? .max, stopPoint ?? .max)
        if limit < .max {
            if x.offset >= limit {
                x.stoppedAtLimit = true
                return false
            }
            count = Int(min(Int64(count), limit - x.offset))
        }
        // Judged once 8 bytes came (a box header), or the whole body when it is shorter.
        let whole = entry.validators.length.map { Int64(count) >= $0 } ?? false
        if x.offset == 0, count >= 8 || whole, let why = Self.notAnMP4Start(url: item.url, bytes) ?? notASegment(bytes) {
            x.failure = .notTheVideo(why)
            return false
        }
        if let e = manifestOverCap(&x.manifest, at: x.offset, UnsafeRawBufferPointer(rebasing: bytes[0..<count])) {
            noteRefusedManifest()
            x.failure = e
            return false
        }
        let (staged, error) = writer.stage(UnsafeRawBufferPointer(rebasing: bytes[0..<count]), at: x.offset)
        x.offset += Int64(staged)
        x.bytes += Int64(staged)
        received(staged)
        if let error {
            x.failure = error
            return false
        }
        if count < bytes.count { x.stoppedAtLimit = true }
        return count == bytes.count
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        fetcher.preconditionOnLoop()
        switch phase {
        case .fetching(let x):
            precondition(x.transfer === transfer, "prefetch job for \(item.url): another job's transfer ended")
            enter(.idle)
            transferEnded(x, error: error)
        case .droppingVersion(var x?, _) where x.ended == nil:
            // Carried out once the drop is done.
            x.ended = Exchange.Ending(error: error)
            update(x)
        case .finished:
            break  // aborted before a transfer that never started could say so
        default:
            preconditionFailure("prefetch job for \(item.url): a transfer ended in \(phase)")
        }
    }

    /// What follows a transfer that ended (`RetryPolicy`): the next request, a retry, or the end.
    func transferEnded(_ x: Exchange, error: TransportError?) {
        guard !isFinished else { return }
        var failure = x.failure ?? error.map(PrefetchError.transport)
        var kept = x.bytes
        // A 200 that ended cleanly is the whole representation: with no length announced, its
        // length is what arrived (never ask for it again); when only the connection's close
        // ended it, once its bytes prove it whole (`CloseDelimitedBody`).
        // A stream member sent with no length (chunked, or ended by the close) is judged as one
        // with a Content-Length is: a body under 8 bytes (no box header fits) was never judged as
        // it came (0 bytes: not at all).
        if failure == nil && x.status == 200 && entry.validators.length == nil && !x.stoppedAtLimit {
            if x.offset < 8, let short = item.checkSegment?.problem(length: x.offset, firstBytes: x.manifest.start) {
                writer?.discard()
                failure = .notTheVideo(short)
                kept = 0
            } else {
                switch x.closeDelimited ? judgeCloseDelimited(x) : .whole {
                case .whole:
                    learnLength(x.offset)
                case .cut(let why):
                    // Not a byte of it is claimed (none was: see `tick`), so the retry starts afresh.
                    writer?.discard()
                    failure = .cutBody(received: x.offset, why: why)
                    kept = 0
                case .unproven(let why):
                    failure = .unprovenEnd(received: x.offset, why: why)
                }
            }
        }
        checkpoint(wait: false, startWriteback: false)
        // Progress is what this transfer added to the entry (none when its cut body was dropped).
        let ended = RetryPolicy.Ended(failure: failure, bytes: kept == 0 ? 0 : x.newBytes(writer), retryAfter: x.retryAfter,
                                      moreWanted: nextAsked() != nil, stopping: fetcher.isStopped)
        switch decide(ended) {
        case .retry(let why, let attempt, let delay):
            emit(.retrying(url: item.url, attempt: attempt, delay: delay, reason: why.description))
            fetcher.after(delay) { [self] in nextRequest() }
        case .next:
            nextRequest()
        case .fail(let e):
            finish(e)
        }
    }

    /// A manifest the run would read (an HLS playlist, a DASH MPD: known by its first bytes or its
    /// Content-Type) is stopped as soon as its body passes the size vcache reads as one, not
    /// downloaded whole first. Nil: not a manifest, or not past its limit.
    func manifestOverCap(_ watch: inout ManifestWatch, at offset: Int64, _ bytes: UnsafeRawBufferPointer) -> PrefetchError? {
        guard options.expandStreams, item.checkSegment == nil else { return nil }
        let end = offset + Int64(bytes.count)
        guard end > Int64(min(HLSPlaylist.maxBytes, MPD.maxBytes)) else { return nil }
        if watch.limit == nil {
            // Decided once (a video's every later chunk skips it).
            let head = watch.start, type = entry.contentType
            if MPD.looksLikeMPD(firstBytes: head, contentType: type) {
                watch.limit = .some((MPD.maxBytes, "a DASH MPD"))
            } else if HLSPlaylist.looksLikePlaylist(firstBytes: Array(head.prefix(16)), contentType: type) {
                watch.limit = .some((HLSPlaylist.maxBytes, "an HLS playlist"))
            } else {
                watch.limit = .some(nil)
            }
        }
        guard let (limit, what) = watch.limit ?? nil, end > Int64(limit) else { return nil }
        let size = entry.validators.length.map { " of \(Units.formatSize($0))" } ?? ""
        return .stream("\(item.url) is \(what)\(size), larger than the \(Units.formatSize(Int64(limit))) vcache reads as one: its transfer was stopped once past that limit")
    }

    /// Where a body sent whole (200) that is a manifest (an HLS playlist, a DASH MPD, by its first
    /// bytes or Content-Type) stops instead of the head's limit: its end, at most the size vcache
    /// reads as one. Asking again for the rest costs another origin request, and from an origin
    /// that ignores Range another whole body, which without a validator reads as another version
    /// (the head dropped, the MPD then taken for a video). Nil: not such a body.
    private func wholeManifestLimit(_ x: Exchange) -> Int64? {
        guard x.status == 200, item.checkSegment == nil, !x.manifest.start.isEmpty else { return nil }
        let type = entry.contentType, start = x.manifest.start
        let most: Int
        if MPD.looksLikeMPD(firstBytes: start, contentType: type) { most = MPD.maxBytes }
        else if HLSPlaylist.looksLikePlaylist(firstBytes: Array(start.prefix(16)), contentType: type) { most = HLSPlaylist.maxBytes }
        else { return nil }
        return min(entry.validators.length ?? .max, Int64(most) + 1)
    }

    /// The bytes of a body the connection's close ended, judged where they were written.
    private func judgeCloseDelimited(_ x: Exchange) -> CloseDelimitedBody.Verdict {
        guard let writer else { return .unproven("nothing was written") }
        if let e = writer.writeStaged() { return .unproven("they could not be written: \(e.description)") }
        let data = writer.data
        let member = item.checkSegment != nil
        return CloseDelimitedBody.judge(length: x.offset, member: member) { offset, count in try data.bytes(count, at: offset) }
    }
}

/// A transfer's body while it may be a manifest (an HLS playlist, a DASH MPD): a manifest is
/// stopped as soon as it passes the size vcache reads as one (`PrefetchJob.manifestOverCap`).
struct ManifestWatch {
    /// The first bytes of a body from offset 0, at most 4 KiB.
    var start: [UInt8] = []
    /// What those first bytes were found to be once the body passed the smaller limit, decided
    /// once (nil: not decided yet): the manifest's limit and its name, or nil for anything else.
    var limit: (limit: Int, what: String)??
}
