import Foundation
import Synchronization

/// What this process knows of one entry while it is served: the bytes it wrote into each of the
/// entry's files, its storing jobs, and who uses it. A monitor: its state is private and changed
/// only by the operations below, each under `cond`. Those named with a leading underscore are
/// called with `cond` already held: from the job start `step` runs under it.
///
/// Lock order: `opening`, then `cond`, then the entry's writer lock (taken by a job start); a
/// reader never waits on `cond` while it holds the writer lock of a job of its own.
final class EntryBoard: @unchecked Sendable {
    // @unchecked: every var is private and read and written with `cond` locked; `holders` is atomic.
    private let cond = MonotonicCondition()
    /// Held while a video's head is fetched to open it (one opener per entry).
    private let opening = NSLock()
    /// Bytes this process wrote into each file (by identity) of the entry, and their version.
    private var written: [FileID: Writes] = [:]
    /// Readers and jobs of this process holding each file open. An inode number is reused once
    /// no one holds its file, so what this process wrote into a file is forgotten when its last
    /// holder here lets go (a new file with the same number must not inherit it).
    private var holds: [FileID: Int] = [:]
    /// This process's storing jobs on the entry, on disjoint spans.
    private var writers: [Writer] = []
    /// The entry's writer lock while any of them runs.
    private var shared: SharedWriterLock?
    /// Readers in this process using the entry (the writers are stopped when none is left).
    private var readers = 0
    /// Readers reading bytes justified only by this process's writes right now (a job giving
    /// unclaimed bytes back waits for them).
    private var readingWrites = 0
    /// The server is stopping: readers give up.
    private var closing = false
    private var lastUsed = ContinuousClock.now
    /// Openers, readers and jobs using the board: it is forgotten only at zero.
    private let holders = Atomic<Int>(0)

    /// What this process wrote into one file: bytes of one version.
    private struct Writes {
        /// The version the writing jobs' readers were promised (the bytes are of it).
        var version: Validators
        var ranges: RangeSet
    }

    /// A storing job of this process on the entry. Its state is the board's (changed under `cond`).
    final class Writer: @unchecked Sendable {
        // @unchecked: its vars are changed and read by the board only, with `cond` locked.
        let start: Int64
        let end: Int64
        /// Where it stops: `end`, or where a later job took over the rest (read by the job).
        let limit: Atomic<Int64>
        /// Stops the job (its readers left, or the server stops).
        fileprivate let stop: @Sendable () -> Void
        fileprivate var position: Int64
        /// The file it writes into (nil after it dropped the version: a file no reader holds).
        fileprivate var file: FileID?
        /// It dropped the version its readers were promised: what it writes now is of another.
        fileprivate var dropped = false
        /// How it ended: nil while it runs; `.some(nil)` when it completed.
        fileprivate var ending: PrefetchError??
        /// Why it is retrying, if it is (a reader about to answer gives up on it); cleared when
        /// bytes arrive again.
        fileprivate var trouble: String?
        fileprivate var effectiveEnd: Int64 { min(end, limit.load(ordering: .relaxed)) }
        fileprivate var finished: Bool { ending != nil }
        fileprivate var span: ByteRange { ByteRange(start, effectiveEnd) }

        fileprivate init(span: ByteRange, file: FileID?, stop: @escaping @Sendable () -> Void) {
            start = span.lowerBound
            end = span.upperBound
            self.file = file
            self.stop = stop
            limit = Atomic(span.upperBound)
            position = span.lowerBound
        }
    }

    // MARK: Holders

    /// One more opener, reader or job uses the board.
    func retain() { holders.add(1, ordering: .relaxed) }

    /// One holder of the board is done with it.
    func release() {
        cond.lock()
        lastUsed = .now
        cond.unlock()
        holders.subtract(1, ordering: .relaxed)
    }

    /// When it was last used, if nobody uses it now (no holder, job or writer lock): it may be forgotten.
    var idleSince: ContinuousClock.Instant? {
        cond.lock()
        defer { cond.unlock() }
        guard holders.load(ordering: .relaxed) == 0 && writers.isEmpty && !(shared?.isHeld ?? false) else { return nil }
        return lastUsed
    }

