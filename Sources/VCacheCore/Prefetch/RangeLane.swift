/// One extra connection of a job that fetches its entry over several (`--connections N`): ranged
/// requests for the bytes of one piece (`ConnectionSplit`), each sent with If-Range (the version
/// the job's first response established), each response head judged by the job's own
/// `ResponseJudge`, the body written through the job's `EntryWriter` (in a staging lane of its
/// own) into the same `data`, so the job's checkpoints claim it. A lane never decides for the
/// entry: another version, a refusal it cannot retry, or an origin that ignores ranges ends it,
/// and the job takes over (`PrefetchJob+Connections.swift`). Its retries follow `RetryPolicy`.
/// Loop thread only, like its job, which keeps it alive (a transfer's delegate is weak).
final class RangeLane: TransferDelegate {
    let job: PrefetchJob
    /// Its staging lane in the job's writer (0 is the job's own transfer).
    let number: Int
    /// Bytes of its piece not yet written (staged bytes count as written).
    private(set) var remaining: RangeSet
    private var current: Current?
    private var tries = RetryPolicy.Count()
    /// Done, given up or detached: nothing more is sent, nothing more is written.
    private(set) var ended = false

    /// The transfer in flight and what became of it.
    private struct Current {
        let transfer: CurlTransfer
        let asked: ByteRange
        var offset: Int64
        var bytes: Int64 = 0
        var failure: PrefetchError?
        var retryAfter: Double?
        /// Its response was of another version than the job's: (the new validators, why).
        var newVersion: (Validators, String)?
    }

    init(job: PrefetchJob, number: Int, piece: RangeSet) {
        self.job = job
        self.number = number
        remaining = piece
    }

    var transfer: CurlTransfer? { current?.transfer }

    /// Sends the request for its next missing bytes; ends the lane when there are none.
    func send() {
        guard !ended, !job.isFinished, !job.fetcher.isStopped, current == nil else { return }
        guard let next = RangeSet.coalesce(remaining.ranges, within: job.options.coalesceGap).first else {
            return end(gaveUp: nil)
        }
        let ifRange = job.entry.validators.ifRange
        job.trace("> GET Range: bytes=\(next.httpSpec)" + (ifRange.map { " If-Range: \($0)" } ?? "") + " (connection \(number + 1))")
        do {
            var request = job.options.request
            if request.allowedOrigins == nil, let only = job.item.memberOrigins { request.allowedOrigins = only }
            request.ownConnection = true  // not a stream of the first connection's HTTP/2 connection
            let t = try CurlTransfer(url: job.item.fetchURL, range: next.httpSpec, ifRange: ifRange, options: request, delegate: self)
            current = Current(transfer: t, asked: next, offset: next.lowerBound)
            job.fetcher.add(t)
        } catch {
            end(gaveUp: PrefetchError(error))
        }
    }

    /// Stops it for good: its transfer is removed, and nothing of it is written again.
    /// `deferred`: on the loop's next turn (called inside a libcurl callback, where no handle
    /// can be removed; the lane refuses its bytes meanwhile).
    func detach(deferred: Bool) {
        guard !ended else { return }
        ended = true
        remaining = RangeSet()
        if let t = current?.transfer {
            let fetcher = job.fetcher
            if deferred { fetcher.after(0) { fetcher.cancel(t) } } else { fetcher.cancel(t) }
        }
        current = nil
    }

    /// Lets its transfer go on when it was held for the commits to catch up.
    func release() {
        if let t = current?.transfer, t.held { job.fetcher.release(t) }
    }

    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        job.fetcher.preconditionOnLoop()
        guard !ended, var c = current, c.transfer === transfer, job.acceptsLaneBytes else { return .stop }
        defer { current = c }
        switch job.verdict(on: head, asked: ResponseJudge.Asked(c.asked)) {
        case .accept(let offset, _, _) where offset == c.asked.lowerBound:
            return .proceed
        case .accept:
            // A 200 of the same version: the origin ignores ranges, so no piece can be had apart.
            c.failure = .http(status: head.status, reason: "the origin answered a range request with the whole video")
        case .replace(_, _, let v, let reason):
            c.newVersion = (v, reason)
        case .learnLength(let v, _):
            c.newVersion = v == job.entry.validators ? nil : (v, "its length changed")
            c.failure = .http(status: head.status, reason: head.reason)
        case .reject(let e):
            c.failure = e
            c.retryAfter = head.retryAfter
        }
        return .stop
    }

    func transferShouldWait(_ transfer: CurlTransfer) -> Bool {
        job.fetcher.preconditionOnLoop()
        return job.laneShouldWait()
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        job.fetcher.preconditionOnLoop()
        guard !ended, var c = current, c.transfer === transfer, job.acceptsLaneBytes, let writer = job.writer else { return false }
        defer { current = c }
        let count = Int(min(Int64(bytes.count), c.asked.upperBound - c.offset))
        guard count > 0 else { return false }
        let (staged, error) = writer.stage(UnsafeRawBufferPointer(rebasing: bytes[0..<count]), at: c.offset, lane: number)
        remaining.remove(ByteRange(c.offset, c.offset + Int64(staged)))
        c.offset += Int64(staged)
        c.bytes += Int64(staged)
        job.received(staged)
        if let error {
            c.failure = error
            return false
        }
        return count == bytes.count
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        job.fetcher.preconditionOnLoop()
        guard !ended, let c = current, c.transfer === transfer else { return }
        current = nil
        if let (v, reason) = c.newVersion { return job.laneFoundAnotherVersion(v, reason: reason) }
        // Stopped at the end of what it asked for: not a failure.
        let failure = c.offset >= c.asked.upperBound ? nil : c.failure ?? error.map(PrefetchError.transport)
        if case .disk? = failure { return end(gaveUp: failure) }
        let ended = RetryPolicy.Ended(failure: failure, bytes: c.bytes, retryAfter: c.retryAfter,
                                      moreWanted: !remaining.isEmpty, stopping: job.fetcher.isStopped)
        let (decision, tries) = RetryPolicy(job.options).decide(ended, after: tries, jitter: .random(in: 0.8...1.2))
        self.tries = tries
        switch decision {
        case .retry(let why, let attempt, let delay):
            job.emit(.retrying(url: job.item.url, attempt: attempt, delay: delay, reason: "connection \(number + 1): \(why.description)"))
            job.fetcher.after(delay) { [self] in send() }
        case .next:
            send()
        case .fail(let e):
            end(gaveUp: e)
        }
    }

    /// Its piece is written (`gaveUp` nil), or it gives the rest back to the job.
    private func end(gaveUp: PrefetchError?) {
        guard !ended else { return }
        ended = true
        remaining = RangeSet()
        if let gaveUp { job.trace("connection \(number + 1) gave its bytes back to the first: \(gaveUp.description)") }
        job.laneEnded(self, gaveUp: gaveUp)
    }
}
