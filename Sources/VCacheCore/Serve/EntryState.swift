/// Everything this process knows of one entry while `serve` uses it, as one pure value: no lock,
/// no I/O, no thread, no closure. Each event is a `mutating` transition that returns what to do;
/// `EntryBoard` (the shell) takes its lock, runs the transition, lets go, and only then does
/// what it was told (evict, flock, create `data`, spawn a job, punch holes), feeding the outcome
/// back as the next event. Table-tested and model-tested in `EntryStateTests`.
///
/// The fields (Docs/architecture.md, "serve's per-entry state"):
/// - `lifecycle`: `open`, or `closing` (the server stops: readers give up, jobs are stopped);
/// - `lock`: the entry's writer lock as this process holds it (`free`, `taking`, `held(jobs)`,
///   `dropping(jobs)`, `dropPending(jobs)`, `releasing`, `alone`);
/// - `jobs`: this process's storing jobs, each `running(position, file, trouble)`, `dropped`
///   or `ended(error)`;
/// - `files`: each file (by identity) readers and jobs hold, and the bytes this process wrote
///   into it, of one version;
/// - `readers`, `readingWrites`: readers using the entry, and those reading bytes justified only
///   by this process's writes right now;
/// - `starting`: a job start whose effects run now (one at a time per entry);
/// - `head`: what the head fetch of `open` wrote, and into which file;
/// - `generation`: changes whenever the set of jobs, their limits or the lock changes, so a
///   start admitted after its effects ran knows whether its plan still holds.
struct EntryState: Sendable {
    typealias JobID = Int

    enum Lifecycle: Equatable, Sendable { case open, closing }

    /// The entry's writer lock (a flock on the entry, `CacheStore.tryLockWriter`), shared by this
    /// process's jobs. A drop replaces `data`: a job still writing the old file would then claim
    /// bytes the new one lacks. So a job drops only when it is the only one (`dropping`), and no
    /// job joins while a drop runs or waits (`dropPending`: handed to the last job to leave).
    enum WriterLock: Equatable, Sendable {
        case free
        /// A job start is taking it (the flock is tried outside the lock).
        case taking
        /// Held for `jobs` jobs (a start whose effects run counts as one).
        case held(jobs: Int)
        /// The only job drops the version now; none joins.
        case dropping(jobs: Int)
        /// A drop waits for the last job to leave; none joins.
        case dropPending(jobs: Int)
        /// The last job left: the drop handed over (if any) and the release run outside the lock.
        /// The flock is still held: what this process wrote is still its own.
        case releasing
        /// An operation of this process outside any job (a start over, a drop of a version gone
        /// from the origin, an MPD kept whole) takes or holds it alone, outside the lock; no job
        /// starts until it ends (`beginAlone`, `endAlone`).
        case alone

        /// This process holds the flock (its own writes are trusted only then).
        var isHeld: Bool {
            switch self {
            // `alone`: no job of this process writes while it runs, and what was written before
            // (the lock was free) is trusted no more than then.
            case .free, .taking, .alone: false
            case .held, .dropping, .dropPending, .releasing: true
            }
        }
    }

    enum JobPhase: Equatable, Sendable {
        /// Writing; `file`: the file it writes into; `trouble`: why it is retrying the origin.
        case running(position: Int64, file: FileID?, trouble: String?)
        /// It dropped the version its readers were promised: what it writes now is no reader's.
        case dropped(position: Int64)
        case ended(PrefetchError?)
    }

    struct Job: Equatable, Sendable {
        let start: Int64
        let end: Int64
        /// Where it stops: `end`, or where a later job took over the rest.
        var limit: Int64
        var phase: JobPhase
        /// The reader that started it is still there (its error is kept for it until it leaves).
        var starterPresent = true

        var effectiveEnd: Int64 { min(end, limit) }
        var span: ByteRange { ByteRange(start, effectiveEnd) }
        var isEnded: Bool { if case .ended = phase { true } else { false } }
        var position: Int64 {
            switch phase {
            case .running(let p, _, _), .dropped(let p): p
            case .ended: effectiveEnd
            }
        }
        var file: FileID? { if case .running(_, let f, _) = phase { f } else { nil } }
        var trouble: String? { if case .running(_, _, let t) = phase { t } else { nil } }
    }

