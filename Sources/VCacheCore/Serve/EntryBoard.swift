#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The shell around one served entry's `EntryState`: it takes `cond`, runs a transition, lets go,
/// and only then does what the transition asked for (stop a job, run a drop, release the flock,
/// punch holes). No closure of a caller and no I/O runs while `cond` is held; the only thing done
/// under it is waiting on it. What the shell keeps beside the state are handles the state names
/// by id: each job's stop, the flock, the drop handed to the last job out.
///
/// Lock order (Docs/architecture.md, "Locks"): `ReadThrough.boards`, then an entry's `opening`,
/// then its `cond`; nothing else is taken while `cond` is held.
final class EntryBoard: @unchecked Sendable {
    // @unchecked: every var is private and read and written with `cond` locked; `holders` is atomic.
    private let cond = MonotonicCondition()
    /// Held while a video's head is fetched to open it (one opener per entry).
    private let opening = MonotonicCondition()
    private var state = EntryState()
    /// Handles of what the state names: each running job's stop, the flock while it is held, and
    /// a drop handed over to the last job to leave.
    private var handles = Handles()
    private var lastUsed = ContinuousClock.now
    /// Openers, readers and jobs using the board: it is forgotten only at zero.
    private let holders = Atomic<Int>(0)

    private struct Handles {
        var stops: [EntryState.JobID: @Sendable () -> Void] = [:]
        var flock: EntryLock?
        var pendingDrop: (@Sendable () throws -> Void)?
        /// The file the head of `open` went into, held open until `headDone`.
        var headFile: RawFile?
    }

    /// Runs a transition with `cond` held, and wakes every waiter (the state may have changed).
    private func transition<T>(_ body: (inout EntryState, inout Handles) -> T) -> T {
        cond.lock()
        defer {
            cond.broadcast()
            cond.unlock()
        }
        return body(&state, &handles)
    }

    /// Reads the state with `cond` held.
    private func query<T>(_ body: (EntryState) -> T) -> T {
        cond.lock()
        defer { cond.unlock() }
        return body(state)
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

    /// When it was last used, if nobody uses it now (no holder, job, start or lock): it may be forgotten.
    var idleSince: ContinuousClock.Instant? {
        cond.lock()
        defer { cond.unlock() }
        guard holders.load(ordering: .relaxed) == 0 && state.isIdle else { return nil }
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
        let stops = transition { s, h in s.close().compactMap { h.stops[$0] } }
        for stop in stops { stop() }
    }

    /// Whether every claimed byte of `file` is this process's own, of the version `promised`
    /// (`ownHead`: the head `open` stored into that file, not recorded yet), and whether jobs of
    /// this process write the entry now (it cannot be started over under them).
    func ownership(of claims: RangeSet, in file: FileID?, promised: Validators, ownHead: RangeSet) -> (claimsAreOwn: Bool, busy: Bool) {
        query { s in
            var mine = s.ownWrites(file, promised: promised)
            mine.formUnion(ownHead)
            return (file != nil && mine.contains(claims), s.lock != .free)
        }
    }

    /// This process's writes into `file`, when they are of the version `promised`.
    func ownWrites(_ file: FileID?, promised: Validators) -> RangeSet { query { $0.ownWrites(file, promised: promised) } }

    // MARK: The head `open` stores (its fetch loop writes, the opener reads after)

    /// The head fetch wrote `range` into `file`, the entry's `data` at `path` (the job holds the
    /// entry: `path` names `file`). At the first write the file is opened by path (outside the
    /// lock) and held until `headDone`, so that its inode number cannot be given to another file
    /// meanwhile: a file `open` then finds with that number is the one the head went into.
    func headWrote(_ range: ByteRange, in file: FileID, path: String) {
        if query({ $0.headNeedsPin() }), let f = try? RawFile.open(path, flags: O_RDONLY) {
            let pinned = (try? f.identity()) == file && transition { s, h in
                guard s.headPinned(file) else { return false }
                h.headFile = f
                return true
            }
            if !pinned { f.close() }
        }
        transition { s, _ in s.headWrote(range, in: file) }
    }

    /// What the head wrote into `file`, when it is the file the head went into.
    func headRanges(_ file: FileID) -> RangeSet? { query { $0.headRanges(file) } }

    /// The opener is done with the head: its file is let go.
    func headDone() {
        let file = transition { s, h -> RawFile? in
            s.headDone()
            defer { h.headFile = nil }
            return h.headFile
        }
        file?.close()
    }

    // MARK: Readers

    func readerArrived(holding file: FileID?, ownHead: RangeSet, version: Validators) {
        transition { s, _ in s.readerArrived(holding: file, ownHead: ownHead, version: version) }
    }

    /// A reader left (`EntryState.readerLeft`): jobs far from their end stop now; those near it
    /// stop if still running with no reader after `orphanGrace` (an origin that drips would hold
    /// them, and a connection to the origin, for hours). What they wrote is kept.
    func readerLeft(holding file: FileID?, claims: RangeSet, promised: Validators, started: [EntryState.JobID]) {
        let (leaving, stops) = transition { s, h in
            let l = s.readerLeft(holding: file, claims: claims, promised: promised, started: started)
            return (l, l.stop.compactMap { h.stops[$0] })
        }
        for stop in stops { stop() }
        if !leaving.orphans.isEmpty {
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.orphanGrace) { [self] in
                let due = transition { s, h in s.orphansDue(leaving).compactMap { h.stops[$0] } }
                for stop in due { stop() }
            }
        }
    }

