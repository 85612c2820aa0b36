#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Fills one entry: plan = requested ranges minus cached ranges; one ranged GET per gap; bytes
/// pwritten at their absolute offsets as they stream; checkpoints by `Checkpointer`.
///
/// Invariants kept here (Docs/cache-format.md, "Invariants"):
/// 1. a writer that takes the entry first drops claims beyond what `data` really holds;
/// 2./3. every response head is judged by `ResponseJudge` before a byte of its body is written;
///    dropping an old version (catalog rows first, then a new `data`) runs on the checkpoint
///    queue while the transfer is held, never inside a libcurl callback;
/// 4. all writing happens under the entry's exclusive writer lock.
/// Parts without a strong validator are combined only within one run: a run that must add to
/// such an entry starts it over (Docs/cache-format.md, "Versions").
/// Runs entirely on the Fetcher's loop thread.
final class PrefetchJob: TransferDelegate {
    let item: PrefetchItem
    let store: CacheStore
    let options: PrefetchOptions
    let fetcher: Fetcher
    let emit: (PrefetchEvent) -> Void
    let onFinish: (PrefetchJob) -> Void
    let key: String
    private let startTime = ContinuousClock.now

    var lock: EntryLock?
    var data: RawFile? {
        didSet {
            dataID = try? data?.identity()
            writtenToData = RangeSet()
        }
    }
    /// Every span this job wrote into `data` (claimed or not): what a failure gives back.
    var writtenToData = RangeSet()
    /// The file `data` is (serve routes each written span to the readers of that very file).
    var dataID: FileID?
    var checkpointer: Checkpointer?
    private(set) var result: PrefetchResult?

    var validators = Validators(length: nil, etag: nil, lastModified: nil)
    var contentType: String?
    var existedBefore = false
    var wasComplete = false
    /// Every byte held was fetched by this run (so weak-validator parts may be combined).
    var heldFromThisRunOnly = true
    /// Written to `data` but not yet handed to the checkpointer.
    var pending = RangeSet()
    var pendingBytes: Int64 = 0
    /// Received bytes not yet written: one aligned write per `stageBytes`.
    var stage: StagedWrite
    /// A staged write that failed outside a data callback; the loop's next tick stops the entry.
    var stageError: PrefetchError?
    var lastCheckpoint = ContinuousClock.now
    var fetched: Int64 = 0
    var alreadyCached: Int64?
    var lastProgress = ContinuousClock.now
    var reportedWaiting = false
    var attempt = 0
    /// Ranges the MP4's structure asked for (box headers, the moov, samples), beyond `requests`.
    var mp4Ranges = RangeSet()
    /// The MP4 goal is met (or cannot be): no more planner steps.
    var mp4Settled = false
    /// An old version is being dropped off the loop; `afterDrop` runs once it is gone.
    var dropping = false
    var afterDrop: (() -> Void)?

    // The transfer in flight and what it was asked for.
    var transfer: CurlTransfer?
    var asked = ResponseJudge.Asked(spec: "", start: nil, end: nil)
    var responseStatus = 0
    var writeOffset: Int64 = 0
    var writeLimit: Int64?
    /// Body bytes were refused because they lay past `writeLimit`.
    var stoppedAtLimit = false
    var transferFailure: PrefetchError?
    var transferBytes: Int64 = 0
    var retryAfter: Double?
    var fruitlessTransfers = 0
    /// Versions dropped in this run; at `maxVersionChanges` the item is given up.
    var versionChanges = 0
    static let maxVersionChanges = 3

    init(item: PrefetchItem, store: CacheStore, options: PrefetchOptions, fetcher: Fetcher,
         emit: @escaping (PrefetchEvent) -> Void, onFinish: @escaping (PrefetchJob) -> Void) {
        self.item = item
        self.store = store
        self.options = options
        self.fetcher = fetcher
        self.emit = emit
        self.onFinish = onFinish
        stage = StagedWrite(capacity: options.stageBytes)
        key = options.keyRules.key(for: item.url)
    }

    var requests: [RangeRequest] { item.requests.isEmpty ? [.whole] : item.requests }

    /// A line of `--verbose` output (nothing unless asked for).
    func trace(_ message: @autoclosure () -> String) {
        if options.verbose { emit(.trace(url: item.url, message: message())) }
    }

    // MARK: - Start and lock

    func start() {
        if let why = PrefetchItem.urlProblem(item.url) { return finish(.invalidURL(why)) }
        acquireLock()
    }