    /// One file readers or jobs of this process hold open, and what this process wrote into it.
    struct FileRecord: Equatable, Sendable {
        var holders: Int
        /// The version the writing jobs' readers were promised, and the bytes of it written here.
        var writes: (version: Validators, ranges: RangeSet)?

        static func == (a: FileRecord, b: FileRecord) -> Bool {
            a.holders == b.holders && a.writes?.version == b.writes?.version && a.writes?.ranges == b.writes?.ranges
        }
    }

    struct Head: Equatable, Sendable {
        var file: FileID
        var ranges = RangeSet()
    }

    private(set) var lifecycle = Lifecycle.open
    private(set) var lock = WriterLock.free
    private(set) var jobs: [JobID: Job] = [:]
    private(set) var files: [FileID: FileRecord] = [:]
    private(set) var readers = 0
    /// Readers that ever arrived: an orphan grace is over only if none came since it began.
    private(set) var arrivals = 0
    private(set) var readingWrites = 0
    private(set) var starting: JobStart?
    /// The head `open` stores now (one opener at a time): the file it went into, held open by the
    /// shell from its first write so its inode number cannot be given to another file meanwhile,
    /// and the bytes written there.
    private(set) var head: Head?
    private(set) var generation = 0
    private var nextJob: JobID = 1

    /// Nothing of the entry is in use: no reader, job, start or lock (the board may be forgotten).
    var isIdle: Bool { readers == 0 && jobs.isEmpty && starting == nil && lock == .free && head == nil }

