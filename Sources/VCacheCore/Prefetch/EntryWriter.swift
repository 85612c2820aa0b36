/// What one job writes into one version of an entry, and claims: its `data` file, the staging
/// buffer, the bytes written but not yet handed over, and the `Checkpointer` that makes them
/// durable and claims them. Each byte goes: staged (not written, not held), written (pending:
/// held, not claimed), handed over, committed (claimed, invariant 1). A new version (a drop) gets
/// a new writer. Used on the fetch loop's thread only, by its job.
final class EntryWriter {
    let data: RawFile
    /// The file `data` is (serve routes each written span to the readers of that very file).
    let fileID: FileID?
    let checkpointer: Checkpointer
    private let onWrite: (@Sendable (_ file: FileID, _ range: ByteRange) -> Void)?

    /// One per connection (lane 0: the job's own transfer; more with `--connections`).
    private var staging: [Lane]
    private let stageBytes: Int
    /// Every span written into `data` (claimed or not): what a failure gives back.
    private var written = RangeSet()
    /// Written to `data`, not yet handed to the checkpointer.
    private var pending = RangeSet()
    /// Bytes written since the last hand-over (a span written twice counts twice).
    private(set) var pendingBytes: Int64 = 0
    private var lastHandOver = ContinuousClock.now
    /// A staged write that failed outside a data callback; the job stops the entry on its next tick.
    private(set) var deferredError: PrefetchError?

    /// `previous`: the writer of the version this one replaces (its deferred error stands).
    init(data: RawFile, checkpointer: Checkpointer, options: PrefetchOptions, replacing previous: EntryWriter? = nil) {
        self.data = data
        fileID = try? data.identity()
        self.checkpointer = checkpointer
        onWrite = options.onWrite
        stageBytes = options.stageBytes
        staging = [Lane(capacity: options.stageBytes)]
        deferredError = previous?.deferredError
    }

    /// Everything held: committed, on its way to the catalog, or just written.
    var held: RangeSet {
        var have = checkpointer.durableOrPending
        have.formUnion(pending)
        return have
    }

    var hasAnyBytes: Bool { !pending.isEmpty || !checkpointer.durableOrPending.isEmpty }

    var hasStaged: Bool { staging.contains { !$0.stage.isEmpty } }

    /// Stages `bytes`, which go at `offset`, in `lane` (what that lane staged elsewhere is written
    /// first, and each block as it fills): how many were staged, and the error that stopped it if one did.
    func stage(_ bytes: UnsafeRawBufferPointer, at offset: Int64, lane: Int = 0) -> (staged: Int, error: PrefetchError?) {
        while staging.count <= lane { staging.append(Lane(capacity: stageBytes)) }
        if !staging[lane].stage.isEmpty && staging[lane].stage.end != offset, let e = writeStaged(lane: lane) { return (0, e) }
        var rest = bytes
        var staged = 0
        while !rest.isEmpty {
            let n = staging[lane].stage.append(rest, at: offset + Int64(staged))
            staged += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if staging[lane].stage.isDue, let e = writeStaged(lane: lane) { return (staged, e) }
        }
        return (staged, nil)
    }

    /// Writes every lane's staged bytes; the first error, if any.
    func writeStaged() -> PrefetchError? {
        var first: PrefetchError?
        for lane in staging.indices {
            if let e = writeStaged(lane: lane), first == nil { first = e }
        }
        return first
    }

    /// Writes the staged bytes (StagedWrite.swift) of `lane` to `data`; from then on they are
    /// pending, to be claimed by the next checkpoint. Returns the error when the write failed
    /// (those bytes are then never claimed).
    func writeStaged(lane: Int) -> PrefetchError? {
        guard lane < staging.count, let (bytes, offset) = staging[lane].stage.take() else { return nil }
        let range = ByteRange(offset, offset + Int64(bytes.count))
        do {
            try data.write(bytes, toAbsoluteOffset: offset)
        } catch {
            // Part of it may have reached the file (a full disk fails a write midway): those
            // blocks are given back when the job ends, with every byte it could not claim.
            written.insert(range)
            return PrefetchError(error)
        }
        written.insert(range)
        // Only the job's own transfer, which starts at the hashed prefix's end, feeds the running
        // digest: the lanes' bytes lie beyond it and are read back once committed (`Checkpointer`).
        if lane == 0 { checkpointer.feedDigest(bytes, at: offset, written: written) }
        pending.insert(range)
        pendingBytes += range.count
        if let fileID { onWrite?(fileID, range) }
        return nil
    }

    /// Time for a checkpoint: `bytes` pending, or `interval` seconds since the last one.
    func checkpointDue(bytes: Int64, interval: Double, now: ContinuousClock.Instant) -> Bool {
        pendingBytes > 0 && (pendingBytes >= bytes || now - lastHandOver >= .milliseconds(Int64(interval * 1000)))
    }

    /// Writes what is staged (a failure is kept for the next tick) and hands every pending byte to
    /// the checkpointer, to be committed with `validators`; `wait`: until all are committed.
    /// `startWriteback`: start writing the bytes back now (`sync_file_range`), so the fsync finds
    /// little left while the transfer goes on; not worth a system call on the loop when the
    /// transfer has ended (the checkpoint queue's fsync starts at once).
    func checkpoint(validators: Validators, contentType: String?, wait: Bool, startWriteback: Bool = true) {
        if let e = writeStaged(), deferredError == nil { deferredError = e }
        if !pending.isEmpty {
            if startWriteback { for r in pending.ranges { data.startWriteback(r) } }
            checkpointer.submit(pending, validators: validators, contentType: contentType)
        }
        pending = RangeSet()
        pendingBytes = 0
        lastHandOver = ContinuousClock.now
        if wait { checkpointer.drain() }
    }

    /// More than `limit` bytes are written but not committed.
    func uncommitted(over limit: Int64) -> Bool {
        pendingBytes + checkpointer.inFlightBytes > limit
    }

    /// The pending bytes, for the last commit (done by the caller); none are pending afterwards.
    func takePending() -> RangeSet {
        defer {
            pending = RangeSet()
            pendingBytes = 0
        }
        return pending
    }

    /// Forgets what is staged and pending, and stops the running digest: the version is dropped.
    func discard() {
        for lane in staging { lane.stage.discard() }
        pending = RangeSet()
        pendingBytes = 0
        checkpointer.streamDigest(false)
    }

    /// Closes `data`; after a failure, first gives back every byte written and not claimed (a
    /// full disk, an fsync error): it would otherwise take room that neither the catalog, ls nor
    /// evict can see. `giveBack` (serve) stops its readers trusting them, then punches.
    func close(failed: Bool, giveBack: (@Sendable (_ file: FileID, _ ranges: RangeSet, _ punch: (ByteRange) -> Void) -> Void)?) {
        if failed {
            var unclaimed = written
            for r in checkpointer.committed.ranges { unclaimed.remove(r) }
            if let giveBack, let fileID {
                giveBack(fileID, unclaimed) { data.punchHole($0) }
            } else {
                for r in unclaimed.ranges { data.punchHole(r) }
            }
        }
        data.close()
    }
}

extension EntryWriter {
    /// One connection's staging buffer (a noncopyable `StagedWrite` cannot sit in an array itself).
    fileprivate final class Lane {
        fileprivate var stage: StagedWrite
        init(capacity: Int) { stage = StagedWrite(capacity: capacity) }
    }
}