    /// Seconds a job may go on finishing after its last reader left.
    static let orphanGrace: Double = 30

    /// What a reader does now (`EntryState.Step`), with the waiting and the job start done here.
    enum ReaderStep: Equatable {
        case closing
        case read(upTo: Int64, fromWrites: Bool)
        case refresh
        /// Waited (at most a second) for the entry to change; `signalled`: it changed.
        case waited(signalled: Bool)
        case jobInTrouble(String)
        case failedHere(PrefetchError)
        /// A job was asked for: the one started, if any.
        case asked(EntryState.JobID?)
        /// A job start found the bytes written meanwhile: step again (no job was asked for).
        case again
        case stream(ByteRange, failed: PrefetchError?)
    }

    /// The reader's next step. A job start's effects run in `start`, outside the lock, which
    /// finishes the start (`lockTaken`, then `admit` or `abandon`) and returns the job.
    func step(_ r: EntryState.ReaderAt, start: (EntryState.JobStart) -> StartOutcome) -> ReaderStep {
        cond.lock()
        let step = state.step(r)
        if case .wait = step {
            let signalled = cond.wait(seconds: 1)
            cond.unlock()
            return .waited(signalled: signalled)
        }
        cond.unlock()
        switch step {
        case .closing: return .closing
        case .read(let upTo, let fromWrites): return .read(upTo: upTo, fromWrites: fromWrites)
        case .refresh: return .refresh
        case .wait: preconditionFailure("handled above")
        case .jobInTrouble(let why): return .jobInTrouble(why)
        case .failedHere(let e): return .failedHere(e)
        case .noJob: return .asked(nil)
        case .startJob(let s):
            switch start(s) {
            case .started(let job): return .asked(job)
            case .none: return .asked(nil)
            case .again: return .again
            }
        case .stream(let span, let failed): return .stream(span, failed: failed)
        }
    }

    /// A read justified by this process's writes is over.
    func doneReadingWrites() { transition { s, _ in s.doneReadingWrites() } }

    // MARK: Starting a job (`ReadThrough.startJob`, outside the lock)

    /// The start's flock: taken by `take` when the start is to take it. False: no job starts.
    func takeLock(for s: EntryState.JobStart, _ take: () -> EntryLock?) -> Bool {
        guard s.takesLock else { return true }
        let lock = take()
        transition { st, h in
            st.lockTaken(lock != nil)
            h.flock = lock
        }
        return lock != nil
    }

    /// How a job start's effects ended.
    enum StartOutcome: Equatable {
        case started(EntryState.JobID)
        /// No job runs (the reader streams the rest).
        case none
        /// The bytes were written meanwhile: the reader steps again.
        case again
    }

    /// The start's effects ran: the job is added (its stop kept), or nothing runs and the start
    /// leaves the lock. Returns the job and its span, or why none runs (`again`: step again).
    func admit(_ s: EntryState.JobStart, room: Int64?, file: FileID, stop: @escaping @Sendable () -> Void) -> (EntryState.Admitted?, again: Bool) {
        let (admitted, again, release) = transition { st, h in
            let a = st.admit(s, room: room, file: file)
            if let job = a.admitted?.job { h.stops[job] = stop }
            return a
        }
        if case .release(let runDrop) = release { _ = releaseLock(runDrop: runDrop) }
        return (admitted, again)
    }

