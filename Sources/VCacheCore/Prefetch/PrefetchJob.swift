#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Fills one entry, as a driver over pure parts: `EntryPlan` says what to request next,
/// `ResponseJudge` what a response head allows, `RetryPolicy` what follows a transfer that ended,
/// `MP4Planner` what an MP4 goal still needs; `EntryWriter` writes and claims the bytes. The job
/// keeps its phase in one enum (`Phase`), changed only through `enter(_:)`, which checks each
/// transition.
///
/// Invariants kept here (Docs/cache-format.md, "Invariants"):
/// 1. a writer that takes the entry first drops claims beyond what `data` really holds;
/// 2./3. every response head is judged by `ResponseJudge` before a byte of its body is written;
///    dropping an old version (catalog rows first, then a new `data`) runs on the checkpoint
///    queue while the transfer is held, never inside a libcurl callback;
/// 4. all writing happens under the entry's exclusive writer lock.
/// Parts without a strong validator are combined only within one run: a run that must add to
/// such an entry starts it over (Docs/cache-format.md, "Versions").
/// Everything below is the Fetcher's loop thread's: each entry point checks it
/// (`Fetcher.preconditionOnLoop`), and timers and offloaded results come back there.
final class PrefetchJob: TransferDelegate {
    let item: PrefetchItem
    let store: CacheStore
    let options: PrefetchOptions
    let fetcher: Fetcher
    let emit: (PrefetchEvent) -> Void
    let onFinish: (PrefetchJob) -> Void
    let key: CacheKey
    private let startTime = ContinuousClock.now
    private let policy: RetryPolicy

    private(set) var phase = Phase.created
    private var lock: EntryLock?
    /// What this job writes into the entry's current version (from the lock to the end).
    private(set) var writer: EntryWriter?
    private(set) var entry = EntryFacts()
    private(set) var plan: EntryPlan
    private var tries = RetryPolicy.Count()
    /// Body bytes received in this run, and when progress was last reported.
    private var progress = (fetched: Int64(0), reported: ContinuousClock.now)
    /// Its extra connections (`--connections`; PrefetchJob+Connections.swift).
    private(set) var connections = Connections()

    /// `storeKey`: the entry it fills, when not its URL's (a live manifest's refetch: `LiveRefetch`).
    init(item: PrefetchItem, store: CacheStore, options: PrefetchOptions, fetcher: Fetcher, storeKey: CacheKey? = nil,
         emit: @escaping (PrefetchEvent) -> Void, onFinish: @escaping (PrefetchJob) -> Void) {
        self.item = item
        self.store = store
        self.options = options
        self.fetcher = fetcher
        self.emit = emit
        self.onFinish = onFinish
        key = storeKey ?? options.keyRules.key(for: item.url)
        policy = RetryPolicy(options)
        plan = EntryPlan(requests: item.requests, coalesceGap: options.coalesceGap)
    }

    var result: PrefetchResult? {
        if case .finished(let r) = phase { r } else { nil }
    }

    var isFinished: Bool { result != nil }

    /// Body bytes received in this run, by every connection (progress).
    var fetched: Int64 { progress.fetched }

    /// Changes the phase (the only way it changes); a change that cannot happen is a bug, and traps.
    func enter(_ next: Phase) {
        precondition(phase.mayBecome(next), "prefetch job for \(item.url): \(phase) cannot become \(next)")
        phase = next
    }

    /// Records what became of the exchange in flight (the phase stays what it is).
    func update(_ x: Exchange) {
        switch phase {
        case .fetching: phase = .fetching(x)
        case .droppingVersion(_, let then): phase = .droppingVersion(x, then: then)
        default: preconditionFailure("prefetch job for \(item.url): no exchange in \(phase)")
        }
    }

    /// The transfer in flight (held by a drop, too), if any.
    var transferInFlight: CurlTransfer? {
        switch phase {
        case .fetching(let x): x.transfer
        case .droppingVersion(let x?, _) where x.ended == nil: x.transfer
        default: nil
        }
    }

    /// Where this job must stop writing (serve moves it when another job takes over the rest).
    var stopPoint: Int64? { options.stopAt?() }