    private func acquireLock() {
        guard !fetcher.isStopped, result == nil else { return }
        do {
            // With a shared lock the caller holds the entry for this job (and others).
            if options.sharedLock == nil {
                guard let lock = try store.tryLockWriter(key: key) else {
                    guard options.waitForLock else { return finish(.lockBusy) }
                    if !reportedWaiting {
                        reportedWaiting = true
                        emit(.waitingForLock(url: item.url))
                    }
                    fetcher.after(0.05) { [self] in acquireLock() }
                    return
                }
                self.lock = lock
            }
            // Known before anything can fail: a failure must not remove files this job did not
            // create (a complete entry's `data` that could not be opened, say for EMFILE).
            existedBefore = FileSystem.exists(store.dataPath(key))
            let data = try store.openDataForWriting(key: key)
            self.data = data
            // Read only now, under the lock: another writer may have filled it meanwhile.
            var entry = try store.catalog.entry(key: key)
            if let e = entry { entry = try store.dropClaimsBeyondData(e, data: data) }
            existedBefore = existedBefore || entry != nil
            validators = entry?.validators ?? validators
            contentType = entry?.contentType
            wasComplete = entry?.isComplete ?? false
            // serve vouches that every held byte came from its own run (it wrote them itself).
            heldFromThisRunOnly = options.heldBytesAreThisRuns || (entry?.ranges.isEmpty ?? true)
            checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: data, committed: entry?.ranges ?? RangeSet(),
                                        onCommit: fetcher.waker)
            if let length = validators.length {
                let target = targetRanges(length: length)
                let cached = target.count - missing(length: length).reduce(0) { $0 + $1.count }
                alreadyCached = cached
                emit(.started(url: item.url, key: key, length: length, alreadyCached: cached, toFetch: target.count - cached))
            } else {
                emit(.started(url: item.url, key: key, length: nil, alreadyCached: 0, toFetch: nil))
            }
            if !heldFromThisRunOnly && !validators.hasStrongValidator && plan() != nil {
                // Parts without a strong validator are never combined across runs.
                guard mayDropVersion() else { return finish(.lockBusy) }
                return dropVersion(to: validators, reason: "the cached bytes have no strong validator (ETag or Last-Modified), so they cannot be combined with new ones") { [self] in
                    nextRequest()
                }
            }
            nextRequest()
        } catch {
            finish(PrefetchError(error))
        }
    }

    // MARK: - Planning

    func targetRanges(length: Int64) -> RangeSet {
        var all = RangeSet(requests.compactMap { $0.resolve(length: length) })
        all.formUnion(mp4Ranges)
        // Another job took over the rest of this one's span.
        if let stop = options.stopAt?(), stop < length { all.remove(ByteRange(max(0, stop), length)) }
        return all
    }

    /// Whether this job may drop the entry's version now: always, unless it shares the entry's
    /// lock with other jobs (then only when it is alone; see SharedWriterLock).
    func mayDropVersion() -> Bool { options.sharedLock?.beginExclusive() ?? true }

    /// Everything held: committed, on its way to the catalog, or just written.
    var held: RangeSet {
        var have = checkpointer?.durableOrPending ?? RangeSet()
        have.formUnion(pending)
        return have
    }

    /// Requested bytes not held.
    func missing(length: Int64) -> [ByteRange] {
        let have = held
        var gaps: [ByteRange] = []
        for r in targetRanges(length: length).ranges { gaps += have.missing(in: r) }
        return gaps
    }

    /// The next request to send, or nil when every requested byte is held.
    func plan() -> ResponseJudge.Asked? {
        if let length = validators.length {
            let gaps = RangeSet.coalesce(missing(length: length), within: options.coalesceGap)
            return gaps.first.map(ResponseJudge.Asked.init)
        }
        let have = held
        return requests.lazy.compactMap { $0.firstMissing(in: have) }.first
    }

    /// The judge for the response to `asked`: where a 200's body may stop is the end of what is wanted.
    var judge: ResponseJudge {
        let wantedEnd: Int64?
        if let length = validators.length {
            wantedEnd = targetRanges(length: length).ranges.last?.upperBound ?? 0
        } else {
            let ends = requests.map(\.knownEnd)
            wantedEnd = ends.contains(nil) ? nil : ends.compactMap { $0 }.max()
        }
        return ResponseJudge(asked: asked, held: validators, hasBytes: hasAnyBytes, wantedEnd: wantedEnd,
                             weakPartsCombine: heldFromThisRunOnly)
    }

    func nextRequest() {
        guard !fetcher.isStopped, result == nil else { return }
        transferFailure = nil
        transferBytes = 0
        retryAfter = nil
        stoppedAtLimit = false
        responseStatus = 0
        guard let next = plan() else { return advanceMP4() }
        asked = next
        let ifRange = hasAnyBytes ? validators.ifRange : nil
        trace("> GET Range: bytes=\(next.spec)" + (ifRange.map { " If-Range: \($0)" } ?? ""))
        do {
            let t = try CurlTransfer(url: item.url, range: next.spec, ifRange: ifRange, options: options.request)
            t.delegate = self
            transfer = t
            fetcher.add(t)
        } catch {
            finish(PrefetchError(error))
        }
    }

    // MARK: - Loop hooks

    /// Called by the loop after every wake-up: checkpoint and progress, never from a data callback.
    func tick() {
        guard result == nil else { return }
        // A checkpoint that failed (disk full, fsync EIO, catalog busy too long) stops the entry:
        // bytes that cannot be claimed are not worth downloading.
        if let e = checkpointer?.firstError ?? stageError { return abort(e) }
        guard !dropping else { return }
        // Back-pressure: a transfer held because commits fell behind goes on once they caught up.
        if let t = transfer, t.held, !overCommitted { fetcher.release(t) }
        // Readers in this process (serve) wait for bytes: they get them at every wake-up.
        if options.onWrite != nil, !stage.isEmpty, let e = writeStaged() { return abort(e) }
        let now = ContinuousClock.now
        if pendingBytes > 0 && (pendingBytes >= options.checkpointBytes || now - lastCheckpoint >= .milliseconds(Int64(options.checkpointInterval * 1000))) {
            checkpoint(wait: false)
        }
        if transfer != nil && now - lastProgress >= .milliseconds(200) {
            lastProgress = now
            emitProgress()
        }
    }

    /// More than eight checkpoint windows (32 MiB) are written but not yet committed (the disk is
    /// slower than the network): hold the transfer, so a crash never costs more than that. Each
    /// commit wakes the loop, which lets the transfer go on as soon as it is back under. (Three
    /// windows held a 1 GiB download to 2.6 s against 1.6 s unbounded; eight cost 2.0 s.)
    var overCommitted: Bool {
        pendingBytes + (checkpointer?.inFlightBytes ?? 0) > 8 * options.checkpointBytes
    }

    private func emitProgress() {
        var toFetch: Int64?
        if let length = validators.length, let cached = alreadyCached {
            toFetch = max(fetched, targetRanges(length: length).count - cached)
        }
        emit(.progress(url: item.url, fetched: fetched, toFetch: toFetch))
    }

    func checkpoint(wait: Bool) {
        guard let checkpointer else { return }
        if let e = writeStaged(), stageError == nil { stageError = e }
        if !pending.isEmpty {
            for r in pending.ranges { data?.startWriteback(r) }
            checkpointer.submit(pending, validators: validators, contentType: contentType)
        }
        pending = RangeSet()
        pendingBytes = 0
        lastCheckpoint = ContinuousClock.now
        if wait { checkpointer.drain() }
    }

    /// The run is stopping (SIGINT/SIGTERM or a deadline): checkpoint what arrived and report.
    func abort(_ error: PrefetchError) {
        if let t = transfer {
            fetcher.cancel(t)
            transfer = nil
        }
        finish(error)
    }

    // MARK: - Finishing

    func finish(_ error: PrefetchError?) {
        guard result == nil else { return }
        if checkpointer != nil && !dropping { checkpoint(wait: true) }
        checkpointer?.drain()
        var requested: Int64?
        if let length = validators.length { requested = targetRanges(length: length).count }
        // What is true at the end: a checkpoint failure stands unless every requested byte got
        // committed after all.
        var error = error
        if error == nil, let e = checkpointer?.firstError {
            let committed = checkpointer?.committed ?? RangeSet()
            let covered = validators.length.map { committed.contains(targetRanges(length: $0)) } ?? false
            if !covered { error = e }
        }
        result = PrefetchResult(
            url: item.url, key: key, length: validators.length, fetchedBytes: checkpointer?.addedBytes ?? 0,
            alreadyCachedBytes: alreadyCached ?? 0, requestedBytes: requested, complete: wasComplete,
            elapsed: (ContinuousClock.now - startTime).inSeconds, error: error)
        if let data, error != nil {
            // Space written must be claimed or given back: bytes this job wrote that no
            // checkpoint could claim (a full disk, an fsync error) would otherwise take room that
            // neither the catalog, ls nor evict can see.
            var unclaimed = writtenToData
            for r in (checkpointer?.committed ?? RangeSet()).ranges { unclaimed.remove(r) }
            if let giveBack = options.onGiveBack, let id = dataID {
                giveBack(id, unclaimed) { data.punchHole($0) }
            } else {
                for r in unclaimed.ranges { data.punchHole(r) }
            }
        }
        data?.close()
        data = nil
        if lock != nil && !existedBefore && (checkpointer?.commitCount ?? 0) == 0 {
            // A first fetch that stored nothing (a 404, say) leaves no folder behind.
            store.removeFiles(key: key)
        }
        lock?.release()
        lock = nil
        emit(.finished(result!))
        onFinish(self)
    }
}