    /// Jobs not ended, by id (in the order they were started).
    var runningJobs: [(id: JobID, job: Job)] {
        jobs.filter { !$0.value.isEnded }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    // MARK: Queries

    /// This process's writes into `file`, when they are of the version `promised` (another
    /// version's bytes are never a reader's, whatever file they went into).
    func ownWrites(_ file: FileID?, promised: Validators) -> RangeSet {
        guard let file, let w = files[file]?.writes, promised.admits(w.version) else { return RangeSet() }
        return w.ranges
    }

    /// This process's writes a reader promised `promised` may trust: only while this process
    /// holds the entry (afterwards they are claimed in the catalog, or another writer may reuse
    /// the file's unclaimed space).
    func trustedWrites(_ file: FileID?, promised: Validators) -> RangeSet {
        lock.isHeld ? ownWrites(file, promised: promised) : RangeSet()
    }

    /// Where the job stops now (read by the job as it writes).
    func limit(of job: JobID) -> Int64? { jobs[job].map(\.effectiveEnd) }

    // MARK: Readers

    /// A reader holding `file` arrived. `ownHead`: the head `open` stored into that file, of
    /// `version`, recorded now that a reader holds the file (a record must not outlive its file).
    mutating func readerArrived(holding file: FileID?, ownHead: RangeSet, version: Validators) {
        readers += 1
        arrivals += 1
        hold(file)
        if let file, !ownHead.isEmpty { record(file, ownHead, version: version) }
    }

    /// What a reader leaving asks for: jobs to stop now, and jobs to stop if still running with
    /// no reader after the orphan grace.
    struct Leaving: Equatable, Sendable {
        var stop: [JobID] = []
        var orphans: [JobID] = []
        /// `arrivals` when it left: the orphans' grace is void once another reader came (that
        /// reader's own leaving starts a new grace).
        var arrivals = 0
    }

    /// A reader left (with the claims it had, and the jobs it started). When it was the last,
    /// what is still to fetch is not worth it for nobody: jobs far from their end stop; those
    /// near it finish, but only for the orphan grace.
    mutating func readerLeft(holding file: FileID?, claims: RangeSet, promised: Validators, started: [JobID]) -> Leaving {
        readers -= 1
        var out = Leaving(arrivals: arrivals)
        if readers == 0 {
            for (id, job) in runningJobs {
                var have = claims
                have.formUnion(trustedWrites(job.file, promised: promised))
                if ServeDecision.stopsWithoutReaders(from: job.position, to: job.effectiveEnd, have: have) { out.stop.append(id) } else { out.orphans.append(id) }
            }
        }
        unhold(file)
        for id in started {
            guard var job = jobs[id] else { continue }
            if job.isEnded { jobs[id] = nil } else {
                job.starterPresent = false
                jobs[id] = job
            }
        }
        return out
    }

    /// The orphan grace of `leaving.orphans` is over: those still running stop if no reader came
    /// since. (A reader that came and left again began a grace of its own, which this one must
    /// not cut short: checking only that no reader is there now stopped a job one second after
    /// such a reader left, not `orphanGrace` after.)
    func orphansDue(_ leaving: Leaving) -> [JobID] {
        readers == 0 && arrivals == leaving.arrivals ? leaving.orphans.filter { jobs[$0].map { !$0.isEnded } ?? false } : []
    }

    /// Where a reader is, what it holds and may do.
    struct ReaderAt: Equatable, Sendable {
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
        var started: [JobID]
    }

    /// A job start decided for a reader: its effects (room, flock, `data`) run outside the lock,
    /// then `admit` or `abandon` finishes it.
    struct JobStart: Equatable, Sendable {
        let generation: Int
        let wanted: ByteRange
        let plan: ServeDecision.NewJob
        /// The flock is to be taken (no job of this process holds it).
        let takesLock: Bool
    }

    /// What a reader does now.
    enum Step: Equatable, Sendable {
        /// The server is stopping.
        case closing
        /// Read `[position, upTo)`; `fromWrites`: some of it is justified only by this process's
        /// writes (`doneReadingWrites` after).
        case read(upTo: Int64, fromWrites: Bool)
        case refresh
        /// Wait (at most a second) for the entry to change: a job about to write the bytes, or a
        /// start of another reader's whose effects run now.
        case wait
        /// About to answer, and the job that would write these bytes is retrying the origin: why.
        case jobInTrouble(String)
        /// A job of this response failed over this point already.
        case failedHere(PrefetchError)
        /// Run a job start's effects, then `admit` or `abandon` it.
        case startJob(JobStart)
        /// A job was asked for but none can run (the lock is being dropped or released, or no
        /// byte is left to a new job): the rest is streamed.
        case noJob
        /// Stream the span unstored; `failed`: a job of this response failed where it begins.
        case stream(ByteRange, failed: PrefetchError?)
    }

    /// The reader's next step (`ServeDecision.Read`, against the jobs running now).
    mutating func step(_ r: ReaderAt) -> Step {
        if lifecycle == .closing { return .closing }
        var justified = r.claims
        justified.formUnion(trustedWrites(r.file, promised: r.promised))
        let running = runningJobs
        let views = running.map { ServeDecision.Job(start: $0.job.start, end: $0.job.effectiveEnd, position: $0.job.position,
                                                    writesReadersFile: $0.job.file != nil && $0.job.file == r.file) }
        let p = r.position
        let decision = ServeDecision.Read(position: p, end: r.end, justified: justified, refreshed: r.refreshed,
                                          hasFile: r.hasFile, jobs: views, jobsStarted: r.jobsAsked, mayStore: r.mayStore)
        switch decision.step {
        case .read(let upTo):
            let fromWrites = r.claims.contiguousEnd(from: p) < upTo
            if fromWrites { readingWrites += 1 }
            return .read(upTo: upTo, fromWrites: fromWrites)
        case .refresh:
            return .refresh
        case .wait:
            if r.preparing, let trouble = running.first(where: { $0.job.trouble != nil && $0.job.start <= p && p < $0.job.effectiveEnd })?.job.trouble {
                return .jobInTrouble(trouble)
            }
            return .wait
        case .startJob(let wanted):
            if let failed = failure(of: r.started, at: p) { return .failedHere(failed) }
            // One start at a time per entry: jobs never fetch the same byte.
            if starting != nil { return .wait }
            let plan = ServeDecision.NewJob(wanted: wanted, running: running.map(\.job.span))
            guard plan.span != nil else { return .noJob }
            let takesLock: Bool
            switch lock {
            case .free: takesLock = true; lock = .taking
            case .held(let n): takesLock = false; lock = .held(jobs: n + 1)
            case .taking, .dropping, .dropPending, .releasing: return .noJob
            // Brief, and the entry is free again after: step again then.
            case .alone: return .wait
            }
            let s = JobStart(generation: generation, wanted: wanted, plan: plan, takesLock: takesLock)
            starting = s
            return .startJob(s)
        case .stream(let span):
            return .stream(span, failed: failure(of: r.started, at: p))
        }
    }

    /// A read justified by this process's writes is over.
    mutating func doneReadingWrites() { readingWrites -= 1 }

    /// The error of a job of `ids` that ended failing over `p`. A job stopped because its readers
    /// left or the server stops is not a failure of the origin.
    func failure(of ids: [JobID], at p: Int64) -> PrefetchError? {
        for id in ids.reversed() {
            guard let job = jobs[id], case .ended(let e?) = job.phase, e != .interrupted, e != .deadline, e != .lockBusy else { continue }
            if job.start <= p && p < job.end { return e }
        }
        return nil
    }

    // MARK: Starting a job (effects outside the lock, between these)

    /// The start's flock was tried: held now for the start, or the start is over (nothing runs).
    mutating func lockTaken(_ taken: Bool) {
        precondition(lock == .taking && starting != nil, "lockTaken in \(lock)")
        lock = taken ? .held(jobs: 1) : .free
        if !taken { starting = nil }
        generation += 1
    }

    /// What admitting a start gives: the job, and the running jobs it overtook (they stop where
    /// it begins).
    struct Admitted: Equatable, Sendable {
        var job: JobID
        var span: ByteRange
    }

    /// The start's effects ran: `room` more bytes may be stored (nil: no limit), and the job
    /// writes into `file`. Its plan is taken again when the jobs changed meanwhile (the
    /// generation moved). Nil when no job runs after all: the server stops, nothing fits, or
    /// (`retry`) a running job wrote past the start's first byte while the effects ran (the
    /// reader steps again: those bytes are read, not fetched twice). The start has then left the
    /// lock (see `release`).
    mutating func admit(_ s: JobStart, room: Int64?, file: FileID) -> (admitted: Admitted?, retry: Bool, release: Release) {
        precondition(starting == s, "admit of a start not in flight")
        starting = nil
        var plan = s.plan
        let running = runningJobs
        if s.generation != generation { plan = ServeDecision.NewJob(wanted: s.wanted, running: running.map(\.job.span)) }
        let p = s.wanted.lowerBound
        if lifecycle == .open, running.contains(where: { $0.job.file == file && $0.job.start <= p && p < $0.job.position }) {
            return (nil, true, leaveLock())
        }
        guard lifecycle == .open, var span = plan.fitted(room: room) else { return (nil, false, leaveLock()) }
        // A job overtaken here may be past the point already (in another file than the reader's,
        // or its bytes were not the reader's to trust). The new job begins where the furthest of
        // them is, and they stop there: two jobs never write the same byte (what one gives back
        // after a failed checkpoint is punched, even where the other wrote and claimed it).
        let passed = plan.overtaken.map { running[$0].job.position }.max() ?? span.lowerBound
        if passed > span.lowerBound {
            guard passed < span.upperBound else { return (nil, false, leaveLock()) }
            span = ByteRange(passed, span.upperBound)
        }
        for i in plan.overtaken { jobs[running[i].id]?.limit = span.lowerBound }
        let id = nextJob
        nextJob += 1
        jobs[id] = Job(start: span.lowerBound, end: span.upperBound, limit: span.upperBound,
                       phase: .running(position: span.lowerBound, file: file, trouble: nil))
        hold(file)
        generation += 1
        return (Admitted(job: id, span: span), false, .none)
    }

    /// The start's effects failed (no room, the file is not the entry's any more): it leaves the
    /// lock it was counted in.
    mutating func abandon(_ s: JobStart) -> Release {
        precondition(starting == s, "abandon of a start not in flight")
        starting = nil
        return leaveLock()
    }

    /// A reader adopted `file`, created for a job (it holds it from now on).
    mutating func adopt(_ file: FileID) { hold(file) }

    // MARK: What a job reports

    /// The job wrote `range` into `file`, as bytes of `version` (the one its readers were
    /// promised). Nothing once the job dropped that version: what it writes then is of another.
    mutating func wrote(_ range: ByteRange, in file: FileID, by id: JobID, version: Validators) {
        guard let job = jobs[id], case .running(let position, let old, _) = job.phase else { return }
        if old != file {
            hold(file)
            unhold(old)
        }
        record(file, RangeSet([range]), version: version)
        // Bytes arrive again: a retry that worked is no trouble.
        jobs[id]?.phase = .running(position: max(position, range.upperBound), file: file, trouble: nil)
    }

    mutating func retrying(_ id: JobID, reason: String) {
        guard let job = jobs[id], case .running(let position, let file, _) = job.phase else { return }
        jobs[id]?.phase = .running(position: position, file: file, trouble: reason)
    }

    /// The job is about to drop the version it wrote into its file: no reader trusts what it
    /// wrote there from now on, and none waits for it.
    mutating func dropping(_ id: JobID) {
        guard let job = jobs[id], case .running(let position, let file, _) = job.phase else { return }
        unhold(file)
        jobs[id]?.phase = .dropped(position: position)
        generation += 1
    }

    mutating func ended(_ id: JobID, error: PrefetchError?) {
        guard let job = jobs[id], !job.isEnded else { return }
        unhold(job.file)
        if job.starterPresent { jobs[id]?.phase = .ended(error) } else { jobs[id] = nil }
        generation += 1
    }

    /// What giving bytes back asks for.
    enum GiveBack: Equatable, Sendable {
        /// No read of this process's writes is in flight: punch now (no new one can read them).
        case punch
        /// Wait for the reads in flight, then ask `giveBackWaited` again.
        case waitForReaders
    }

    /// The job gives unclaimed bytes of `file` back: no reader may trust them from now on, and
    /// none may be reading them when they are punched.
    mutating func giveBack(_ ranges: RangeSet, in file: FileID) -> GiveBack {
        if var w = files[file]?.writes {
            for r in ranges.ranges { w.ranges.remove(r) }
            files[file]?.writes = w
        }
        return giveBackWaited()
    }

    func giveBackWaited() -> GiveBack { readingWrites > 0 ? .waitForReaders : .punch }

    /// Of `ranges` job `id` gives back in `file`, those it may punch: none in the span of another
    /// job of this process writing that file, up to where it wrote (bytes staged under a limit
    /// that moved land past it; a dropped job's writes are not followed): those are the other
    /// job's to claim or give back, and punching them would leave its claims over a hole.
    func punchable(_ ranges: RangeSet, in file: FileID, by id: JobID) -> RangeSet {
        var out = ranges
        for (other, job) in jobs where other != id {
            let writes: Bool = switch job.phase {
            case .running(_, let f, _): f == file
            case .dropped: true
            case .ended: false
            }
            let upTo = max(job.position, job.effectiveEnd)
            if writes && job.start < upTo { out.remove(ByteRange(job.start, upTo)) }
        }
        return out
    }

    // MARK: The writer lock, as the jobs sharing it use it

    /// What leaving the lock asks the shell to do.
    enum Release: Equatable, Sendable {
        case none
        /// The last job left: run the drop handed over (`runDrop`), then release the flock, then
        /// `released`.
        case release(runDrop: Bool)
    }

    /// The calling job may drop the entry's version: it is the only one writing.
    mutating func beginExclusive() -> Bool {
        guard case .held(1) = lock else { return false }
        lock = .dropping(jobs: 1)
        generation += 1
        return true
    }

    mutating func endExclusive() {
        if case .dropping(let n) = lock {
            lock = .held(jobs: n)
            generation += 1
        }
    }

    /// A job asks to drop every claim: now when it is alone (`true`: run it, then
    /// `endExclusive`), else handed to the last job to leave (`false`).
    mutating func dropAlone() -> Bool {
        if beginExclusive() { return true }
        switch lock {
        case .held(let n), .dropping(let n): lock = .dropPending(jobs: n)
        default: break
        }
        generation += 1
        return false
    }

    /// A job (or a start) left the lock.
    mutating func leaveLock() -> Release {
        generation += 1
        switch lock {
        case .held(let n), .dropping(let n):
            if n > 1 {
                lock = .held(jobs: n - 1)
                return .none
            }
            lock = .releasing
            return .release(runDrop: false)
        case .dropPending(let n):
            if n > 1 {
                lock = .dropPending(jobs: n - 1)
                return .none
            }
            lock = .releasing
            return .release(runDrop: true)
        case .free, .taking, .releasing, .alone:
            preconditionFailure("a job left a lock it does not hold (\(lock))")
        }
    }

    /// The flock was released.
    mutating func released() {
        precondition(lock == .releasing, "released in \(lock)")
        lock = .free
        generation += 1
    }

    // MARK: An operation alone (no job)

    /// An operation outside any job is to take the entry's writer lock alone: only when no job
    /// or start of this process holds or takes it, and the server is not stopping. True: it
    /// takes the flock now (outside the lock), and `endAlone` follows whatever came of it.
    mutating func beginAlone() -> Bool {
        guard lock == .free, starting == nil, lifecycle == .open else { return false }
        lock = .alone
        generation += 1
        return true
    }

    /// The operation alone is over, its flock (if it got one) released.
    mutating func endAlone() {
        precondition(lock == .alone, "endAlone in \(lock)")
        lock = .free
        generation += 1
    }

    // MARK: The head `open` stores

    /// Whether the head's file is to be pinned (opened by path and checked to be `file`) before
    /// its writes count: at its first write.
    func headNeedsPin() -> Bool { head == nil }

    /// The head's file was opened by path and is `file`.
    mutating func headPinned(_ file: FileID) -> Bool {
        guard head == nil else { return false }
        head = Head(file: file)
        return true
    }

    /// The head fetch wrote `range` into `file`: counted when that is the pinned file.
    mutating func headWrote(_ range: ByteRange, in file: FileID) {
        guard head?.file == file else { return }
        head?.ranges.insert(range)
    }

    /// What the head wrote into `file`, when it is the file the head went into.
    func headRanges(_ file: FileID) -> RangeSet? { head?.file == file ? head?.ranges : nil }

    mutating func headDone() { head = nil }

    // MARK: The server stops

    /// Readers give up, and every running job is stopped.
    mutating func close() -> [JobID] {
        lifecycle = .closing
        generation += 1
        return runningJobs.map(\.id)
    }

    // MARK: Private

    private mutating func hold(_ file: FileID?) {
        guard let file else { return }
        files[file, default: FileRecord(holders: 0)].holders += 1
    }

    /// An inode number is reused once no one holds its file, so what this process wrote into a
    /// file is forgotten when its last holder here lets go.
    private mutating func unhold(_ file: FileID?) {
        guard let file, let f = files[file] else { return }
        if f.holders <= 1 { files[file] = nil } else { files[file]?.holders = f.holders - 1 }
    }

    /// Records `ranges` written into `file` (held) as bytes of `version`. Bytes of another version
    /// in the same file replace the record: they may have overwritten what it names.
    private mutating func record(_ file: FileID, _ ranges: RangeSet, version: Validators) {
        guard files[file] != nil else { return }  // not held: nothing may be recorded of it
        if var w = files[file]?.writes, w.version == version {
            w.ranges.formUnion(ranges)
            files[file]?.writes = w
        } else {
            files[file]?.writes = (version, ranges)
        }
    }
}