    /// A line of `--verbose` output (nothing unless asked for).
    func trace(_ message: @autoclosure () -> String) {
        if options.verbose { emit(.trace(url: item.url, message: message())) }
    }

    // MARK: - Start and lock

    func start() {
        fetcher.preconditionOnLoop()
        if let why = PrefetchItem.urlProblem(item.url) { return finish(.invalidURL(why)) }
        acquireLock()
    }

    private func acquireLock() {
        guard !fetcher.isStopped, !isFinished else { return }
        // With a shared lock the caller holds the entry for this job (and others): opened here.
        guard options.sharedLock == nil else { return openShared() }
        // The lock, `data` and the catalog's read are taken off the loop (`EntryOpening`).
        let opening = EntryOpening(store: store, key: key)
        let waited = if case .waitingForLock = phase { true } else { false }
        enter(.opening(opening, waited: waited))
        fetcher.offload(to: EntryOpening.queue, { opening.run(replacingUnclaimed: true) }, then: { [self] in opened(opening) })
    }

    /// Back on the loop with what `opening` took.
    private func opened(_ opening: EntryOpening) {
        guard case .opening(let current, let waited) = phase, current === opening, let outcome = opening.take() else { return }
        switch outcome {
        case .busy:
            guard options.waitForLock else { return finish(.lockBusy) }
            enter(.waitingForLock)
            if !waited { emit(.waitingForLock(url: item.url)) }
            fetcher.after(0.05) { [self] in acquireLock() }
        case .failed(let e, let lock, let existedBefore):
            self.lock = lock
            entry.existedBefore = existedBefore
            finish(e)
        case .opened(let o):
            lock = o.lock
            enter(.idle)
            begin(data: o.data, found: o.found, stored: o.stored, existedBefore: o.existedBefore)
        }
    }

    /// serve's jobs: the entry is held for them already, opened on the loop.
    private func openShared() {
        do {
            enter(.idle)
            // Known before anything can fail (see `EntryFacts.existedBefore`).
            entry.existedBefore = FileSystem.exists(store.dataPath(key))
            // (serve's jobs share the lock: they write only the version their readers were promised,
            // so bytes no claim vouches for stay.)
            let (data, found) = try Self.open(store: store, key: key, replacingUnclaimed: false)
            let stored: [DigestCheck]
            do {
                stored = found == nil ? [] : try store.catalog.expectedDigests(key: key)
            } catch {
                data.close()
                throw error
            }
            begin(data: data, found: found, stored: stored, existedBefore: entry.existedBefore || found != nil)
        } catch {
            finish(PrefetchError(error))
        }
    }

