import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Makes one entry's written bytes durable off the fetch loop: fsync `data`, then commit the
/// ranges (with the validators they belong to) in one catalog transaction. Invariant 1: the
/// catalog never claims a byte that is not durably in `data`. One serial queue per entry, so
/// commits land in order while the loop keeps downloading.
///
/// It also keeps the entry's SHA-256 running, when asked to, on a queue of its own (in parallel
/// with the fsyncs): the fetch loop hands it a copy of each block it writes (`feedDigest`), and
/// after each commit whatever extends the hashed prefix from offset 0 and was not fed (a resumed
/// entry's cached part, blocks skipped while the hasher was behind) is read back from `data`. So a
/// whole-file download is hashed from the bytes as they arrive, not read back, and completion
/// needs no second pass over the file. (Read back from the page cache after each commit, the
/// digest cost 1.04 s of CPU and 0.7 s of wall on a 1 GiB download; Docs/performance.md.)
final class Checkpointer: @unchecked Sendable {
    // @unchecked: `digest` is touched only on `digestQueue`; everything else is immutable, in
    // `state`, or atomic.
    let queue: DispatchQueue
    private let digestQueue: DispatchQueue
    /// The running digest is on (the loop reads it to decide whether to copy blocks for it).
    private let feeding = Atomic<Bool>(false)
    /// Buffers for the copies handed to the hasher: at most `feedBuffers` of `feedBufferSize`,
    /// allocated as needed and reused (no allocation per block), so a slow hasher costs a
    /// read-back later rather than memory now.
    private let feedLock = MonotonicCondition()
    // Guarded by `feedLock`.
    private var feedFree: [UnsafeMutableRawBufferPointer] = []
    private var feedAllocated = 0
    /// 1 MiB in all, in blocks of the staging size (`PrefetchOptions.stageBytes`).
    static let feedBuffers = 16
    static let feedBufferSize = 64 << 10
    private let catalog: Catalog
    let key: CacheKey
    private let url: String
    private let data: RawFile
    private struct State {
        var committed: RangeSet
        var inFlight = RangeSet()
        /// Bytes this run added to the catalog (what `fetched` reports: downloaded and stored).
        var added: Int64 = 0
        /// Transactions committed by this run.
        var commits = 0
        var error: PrefetchError?
        /// Handed over but not yet taken by a commit task; one task takes them all (group commit).
        var queued = RangeSet()
        var queuedValidators: Validators?
        var queuedType: String?
        var scheduled = false
        /// Expected digests to write with the next commit (nil: none changed).
        var expectations: [DigestCheck]?
    }
    private let state: Locked<State>
    private var digest: RunningDigest?

    /// The SHA-256 and the other digests the entry is expected to have (`ExpectedDigest`), fed
    /// the same bytes, all hashed through `through`.
    private struct RunningDigest {
        var hasher: SHA256Digest
        var others: DigestSet
        var through: Int64

        init(others: Set<DigestAlgorithm>) {
            hasher = SHA256Digest(chunkSize: ChunkStates.size)
            self.others = DigestSet(others.subtracting([.sha256]))
            through = 0
        }

        func update(_ bytes: UnsafeRawBufferPointer) {
            hasher.update(bytes)
            others.update(bytes)
        }

        func update(from file: RawFile, _ range: ByteRange) throws {
            // Read once, fed to all.
            try file.readChunks(range) { piece, _ in update(piece) }
        }
    }

    /// `carrying`: a checkpointer this one replaces (after the video changed and `data` was
    /// replaced); its count of bytes added and commits made carry over.
    /// Called on the queue after each commit (wakes the fetch loop: a held transfer may go on).
    private let onCommit: @Sendable () -> Void

    init(catalog: Catalog, key: CacheKey, url: String, data: RawFile, committed: RangeSet, carrying previous: Checkpointer? = nil,
         onCommit: @escaping @Sendable () -> Void = {}) {
        self.onCommit = onCommit
        self.catalog = catalog
        self.key = key
        self.url = url
        self.data = data
        self.queue = DispatchQueue(label: "vcache.checkpoint")
        self.digestQueue = DispatchQueue(label: "vcache.digest")
        var s = State(committed: committed)
        if let previous {
            previous.drain()
            previous.state.withLock { p in
                s.added = p.added
                s.commits = p.commits
                s.error = p.error
            }
        }
        self.state = Locked(s)
    }

