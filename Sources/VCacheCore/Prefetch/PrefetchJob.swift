#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Fills one entry: plan = requested ranges minus cached ranges; one ranged GET per gap; bytes
/// pwritten at their absolute offsets as they stream; checkpoints by `Checkpointer`.
///
/// Invariants kept here (DESIGN.md):
/// 2. a response whose validators differ from the catalog's, or a 200 to a ranged request, drops
///    every cached range (and truncates `data`) before any of its bytes are written;
/// 3. a 206 is checked against the request before its first byte is written, and only bytes that
///    arrived are claimed, at the offsets the request named;
/// 4. all writing happens under the entry's exclusive writer lock.
/// Runs entirely on the Fetcher's loop thread.
final class PrefetchJob: TransferDelegate {
    let item: PrefetchItem
    let store: CacheStore
    let options: PrefetchOptions
    let fetcher: Fetcher
    let emit: (PrefetchEvent) -> Void
    let onFinish: (PrefetchJob) -> Void
    let key: String
    private let url: URL?
    private let startTime = ContinuousClock.now

    var lock: EntryLock?
    var data: RawFile?
    var checkpointer: Checkpointer?
    private(set) var result: PrefetchResult?

    var validators = Validators(length: nil, etag: nil, lastModified: nil)
    var contentType: String?
    var existedBefore = false
    var wasComplete = false
    /// Written to `data` but not yet handed to the checkpointer.
    var pending = RangeSet()
    var pendingBytes: Int64 = 0
    var lastCheckpoint = ContinuousClock.now
    var fetched: Int64 = 0
    var alreadyCached: Int64?
    var lastProgress = ContinuousClock.now
    var reportedWaiting = false
    var attempt = 0

    // The transfer in flight and what it was asked for.
    var transfer: CurlTransfer?
    var asked: String = ""
    var askedStart: Int64?
    var askedEnd: Int64?
    var askedSuffix: Int64?
    var writeOffset: Int64 = 0
    var writeLimit: Int64?
    var transferFailure: PrefetchError?
    var transferBytes: Int64 = 0
    var retryAfter: Double?
    var fruitlessTransfers = 0


    init(item: PrefetchItem, store: CacheStore, options: PrefetchOptions, fetcher: Fetcher,
         emit: @escaping (PrefetchEvent) -> Void, onFinish: @escaping (PrefetchJob) -> Void) {
        self.item = item
        self.store = store
        self.options = options
        self.fetcher = fetcher
        self.emit = emit
        self.onFinish = onFinish
        let parsed = URL(string: item.url)
        url = parsed
        key = parsed.map { options.keyRules.key(for: $0) } ?? SHA256Digest.hash(item.url)
    }

    var requests: [RangeRequest] { item.requests.isEmpty ? [.whole] : item.requests }

    // MARK: - Start and lock

    func start() {
        guard let url, let scheme = url.scheme?.lowercased(), url.host?.isEmpty == false else {
            return finish(.invalidURL("not a valid URL; give an absolute http:// or https:// URL"))
        }
        guard scheme == "http" || scheme == "https" else {
            return finish(.invalidURL("scheme '\(scheme)' is not supported; only http and https"))
        }
        acquireLock()
    }

    private func acquireLock() {
        guard !fetcher.isStopped else { return }
        do {
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
            let data = try store.openData(key: key)
            self.data = data
            // Read only now, under the lock: another writer may have filled it meanwhile.
            let entry = try store.catalog.entry(key: key)
            existedBefore = entry != nil
            validators = entry?.validators ?? validators
            contentType = entry?.contentType
            wasComplete = entry?.isComplete ?? false
            checkpointer = Checkpointer(catalog: store.catalog, key: key, url: item.url, data: data, committed: entry?.ranges ?? RangeSet())
            if let length = validators.length {
                let target = targetRanges(length: length)
                alreadyCached = target.count - missing(length: length).reduce(0) { $0 + $1.count }
                emit(.started(url: item.url, key: key, length: length, alreadyCached: alreadyCached!, toFetch: target.count - alreadyCached!))
            } else {
                emit(.started(url: item.url, key: key, length: nil, alreadyCached: 0, toFetch: nil))
            }
            nextRequest()
        } catch let e as SystemError {
            finish(.disk(e))
        } catch {
            finish(.catalog("\(error)"))
        }
    }

    // MARK: - Planning

    func targetRanges(length: Int64) -> RangeSet {
        RangeSet(requests.compactMap { $0.resolve(length: length) })
    }

    /// Requested bytes neither committed, nor on their way to the catalog, nor just written.
    func missing(length: Int64) -> [ByteRange] {
        var have = checkpointer?.durableOrPending ?? RangeSet()
        have.formUnion(pending)
        var gaps: [ByteRange] = []
        for r in targetRanges(length: length).ranges { gaps += have.missing(in: r) }
        return gaps
    }

    func nextRequest() {
        guard !fetcher.isStopped else { return }
        transferFailure = nil
        transferBytes = 0
        retryAfter = nil
        askedSuffix = nil
        if let length = validators.length {
            let gaps = RangeSet.coalesce(missing(length: length), within: options.coalesceGap)
            guard let gap = gaps.first else { return complete() }
            asked = gap.httpSpec
            askedStart = gap.lowerBound
            askedEnd = gap.upperBound
        } else {
            guard let first = requests.first, let spec = first.httpSpec else { return complete() }
            asked = spec
            switch first {
            case .suffix(let n): askedStart = nil; askedEnd = nil; askedSuffix = n
            case .whole: askedStart = 0; askedEnd = nil
            case .head(let n): askedStart = 0; askedEnd = n
            case .span(let a, let b): askedStart = a; askedEnd = b.map { $0 + 1 }
            }
        }
        do {
            let t = try CurlTransfer(url: item.url, range: asked, ifRange: hasAnyBytes ? validators.ifRange : nil, options: options.request)
            t.delegate = self
            transfer = t
            fetcher.add(t)
        } catch {
            finish(.transport(error as? TransportError ?? TransportError(kind: .other, message: "\(error)", code: -1)))
        }
    }

    // MARK: - Loop hooks

    /// Called by the loop after every wake-up: checkpoint and progress, never from a data callback.
    func tick() {
        let now = ContinuousClock.now
        if pendingBytes > 0 && (pendingBytes >= options.checkpointBytes || now - lastCheckpoint >= .milliseconds(Int64(options.checkpointInterval * 1000))) {
            checkpoint(wait: false)
        }
        if transfer != nil && now - lastProgress >= .milliseconds(200) {
            lastProgress = now
            emitProgress()
        }
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
        if !pending.isEmpty {
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
        if checkpointer != nil { checkpoint(wait: true) }
        let error = error ?? checkpointer?.firstError
        var requested: Int64?
        if let length = validators.length { requested = targetRanges(length: length).count }
        result = PrefetchResult(
            url: item.url, key: key, length: validators.length, fetchedBytes: checkpointer?.addedBytes ?? 0,
            alreadyCachedBytes: alreadyCached ?? 0, requestedBytes: requested, complete: wasComplete,
            elapsed: (ContinuousClock.now - startTime).inSeconds, error: error)
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