    /// Runs `body` as the entry's only opener.
    func whileOpening<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        opening.lock()
        defer { opening.unlock() }
        return try body()
    }

    /// The server is stopping: every job is stopped and every waiting reader released.
    func close() {
        cond.lock()
        closing = true
        let stops = writers.map(\.stop)
        cond.broadcast()
        cond.unlock()
        for stop in stops { stop() }
    }

    /// Whether every claimed byte of `file` is this process's own, of the version `promised`
    /// (`ownHead`: the head `open` stored into that file, not recorded yet), and whether jobs of
    /// this process write the entry now (it cannot be started over under them).
    func ownership(of claims: RangeSet, in file: FileID?, promised: Validators, ownHead: RangeSet) -> (claimsAreOwn: Bool, busy: Bool) {
        cond.lock()
        defer { cond.unlock() }
        var mine = _ownWrites(file, promised: promised)
        mine.formUnion(ownHead)
        return (file != nil && mine.contains(claims), shared?.isHeld ?? false)
    }

    /// This process's writes into `file`, when they are of the version `promised`.
    func ownWrites(_ file: FileID?, promised: Validators) -> RangeSet {
        cond.lock()
        defer { cond.unlock() }
        return _ownWrites(file, promised: promised)
    }

    // MARK: Readers

    /// A reader holding `file` arrived. `ownHead`: the head `open` stored into that file, of
    /// `version`: recorded now that a reader holds the file (a record must not outlive its file).
    func readerArrived(holding file: FileID?, ownHead: RangeSet, version: Validators) {
        cond.lock()
        readers += 1
        hold(file)
        if let file, !ownHead.isEmpty { record(file, ownHead, version: version) }
        cond.unlock()
    }

    /// A reader left. When it was the last, what is still to fetch is not worth it for nobody
    /// (a player that seeks away leaves no download behind): jobs far from their end stop.
    func readerLeft(holding file: FileID?, claims: RangeSet, promised: Validators) {
        cond.lock()
        readers -= 1
        var stops: [@Sendable () -> Void] = []
        var finishing: [Writer] = []
        if readers == 0 {
            for w in writers where !w.finished {
                var have = claims
                have.formUnion(trustedWrites(w.file, promised: promised))
                if ServeDecision.stopsWithoutReaders(from: w.position, to: w.effectiveEnd, have: have) { stops.append(w.stop) } else { finishing.append(w) }
            }
        }
        unhold(file)
        cond.broadcast()
        cond.unlock()
        for s in stops { s() }
        // A job near its end finishes without readers, but not for ever: an origin that drips
        // would hold it (and a connection to the origin) for hours. Still running with no reader
        // after `orphanGrace`, it stops; what it wrote is kept.
        if !finishing.isEmpty {
            let jobs = finishing
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.orphanGrace) { [self] in stopOrphans(jobs) }
        }
    }

    /// Seconds a job may go on finishing after its last reader left.
    static let orphanGrace: Double = 30

    private func stopOrphans(_ jobs: [Writer]) {
        cond.lock()
        let stops = readers == 0 ? jobs.filter { !$0.finished }.map(\.stop) : []
        cond.unlock()
        for s in stops { s() }
    }

    /// Where a reader is, what it holds and may do (for `step`).
    struct ReaderAt {
        var position: Int64
        var end: Int64
        /// Claims justified for the reader's file.
        var claims: RangeSet
        var file: FileID?
        /// The version the reader promised: only this process's writes of it are trusted.
        var promised: Validators
        /// The reader holds a file to read from (not streaming the whole span).
        var hasFile: Bool
        var refreshed: Bool
        var mayStore: Bool
        /// Before the response head: a job in trouble here is the answer.
        var preparing: Bool
        var jobsAsked: Int
        /// The jobs this response started.
        var ownJobs: [Writer]
    }

    /// What a reader does now, decided (`ServeDecision.Read`) and begun under the board's lock.
    enum ReaderStep {
        /// The server is stopping.
        case closing
        /// Read `[position, upTo)`; `fromWrites`: some of it is justified only by this process's
        /// writes (call `doneReadingWrites` after).
        case read(upTo: Int64, fromWrites: Bool)
        case refresh
        /// Waited (at most a second) for a job about to write the bytes; `signalled`: the board changed.
        case waited(signalled: Bool)
        /// About to answer, and the job that would write these bytes is retrying the origin: why.
        case jobInTrouble(String)
        /// A job of this response failed over this point already.
        case failedHere(PrefetchError)
        /// A job was asked for (`startJob` ran): the one started, if any.
        case asked(Writer?)
        /// Stream the span unstored; `failed`: a job of this response failed where it begins.
        case stream(ByteRange, failed: PrefetchError?)
    }

    /// The reader's next step. `startJob` runs with the board's lock held (jobs of one entry are
    /// started one at a time, on spans no other job fetches).
    func step(_ r: ReaderAt, startJob: (ByteRange) -> Writer?) -> ReaderStep {
        cond.lock()
        defer { cond.unlock() }
        if closing { return .closing }
        var justified = r.claims
        justified.formUnion(trustedWrites(r.file, promised: r.promised))
        let jobs = writers.filter { !$0.finished }.map {
            ServeDecision.Job(start: $0.start, end: $0.effectiveEnd, position: $0.position, writesReadersFile: $0.file != nil && $0.file == r.file)
        }
        let p = r.position
        let decision = ServeDecision.Read(position: p, end: r.end, justified: justified, refreshed: r.refreshed,
                                          hasFile: r.hasFile, jobs: jobs, jobsStarted: r.jobsAsked, mayStore: r.mayStore)
        switch decision.step {
        case .read(let upTo):
            let fromWrites = r.claims.contiguousEnd(from: p) < upTo
            if fromWrites { readingWrites += 1 }
            return .read(upTo: upTo, fromWrites: fromWrites)
        case .refresh:
            return .refresh
        case .wait:
            if r.preparing, let trouble = writers.first(where: { $0.trouble != nil && $0.start <= p && p < $0.effectiveEnd })?.trouble {
                return .jobInTrouble(trouble)
            }
            return .waited(signalled: cond.wait(seconds: 1))
        case .startJob(let span):
            if let failed = failure(of: r.ownJobs, at: p) { return .failedHere(failed) }
            return .asked(startJob(span))
        case .stream(let span):
            return .stream(span, failed: failure(of: r.ownJobs, at: p))
        }
    }

    /// A read justified by this process's writes is over.
    func doneReadingWrites() {
        cond.lock()
        readingWrites -= 1
        cond.broadcast()
        cond.unlock()
    }

    /// The error of a job of `jobs` that ended failing over `p`. A job stopped because its readers
    /// left or the server stops is not a failure of the origin.
    private func failure(of jobs: [Writer], at p: Int64) -> PrefetchError? {
        jobs.last { w in
            guard let e = w.ending ?? nil, e != .interrupted, e != .deadline, e != .lockBusy else { return false }
            return w.start <= p && p < w.end
        }?.ending ?? nil
    }

    // MARK: Starting a job (`cond` held: from `step`'s `startJob`)

    /// Where a new job for `wanted` would run, against the jobs running now.
    func _plan(_ wanted: ByteRange) -> (decision: ServeDecision.NewJob, running: [Writer]) {
        let running = writers.filter { !$0.finished }
        return (ServeDecision.NewJob(wanted: wanted, running: running.map(\.span)), running)
    }

    /// The entry's writer lock, joined when a job of this process holds it, else taken by `take`.
    func _sharedLock(orTake take: () -> EntryLock?) -> SharedWriterLock? {
        if let s = shared, s.join() { return s }
        guard let lock = take() else { return nil }
        let s = SharedWriterLock(lock)
        _ = s.join()
        shared = s
        return s
    }

    /// A reader's hold on the file it has just adopted.
    func _hold(_ file: FileID) { hold(file) }

    /// This process's writes into `file`, when they are of the version `promised` (another
    /// version's bytes are never a reader's, whatever file they went into).
    func _ownWrites(_ file: FileID?, promised: Validators) -> RangeSet {
        guard let file, let w = written[file], promised.admits(w.version) else { return RangeSet() }
        return w.ranges
    }

    /// Adds a job on `span` writing into `file`; the jobs `plan` overtook stop where it begins.
    func _add(_ span: ByteRange, file: FileID, plan: (decision: ServeDecision.NewJob, running: [Writer]),
              stop: @escaping @Sendable () -> Void) -> Writer {
        for i in plan.decision.overtaken { plan.running[i].limit.store(span.lowerBound, ordering: .relaxed) }
        let writer = Writer(span: span, file: file, stop: stop)
        writers.append(writer)
        hold(file)
        return writer
    }

    // MARK: What a job reports (from its thread)

    /// The job wrote `range` into `file`, as bytes of `version` (the one its readers were
    /// promised). Nothing once the job dropped that version: what it writes then is of another,
    /// which no reader of this job was promised.
    func recordWrite(_ range: ByteRange, in file: FileID, by writer: Writer, version: Validators) {
        cond.lock()
        defer { cond.unlock() }
        guard !writer.dropped else { return }
        record(file, RangeSet([range]), version: version)
        if writer.file != file {
            unhold(writer.file)
            hold(file)
            writer.file = file
        }
        writer.position = max(writer.position, range.upperBound)
        // Bytes arrive again: a retry that worked is no trouble (a reader about to answer waits).
        writer.trouble = nil
        cond.broadcast()
    }

    /// The job gives unclaimed bytes of `file` back: no reader may go on trusting them, and none
    /// may be reading them. They are forgotten, reads in flight waited for, and `punch` runs
    /// while no new read can start.
    func giveBack(_ ranges: RangeSet, in file: FileID, punch: (ByteRange) -> Void) {
        cond.lock()
        for r in ranges.ranges { written[file]?.ranges.remove(r) }
        while readingWrites > 0 { cond.wait() }
        for r in ranges.ranges { punch(r) }
        cond.unlock()
    }

    /// The job is about to drop the version it wrote into its file (catalog rows, then a new
    /// `data`): before the catalog names another version and before that file can go, no reader
    /// trusts what it wrote there from now on, and none waits for it.
    func writerDropping(_ writer: Writer) {
        cond.lock()
        writer.dropped = true
        unhold(writer.file)
        writer.file = nil
        cond.broadcast()
        cond.unlock()
    }

    func writerRetrying(_ writer: Writer, reason: String) {
        cond.lock()
        writer.trouble = reason
        cond.broadcast()
        cond.unlock()
    }

    func writerEnded(_ writer: Writer, error: PrefetchError?) {
        cond.lock()
        writer.ending = .some(error)
        writers.removeAll { $0 === writer }
        unhold(writer.file)
        cond.broadcast()
        cond.unlock()
    }

    // MARK: Private, `cond` held

    private func hold(_ file: FileID?) {
        guard let file else { return }
        holds[file, default: 0] += 1
    }

    private func unhold(_ file: FileID?) {
        guard let file else { return }
        let n = (holds[file] ?? 1) - 1
        if n <= 0 {
            holds[file] = nil
            written[file] = nil
        } else {
            holds[file] = n
        }
    }

    /// Records `ranges` written into `file` (held) as bytes of `version`. Bytes of another version
    /// in the same file replace the record: they may have overwritten what it names.
    private func record(_ file: FileID, _ ranges: RangeSet, version: Validators) {
        if var w = written[file], w.version == version {
            w.ranges.formUnion(ranges)
            written[file] = w
        } else {
            written[file] = Writes(version: version, ranges: ranges)
        }
    }

    /// This process's own writes into `file` that a reader promised `promised` may trust: only
    /// while this process holds the entry (afterwards they are claimed in the catalog, or another
    /// writer may reuse the file's unclaimed space), and only of that version.
    private func trustedWrites(_ file: FileID?, promised: Validators) -> RangeSet {
        guard shared?.isHeld ?? false else { return RangeSet() }
        return _ownWrites(file, promised: promised)
    }
}