    /// Ranges committed to the catalog plus those on their way there.
    var durableOrPending: RangeSet {
        state.withLock { s in
            var all = s.committed
            all.formUnion(s.inFlight)
            return all
        }
    }

    var committed: RangeSet { state.withLock { $0.committed } }

    /// Bytes handed over and not yet committed (fsync and transaction still to come).
    var inFlightBytes: Int64 { state.withLock { $0.inFlight.count } }

    var firstError: PrefetchError? { state.withLock { $0.error } }

    var addedBytes: Int64 { state.withLock { $0.added } }

    var commitCount: Int { state.withLock { $0.commits } }

    /// Hands `batch` (bytes already pwritten) to the queue, to be committed with `validators`.
    /// Batches handed over while a commit is running are committed together by the next one (one
    /// fsync and one transaction for all of them): when the disk is slower than the network,
    /// commits grow instead of queueing up.
    func submit(_ batch: RangeSet, validators: Validators, contentType: String?) {
        let schedule = state.withLock { s -> Bool in
            s.inFlight.formUnion(batch)
            s.queued.formUnion(batch)
            s.queuedValidators = validators
            if contentType != nil { s.queuedType = contentType }
            if s.scheduled { return false }
            s.scheduled = true
            return true
        }
        guard schedule else { return }
        queue.async { [self] in
            let (all, v, type) = state.withLock { s -> (RangeSet, Validators?, String?) in
                defer {
                    s.queued = RangeSet()
                    s.queuedType = nil
                    s.scheduled = false
                }
                return (s.queued, s.queuedValidators, s.queuedType)
            }
            if let v { _ = commitNow(all, validators: v, contentType: type, digest: nil) }
        }
    }

    /// On the queue: fsync, then one transaction. Returns false (and records why) on failure.
    /// The digest kept for this version by an earlier completion (nil: none, or unreadable).
    func keptDigest() -> ChunkStates? { (try? catalog.keptDigest(key: key)) ?? nil }