    /// The entry is taken: its writer, its expected digests, and the first request.
    private func begin(data: RawFile, found: CacheEntry?, stored: [DigestCheck], existedBefore: Bool) {
        entry = EntryFacts(found: found, existedBefore: existedBefore,
                           heldBytesAreThisRuns: options.heldBytesAreThisRuns || item.heldBytesAreThisRuns)
        let checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: data,
                                        committed: found?.ranges ?? RangeSet(), onCommit: fetcher.waker)
        writer = EntryWriter(data: data, checkpointer: checkpointer, options: options)
        // The digests expected of it: those stored with the entry, and this item's (a value
        // given anew for an algorithm is a changed expectation: checked again).
        adoptChecks(DigestCheck.merged(stored: stored, given: item.expected), stored: stored)
        entry.alreadyCached = emitStarted()
        // A stream member found cached (a plain entry fetched before, an error page answered 200
        // under its URL) is judged as one fetched now would be; one that fails is fetched again.
        if let why = cachedMemberProblem(found, data: data) {
            guard mayDropVersion() else { return finish(.lockBusy) }
            return dropVersion(to: Validators(length: nil, etag: nil, lastModified: nil), reason: "its cached bytes are not this stream member: \(why)",
                               changed: false, interrupting: nil, then: .nextRequest)
        }
        if !entry.heldFromThisRunOnly && !entry.validators.hasStrongValidator && nextAsked() != nil {
            // Parts without a strong validator are never combined across runs.
            guard mayDropVersion() else { return finish(.lockBusy) }
            var reason = "the cached bytes have no strong validator (ETag or Last-Modified), so they cannot be combined with new ones"
            // A run stopped by its clock begins again from byte 0 the next time, forever when no
            // run has the time to fetch it whole (hostile probe h2, F12): said, with what to do.
            if options.maxTime != nil {
                let size = entry.validators.length.map { " (\(Units.formatSize($0)))" } ?? ""
                reason += "; a run stopped by --max-time before its end leaves it to be fetched again from the start, so it is kept only by a run long enough to fetch all of it\(size): give --max-time that long, or have the origin send an ETag or Last-Modified"
            }
            return dropVersion(to: entry.validators, reason: reason, changed: false, interrupting: nil, then: .nextRequest)
        }
        nextRequest()
    }

    /// Why the cached bytes of a stream member (its first bytes, its range pieces, its whole
    /// boxes when complete: `HLSMemberCheck`) are not one; nil when they may be, or are not held.
    private func cachedMemberProblem(_ found: CacheEntry?, data: RawFile) -> String? {
        guard let check = item.checkSegment, let e = found, let length = e.length, length > 0 else { return nil }
        let read: MP4Walker.Read = { offset, count in try data.bytes(count, at: offset) }
        let first = min(length, 376)
        if e.ranges.contains(ByteRange(0, first)), let bytes = try? read(0, Int(first)),
           let why = check.problem(length: length, firstBytes: bytes) { return why }
        return memberShape.problem(held: e.ranges, length: length, whole: e.isComplete, read: read)
    }

    /// Whether this job may drop the entry's version now: always, unless it shares the entry's
    /// lock with other jobs (then only when it is alone; see SharedEntryLock).
    func mayDropVersion() -> Bool { options.sharedLock?.beginExclusive() ?? true }

    // MARK: - Loop hooks

    /// Called by the loop after every wake-up: checkpoint and progress, never from a data callback.
    func tick() {
        fetcher.preconditionOnLoop()
        guard !isFinished, let writer else { return }
        // A checkpoint that failed (disk full, fsync EIO, catalog busy too long) stops the entry:
        // bytes that cannot be claimed are not worth downloading.
        if let e = writer.checkpointer.firstError ?? writer.deferredError { return abort(e) }
        if case .droppingVersion = phase { return }
        // Back-pressure: a transfer held because commits fell behind goes on once they caught up.
        if case .fetching(let x) = phase, x.transfer.held, !overCommitted { fetcher.release(x.transfer) }
        if !connections.lanes.isEmpty, !overCommitted { releaseLanes() }
        // Readers in this process (serve) wait for bytes: they get them at every wake-up.
        if options.onWrite != nil, writer.hasStaged, let e = writer.writeStaged() { return abort(e) }
        let now = ContinuousClock.now
        // A body only the connection's close ends is claimed once judged (`transferEnded`).
        if case .fetching(let x) = phase, x.closeDelimited {
            emitProgressIfDue(now)
            return
        }
        if writer.checkpointDue(bytes: options.checkpointBytes, interval: options.checkpointInterval, now: now) {
            checkpoint(wait: false)
        }
        emitProgressIfDue(now)
    }

    private func emitProgressIfDue(_ now: ContinuousClock.Instant) {
        var moving = !connections.lanes.isEmpty
        if case .fetching = phase { moving = true }
        if moving, now - progress.reported >= .milliseconds(200) {
            progress.reported = now
            emitProgress()
        }
    }

    func checkpoint(wait: Bool, startWriteback: Bool = true) {
        writer?.checkpoint(validators: entry.validators, contentType: entry.contentType, wait: wait, startWriteback: startWriteback)
    }

    /// The run is stopping (SIGINT/SIGTERM or a deadline): checkpoint what arrived and report.
    /// A video whose every byte has arrived is completed instead: a stop just after its last byte
    /// (serve stopped as the player got it) leaves it whole, with its digest, not a partial entry.
    func abort(_ error: PrefetchError) {
        fetcher.preconditionOnLoop()
        detachLanes()
        if let t = transferInFlight { fetcher.cancel(t) }
        if error == .interrupted || error == .deadline, completeOnStop() { return }
        finish(error)
    }

    /// `complete` run here, the loop being over: when every byte of the video is held and no
    /// digest is stored yet, the last commit with the digest, on the checkpoint queue, waited
    /// for. False (nothing done) otherwise.
    private func completeOnStop() -> Bool {
        switch phase {
        case .fetching, .idle: break
        default: return false
        }
        guard let writer, let length = entry.validators.length, length > 0, !entry.wasComplete,
              writer.writeStaged() == nil, writer.held.contains(ByteRange(0, length)) else { return false }
        if case .fetching = phase { enter(.idle) }
        let batch = writer.takePending()
        enter(.completing)
        let checkpointer = writer.checkpointer, data = writer.data
        let validators = entry.validators, contentType = entry.contentType, drop = allClaimsDropper, checks = entry.checks, shape = memberShape
        let outcome = checkpointer.queue.sync {
            Self.finalize(checkpointer, data: data, batch: batch, validators: validators, contentType: contentType, needsDigest: true,
                          checks: checks, member: shape, dropAllClaims: drop)
        }
        switch outcome {
        case .failed(let e): finish(e)
        case .completed: finish(nil, completed: true)
        case .partial: finish(nil)
        }
        return true
    }

    /// More than eight checkpoint windows (32 MiB) are written but not yet committed (the disk is
    /// slower than the network): hold the transfer, so a crash never costs more than that. Each
    /// commit wakes the loop, which lets the transfer go on as soon as it is back under. (Three
    /// windows held a 1 GiB download to 2.6 s against 1.6 s unbounded; eight cost 2.0 s.)
    /// (Never for a body only the connection's close ends: none of it is committed before its end.)
    var overCommitted: Bool {
        if case .fetching(let x) = phase, x.closeDelimited { return false }
        return writer?.uncommitted(over: 8 * options.checkpointBytes) ?? false
    }

    // MARK: - What changes the entry's state (the only writers of the fields above)

    /// Why the version may not change now: one change too many in this run, or other jobs share
    /// the entry's lock. Nil: it may (and, with a shared lock, this job now holds it alone).
    func versionChangeRefused(_ reason: String) -> PrefetchError? {
        if let e = policy.versionChanged(reason, count: &tries) { return e }
        return mayDropVersion() ? nil : .lockBusy
    }

    /// Records the validators of the same version (already merged with what was held).
    func adopt(_ v: Validators, contentType newType: String?) {
        entry.validators = v
        if let newType { entry.contentType = newType }
        // The length was unknown until now, so nothing of the request was cached before.
        if entry.alreadyCached == nil && v.length != nil { entry.alreadyCached = 0 }
    }

    /// The length of a body that had none announced: what arrived.
    func learnLength(_ length: Int64) {
        entry.validators.length = length
        if entry.alreadyCached == nil { entry.alreadyCached = 0 }
    }

    /// What follows a transfer that ended, counting it towards the retry rules.
    func decide(_ ended: RetryPolicy.Ended) -> RetryPolicy.Decision {
        let (decision, tries) = policy.decide(ended, after: tries, jitter: .random(in: 0.8...1.2))
        self.tries = tries
        return decision
    }

    func received(_ bytes: Int) { progress.fetched += Int64(bytes) }

    func addLane(_ lane: RangeLane) { connections.lanes.append(lane) }

    func removeLane(_ lane: RangeLane) { connections.lanes.removeAll { $0 === lane } }

    /// Stops every lane (their transfers, their writes); what they did not write is the job's again.
    /// `deferred`: called inside a libcurl callback (`RangeLane.detach`).
    func detachLanes(deferred: Bool = false) {
        for lane in connections.lanes { lane.detach(deferred: deferred) }
        connections.lanes = []
        connections.waiting = false
    }

    /// No piece is split off again in this run. `noting`: the version lacks a strong validator;
    /// true the first time (the line saying so is due).
    @discardableResult
    func refuseConnections(noting: Bool) -> Bool {
        connections.refused = true
        guard noting, !connections.weakNoted else { return false }
        connections.weakNoted = true
        return true
    }

    /// Nothing is left for the job's own transfer but the lanes' bytes: it waits for them.
    func waitForLanes() { connections.waiting = true }

    /// The job stops waiting for its lanes; false when it was not waiting.
    func stopWaitingForLanes() -> Bool {
        defer { connections.waiting = false }
        return connections.waiting
    }

    /// The response of a new version names its type before the old version is dropped.
    func noteContentType(_ type: String) { entry.contentType = type }
    func noteFinalURL(_ url: String) { entry.finalURL = url }
    func notePlaylist() { entry.isPlaylist = true }
    func noteRefusedManifest() { entry.refusedManifest = true }

    /// The entry's expected digests are now `checks` (written with the next commit when they
    /// differ from `stored`, the catalog's).
    func adoptChecks(_ checks: [DigestCheck], stored: [DigestCheck]) {
        entry.checks = checks
        if checks != stored { writer?.checkpointer.setExpectations(checks) }
    }

    /// A new version's origin digests, recorded once the old version is dropped (`beginVersion`).
    func noteNextOriginDigests(_ digests: [ExpectedDigest]) { entry.nextOriginDigests = digests }

    /// The MP4's structure needs `ranges` too.
    func planMP4(_ ranges: RangeSet) { plan.addMP4(ranges) }

    /// The MP4 goal is met, or cannot be: no more planner steps.
    func settleMP4() { plan.settleMP4() }

    /// The old version is gone and `fresh` is the entry's new, empty `data`: bytes of `version`
    /// go there, written by a new writer (its checkpointer carries the old one's counts over).
    func beginVersion(_ version: Validators, in fresh: RawFile) {
        let checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: fresh, committed: RangeSet(),
                                        carrying: writer?.checkpointer, onCommit: fetcher.waker)
        writer = EntryWriter(data: fresh, checkpointer: checkpointer, options: options, replacing: writer)
        // The given digests stand for every version, unchecked again; the origin's are the new one's.
        let checks = entry.checks.filter(\.expected.source.isGiven).map { DigestCheck(expected: $0.expected) }
            + entry.nextOriginDigests.map { DigestCheck(expected: $0) }
        entry.nextOriginDigests = []
        adoptChecks(checks, stored: [])
        entry.validators = version
        entry.wasComplete = false
        entry.alreadyCached = 0
        entry.heldFromThisRunOnly = true
        plan.restartMP4()  // the new version's boxes are walked again
    }

    // MARK: - Finishing

    /// Ends the job: the last checkpoint (unless a drop is under way), the result, then `data`
    /// closed (after a failure, unclaimed bytes given back), the lock released, and the caller told.
    /// `completed`: the entry was just completed (its digest stored).
    func finish(_ error: PrefetchError?, completed: Bool = false) {
        if isFinished { return }
        detachLanes()
        if case .droppingVersion = phase {} else { checkpoint(wait: true) }
        let checkpointer = writer?.checkpointer
        checkpointer?.drain()
        if completed { entry.wasComplete = true }
        let result = makeResult(error: error, checkpointer: checkpointer)
        // Ended while its entry was being taken: what the opening took is given back.
        if case .opening(let opening, _) = phase { opening.abandon() }
        enter(.finished(result))
        writer?.close(failed: result.error != nil, giveBack: options.onGiveBack)
        writer = nil
        if lock != nil && !entry.existedBefore && (checkpointer?.commitCount ?? 0) == 0 {
            // A first fetch that stored nothing (a 404, say) leaves no folder behind.
            store.removeFiles(key: key)
        }
        lock?.release()
        lock = nil
        emit(.finished(result))
        onFinish(self)
    }

    /// What is true at the end: a checkpoint failure stands unless every wanted byte got
    /// committed after all.
    private func makeResult(error: PrefetchError?, checkpointer: Checkpointer?) -> PrefetchResult {
        let length = entry.validators.length
        let requested = length.map { plan.target(length: $0, stop: stopPoint).count }
        var error = error
        if error == nil, let e = checkpointer?.firstError {
            let committed = checkpointer?.committed ?? RangeSet()
            let covered = length.map { committed.contains(plan.target(length: $0, stop: stopPoint)) } ?? false
            if !covered { error = e }
        }
        return PrefetchResult(
            url: item.url, key: key, length: length, fetchedBytes: checkpointer?.addedBytes ?? 0,
            alreadyCachedBytes: entry.alreadyCached ?? 0, requestedBytes: requested, complete: entry.wasComplete,
            elapsed: (ContinuousClock.now - startTime).inSeconds, error: error,
            finalURL: entry.finalURL, isPlaylist: entry.isPlaylist)
    }
}