    /// The start's effects failed: it leaves the lock.
    func abandon(_ s: EntryState.JobStart) {
        if case .release(let runDrop) = transition({ st, _ in st.abandon(s) }) { _ = releaseLock(runDrop: runDrop) }
    }

    /// A reader adopted `file`, created for a job.
    func adopt(_ file: FileID) { transition { s, _ in s.adopt(file) } }

    /// Where the job stops now.
    func limit(of job: EntryState.JobID) -> Int64 { query { $0.limit(of: job) } ?? 0 }

    // MARK: What a job reports (from its thread)

    func recordWrite(_ range: ByteRange, in file: FileID, by job: EntryState.JobID, version: Validators) {
        transition { s, _ in s.wrote(range, in: file, by: job, version: version) }
    }

    func writerRetrying(_ job: EntryState.JobID, reason: String) { transition { s, _ in s.retrying(job, reason: reason) } }

    /// The job is about to drop the version it wrote into its file (catalog rows, then a new
    /// `data`): before the catalog names another version and before that file can go.
    func writerDropping(_ job: EntryState.JobID) { transition { s, _ in s.dropping(job) } }

    func writerEnded(_ job: EntryState.JobID, error: PrefetchError?) {
        transition { s, h in
            s.ended(job, error: error)
            h.stops[job] = nil
        }
    }

    /// Job `job` gives unclaimed bytes of `file` back: forgotten at once, reads of them in flight
    /// waited for, then punched (outside the lock: no new read can be justified by them), except
    /// where another job of this process writes (`EntryState.punchable`).
    func giveBack(_ ranges: RangeSet, in file: FileID, by job: EntryState.JobID, punch: (ByteRange) -> Void) {
        cond.lock()
        var next = state.giveBack(ranges, in: file)
        while next == .waitForReaders {
            cond.wait()
            next = state.giveBackWaited()
        }
        let punched = state.punchable(ranges, in: file, by: job)
        cond.broadcast()
        cond.unlock()
        for r in punched.ranges { punch(r) }
    }

    /// A job left the entry's lock (it ended); the last one out runs a drop handed over, then
    /// releases the flock. The drop's error is returned for the caller to report.
    @discardableResult
    func jobLeft() -> Error? {
        guard case .release(let runDrop) = transition({ s, _ in s.leaveLock() }) else { return nil }
        return releaseLock(runDrop: runDrop)
    }

    /// The last job left: the drop handed over (no job joins meanwhile), then the flock.
    private func releaseLock(runDrop: Bool) -> Error? {
        let (flock, drop) = query { _ in (handles.flock, runDrop ? handles.pendingDrop : nil) }
        var failure: Error?
        do { try drop?() } catch { failure = error }
        flock?.release()
        transition { s, h in
            s.released()
            h.flock = nil
            h.pendingDrop = nil
        }
        return failure
    }

    // MARK: An operation alone (a start over, a drop, an MPD kept whole)

    /// Runs `body` holding the entry's writer lock alone: no job of this process holds it or
    /// starts meanwhile (a reader needing one waits), and the flock, taken by `take` outside the
    /// lock, keeps other processes out. Nil, without running `body`, when this process's jobs
    /// use the entry, the server stops, or `take` finds the flock held elsewhere.
    func alone<T>(take: () -> EntryLock?, _ body: () -> T) -> T? {
        guard transition({ s, _ in s.beginAlone() }) else { return nil }
        defer { transition { s, _ in s.endAlone() } }
        guard let lock = take() else { return nil }
        defer { lock.release() }
        return body()
    }

    /// The entry's writer lock as job `job` sees it (`PrefetchOptions.sharedLock`).
    func jobLock() -> SharedEntryLock { JobLock(board: self) }

    private final class JobLock: SharedEntryLock, @unchecked Sendable {
        // @unchecked: `board` never changes; the board has its own lock.
        let board: EntryBoard
        init(board: EntryBoard) { self.board = board }
        func beginExclusive() -> Bool { board.transition { s, _ in s.beginExclusive() } }
        func endExclusive() { board.transition { s, _ in s.endExclusive() } }
        func dropAlone(_ drop: @escaping @Sendable () throws -> Void) throws -> Bool {
            let now = board.transition { s, h -> Bool in
                let now = s.dropAlone()
                if !now && h.pendingDrop == nil { h.pendingDrop = drop }
                return now
            }
            guard now else { return false }
            defer { endExclusive() }
            try drop()
            return true
        }
    }
}