    func commitNow(_ batch: RangeSet, validators: Validators, contentType: String?, digest: ChunkStates?) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        do {
            if !batch.isEmpty { try data.sync() }
            var update = Catalog.Update(key: key, url: url, validators: validators, contentType: contentType)
            update.added = batch
            update.diskBytes = (try? data.status()).map(FileSystem.allocatedBytes)
            update.sha256 = digest?.sha256
            update.chunkStates = digest
            update.expectations = state.withLock { $0.expectations }
            let all = try catalog.commit(update)
            state.withLock { s in
                s.added += max(0, all.count - s.committed.count)
                s.commits += 1
                s.committed = all
                for r in batch.ranges { s.inFlight.remove(r) }
                if s.expectations == update.expectations { s.expectations = nil }
            }
            digestQueue.async { [self] in advanceDigest(over: all) }
            onCommit()
            return true
        } catch {
            let e = PrefetchError(error)
            state.withLock { s in
                for r in batch.ranges { s.inFlight.remove(r) }
                if s.error == nil { s.error = e }
            }
            return false
        }
    }

    /// The entry's expected digests as they now stand, written with the next commit.
    func setExpectations(_ checks: [DigestCheck]) {
        state.withLock { $0.expectations = checks }
    }

    /// Expected digests wait for a commit.
    var expectationsPending: Bool { state.withLock { $0.expectations != nil } }

    /// Records checks on bytes that were then dropped (no commit follows).
    func recordChecks(_ checks: [DigestCheck]) throws {
        state.withLock { $0.expectations = nil }
        try catalog.recordDigestChecks(key: key, checks)
    }

    /// Keep (or stop keeping) the running digest; set when this run can complete the video.
    /// `others`: the algorithms the entry is expected to match besides SHA-256, computed from the
    /// same bytes (one added once hashing began starts the running digest over, read back).
    func streamDigest(_ on: Bool, others: Set<DigestAlgorithm> = []) {
        let on = on && !BenchSwitches.noDigest
        feeding.store(on, ordering: .relaxed)
        let others = others.subtracting([.sha256])
        digestQueue.async { [self] in
            if !on {
                digest = nil
            } else if digest == nil || !others.isSubset(of: digest!.others.algorithms) {
                digest = RunningDigest(others: others)
            }
        }
    }

    /// From the fetch loop, right after `bytes` were written at `offset`: a copy goes to the
    /// hasher, which uses it when it extends the hashed prefix (and drops it otherwise: those
    /// bytes are read back once committed). Skipped while all `feedBuffers` are with the hasher.
    /// `written`: what this run has written to `data` so far (these bytes included). A hasher
    /// behind (copies skipped while it was busy) reads back only the gap up to `offset` from it
    /// and goes on with the copies; without that it never caught up, and every byte after the
    /// first skipped copy was read a second time.
    func feedDigest(_ bytes: UnsafeRawBufferPointer, at offset: Int64, written: RangeSet = RangeSet()) {
        guard feeding.load(ordering: .relaxed), bytes.count <= Self.feedBufferSize else { return }
        feedLock.lock()
        var buffer = feedFree.popLast()
        if buffer == nil && feedAllocated < Self.feedBuffers {
            feedAllocated += 1
            buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.feedBufferSize, alignment: 64)
        }
        feedLock.unlock()
        guard let buffer else { return }  // the hasher is behind: these bytes are read back later
        buffer.copyMemory(from: bytes)
        let count = bytes.count
        nonisolated(unsafe) let copy = buffer
        digestQueue.async { [self] in
            if let d = digest, d.through < offset {
                var readable = written
                readable.formUnion(state.withLock { $0.committed })
                if readable.contiguousEnd(from: d.through) >= offset {
                    do {
                        try d.update(from: data, ByteRange(d.through, offset))
                        digest?.through = offset
                    } catch {
                        digest = nil
                    }
                }
            }
            if let d = digest, d.through == offset {
                d.update(UnsafeRawBufferPointer(rebasing: copy[0..<count]))
                digest?.through = offset + Int64(count)
            }
            feedLock.lock()
            feedFree.append(copy)
            feedLock.unlock()
        }
    }

    deinit {
        // Every queued hash holds a reference to this checkpointer: all buffers are back.
        for b in feedFree { b.deallocate() }
    }

    /// On the digest queue: hash whatever extends the contiguous prefix from 0 within `covered`
    /// and was not fed, read back from `data` (committed, so durable and final).
    private func advanceDigest(over covered: RangeSet) {
        guard let d = digest else { return }
        let end = covered.contiguousEnd(from: d.through)
        guard end > d.through else { return }
        do {
            try d.update(from: data, ByteRange(d.through, end))
            digest?.through = end
        } catch {
            digest = nil
        }
    }

    /// On the queue: the SHA-256 of `[0, length)`, all of which is durably in `data`; continues the
    /// running digest when there is one, otherwise reads the whole file once.
    /// The states at each chunk boundary come with it (`ChunkStates`), and `others`: the
    /// digests of the algorithms asked for besides SHA-256, from the same pass.
    func finalDigest(length: Int64, others wanted: Set<DigestAlgorithm> = []) throws -> (ChunkStates, others: [DigestAlgorithm: String]) {
        dispatchPrecondition(condition: .onQueue(queue))
        // (Benchmarks without the digest still compute one that is expected of the video.)
        if BenchSwitches.noDigest && wanted.isEmpty {
            return (ChunkStates(sha256: String(repeating: "0", count: 64), chunkSize: ChunkStates.size, states: []), [:])
        }
        let wanted = wanted.subtracting([.sha256])
        return try digestQueue.sync { [self] in
            var d = digest ?? RunningDigest(others: wanted)
            // An algorithm the running digest lacks: all of them again, in one read.
            if !wanted.isSubset(of: d.others.algorithms) { d = RunningDigest(others: wanted) }
            digest = nil
            feeding.store(false, ordering: .relaxed)
            try d.update(from: data, ByteRange(min(d.through, length), length))
            let sha = d.hasher.finalize()
            return (ChunkStates(sha256: sha, chunkSize: ChunkStates.size, states: d.hasher.chunkStates), d.others.finalize())
        }
    }

    /// Waits for every submitted batch to be committed.
    /// Waits for every commit queued, and for the hasher: no work of this entry outlives its job
    /// (a process exiting while the hasher sets up libcrypto crashed in OpenSSL's exit cleanup).
    func drain() {
        queue.sync {}
        digestQueue.sync {}
    }
}
