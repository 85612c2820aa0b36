import Foundation
import Synchronization
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// serve's per-entry state machine alone: no lock, no file, no thread. Table tests of the
/// transitions, then a seeded model test that drives thousands of random events (readers
/// arriving and leaving, jobs writing, failing, dropping their version and giving bytes back,
/// the lock shared and released, inode numbers reused, the server closing) and checks the
/// invariants after every step.
@Suite struct EntryStateTests {
    static let v1 = Validators(length: 1 << 20, etag: "\"a\"", lastModified: nil)
    static let v2 = Validators(length: 1 << 20, etag: "\"b\"", lastModified: nil)
    static let f1 = FileID(device: 1, inode: 10)
    static let f2 = FileID(device: 1, inode: 11)

    static func at(_ p: Int64, end: Int64 = 8 << 20, claims: RangeSet = RangeSet(), file: FileID? = f1, refreshed: Bool = true,
                   preparing: Bool = false, started: [EntryState.JobID] = [], asked: Int = 0, mayStore: Bool = true) -> EntryState.ReaderAt {
        // (end: 1 MiB by default; a job from 0 covers the window of a reader at up to 1 MiB)
        EntryState.ReaderAt(position: p, end: end, claims: claims, file: file, promised: v1, hasFile: file != nil, refreshed: refreshed,
                            mayStore: mayStore, preparing: preparing, jobsAsked: asked, started: started)
    }

    /// A state with one reader holding `f1` and one job admitted for it from `from`.
    static func withJob(from: Int64 = 0, room: Int64? = nil) throws -> (EntryState, EntryState.JobID) {
        var s = EntryState()
        s.readerArrived(holding: f1, ownHead: RangeSet(), version: v1)
        guard case .startJob(let start) = s.step(at(from)) else { throw Failure("no job start") }
        #expect(start.takesLock)
        s.lockTaken(true)
        let admitted = try #require(s.admit(start, room: room, file: f1).admitted)
        return (s, admitted.job)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    // MARK: A reader's step

    @Test func claimedBytesAreReadWithoutTheLock() {
        var s = EntryState()
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        let step = s.step(Self.at(0, claims: RangeSet([ByteRange(0, 500)])))
        #expect(step == .read(upTo: 500, fromWrites: false))
        #expect(s.readingWrites == 0)
        #expect(s.lock == .free)
    }

    @Test func aGapNotRefreshedIsRefreshedFirst() {
        var s = EntryState()
        #expect(s.step(Self.at(0, refreshed: false)) == .refresh)
    }

    @Test func aJobStartTakesTheLockAndCountsInIt() throws {
        var s = EntryState()
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        guard case .startJob(let start) = s.step(Self.at(100)) else { throw Failure("expected a job start") }
        #expect(start.wanted == ByteRange(100, 8 << 20))
        #expect(s.lock == .taking)
        // A second reader asking meanwhile waits for the start (one at a time per entry).
        #expect(s.step(Self.at(200)) == .wait)
        s.lockTaken(true)
        #expect(s.lock == .held(jobs: 1))
        let a = try #require(s.admit(start, room: nil, file: Self.f1).admitted)
        #expect(a.span == ByteRange(100, 8 << 20))
        #expect(s.lock == .held(jobs: 1))
        #expect(s.starting == nil)
    }

    @Test func aLockAnotherProcessHoldsStartsNothing() throws {
        var s = EntryState()
        guard case .startJob = s.step(Self.at(0)) else { throw Failure("expected a job start") }
        s.lockTaken(false)
        #expect(s.lock == .free && s.starting == nil && s.isIdle)
    }

    @Test func aSecondJobJoinsTheHeldLock() throws {
        var (s, _) = try Self.withJob(from: 0)
        guard case .startJob(let start) = s.step(Self.at(3_000_000)) else { throw Failure("expected a job start") }
        #expect(!start.takesLock)
        #expect(s.lock == .held(jobs: 2))
        let a = try #require(s.admit(start, room: nil, file: Self.f1).admitted)
        // The first job, far behind, is overtaken: it stops where the new one begins.
        #expect(s.limit(of: 1) == 3_000_000)
        #expect(a.span == ByteRange(3_000_000, 8 << 20))
    }

    @Test func aStartWhoseWorldChangedIsPlannedAgain() throws {
        var (s, first) = try Self.withJob(from: 0)
        guard case .startJob(let start) = s.step(Self.at(3_000_000)) else { throw Failure("expected a job start") }
        // While its effects ran, the first job ended: nothing is overtaken any more.
        s.ended(first, error: nil)
        let a = try #require(s.admit(start, room: nil, file: Self.f1).admitted)
        #expect(a.span == ByteRange(3_000_000, 8 << 20))
        #expect(s.limit(of: first) == 8 << 20)
    }

    @Test func aStartOvertakenByTheJobItWouldOvertakeStepsAgain() throws {
        var (s, first) = try Self.withJob(from: 0)
        guard case .startJob(let start) = s.step(Self.at(3_000_000)) else { throw Failure("expected a job start") }
        // While its effects ran, the first job wrote past the start's first byte.
        s.wrote(ByteRange(0, 3_500_000), in: Self.f1, by: first, version: Self.v1)
        let (admitted, again, release) = s.admit(start, room: nil, file: Self.f1)
        #expect(admitted == nil && again && release == .none)
        #expect(s.limit(of: first) == 8 << 20)
        #expect(s.lock == .held(jobs: 1))
        #expect(s.step(Self.at(3_000_000)) == .read(upTo: 3_500_000, fromWrites: true))
    }

    /// A running job far behind a reader is overtaken where the reader is; but it writes on while
    /// the start's effects run (eviction can take a while), and may be past that point when the
    /// start is admitted. The new job then begins where the overtaken one is: were it to begin
    /// behind it, both would have written the same bytes, and what one gives back after a failed
    /// checkpoint is punched, under the other's writes and claims.
    @Test func aJobThatWroteOnWhileAStartRanIsNotOvertakenBehindItsPosition() throws {
        var (s, first) = try Self.withJob(from: 0)
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        guard case .startJob(let start) = s.step(Self.at(2 << 20)) else {
            throw Failure("expected a job start")
        }
        #expect(!start.takesLock)
        // Meanwhile the first job writes past the reader's point, into another file than the
        // reader's (in the reader's own file the reader would read them: `again`).
        s.wrote(ByteRange(0, 2_500_000), in: Self.f2, by: first, version: Self.v1)
        let admitted = try #require(s.admit(start, room: nil, file: Self.f1).admitted)
        let firstJob = try #require(s.jobs[first])
        #expect(admitted.span.lowerBound == 2_500_000, "the new job fetches again bytes the first one wrote: \(admitted.span)")
        #expect(firstJob.effectiveEnd >= firstJob.position, "the first job stops at \(firstJob.effectiveEnd), behind where it wrote (\(firstJob.position))")
        // Past its whole span: no job starts, and the start leaves the lock it was counted in.
        var (t, other) = try Self.withJob(from: 0)
        t.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        guard case .startJob(let late) = t.step(Self.at(2 << 20, end: 3 << 20)) else { throw Failure("expected a job start") }
        t.wrote(ByteRange(0, 8 << 20), in: Self.f2, by: other, version: Self.v1)
        let none = t.admit(late, room: nil, file: Self.f1)
        #expect(none.admitted == nil && !none.retry && none.release == .none)
        #expect(t.lock == .held(jobs: 1))
    }

    @Test func noRoomAbandonsTheStartAndReleasesTheLock() throws {
        var s = EntryState()
        guard case .startJob(let start) = s.step(Self.at(0)) else { throw Failure("expected a job start") }
        s.lockTaken(true)
        let (admitted, _, release) = s.admit(start, room: 100, file: Self.f1)
        #expect(admitted == nil)
        #expect(release == .release(runDrop: false))
        #expect(s.lock == .releasing)
        s.released()
        #expect(s.isIdle)
    }

    @Test func aClosingServerAdmitsNoJob() throws {
        var s = EntryState()
        guard case .startJob(let start) = s.step(Self.at(0)) else { throw Failure("expected a job start") }
        s.lockTaken(true)
        #expect(s.close().isEmpty)
        #expect(s.admit(start, room: nil, file: Self.f1).admitted == nil)
        #expect(s.step(Self.at(0)) == .closing)
    }

    @Test func bytesWrittenAreReadFromWritesAndCounted() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v1)
        #expect(s.step(Self.at(0)) == .read(upTo: 4096, fromWrites: true))
        #expect(s.readingWrites == 1)
        // Ahead of the job, within the window: wait for it.
        #expect(s.step(Self.at(4096, refreshed: true)) == .wait)
        s.doneReadingWrites()
        #expect(s.readingWrites == 0)
    }

    @Test func bytesOfAnotherVersionAreNeverTrusted() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v2)
        #expect(s.ownWrites(Self.f1, promised: Self.v1).isEmpty)
        #expect(s.step(Self.at(0)) != .read(upTo: 4096, fromWrites: true))
    }

    @Test func aDroppedJobsBytesAreNotWaitedFor() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v1)
        s.dropping(job)
        // It writes another version into another file now: nothing of it is recorded.
        s.wrote(ByteRange(4096, 8192), in: Self.f2, by: job, version: Self.v2)
        #expect(s.files[Self.f2] == nil)
        // The reader still holds f1: the bytes written there before the drop are of its version.
        #expect(s.ownWrites(Self.f1, promised: Self.v1) == RangeSet([ByteRange(0, 4096)]))
        // But it is not waited for at 4096: that job writes into no reader's file.
        let step = s.step(Self.at(4096, started: [job], asked: 1))
        #expect(step != .wait)
    }

    @Test func aRecordDiesWithItsLastHolder() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v1)
        s.ended(job, error: nil)
        _ = s.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [job])
        // An inode number given out again must not inherit what was written into the old file.
        #expect(s.files[Self.f1] == nil)
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        #expect(s.ownWrites(Self.f1, promised: Self.v1).isEmpty)
    }

    @Test func writesAreTrustedOnlyWhileTheLockIsHeld() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v1)
        s.ended(job, error: nil)
        #expect(s.leaveLock() == .release(runDrop: false))
        #expect(!s.trustedWrites(Self.f1, promised: Self.v1).isEmpty)  // releasing: still held
        s.released()
        #expect(s.trustedWrites(Self.f1, promised: Self.v1).isEmpty)
    }

    @Test func aJobInTroubleIsTheAnswerBeforeTheHead() throws {
        var (s, job) = try Self.withJob()
        s.retrying(job, reason: "origin answered 503")
        #expect(s.step(Self.at(0, preparing: true, started: [job], asked: 1)) == .jobInTrouble("origin answered 503"))
        s.wrote(ByteRange(0, 10), in: Self.f1, by: job, version: Self.v1)
        #expect(s.step(Self.at(10, preparing: true, started: [job], asked: 1)) == .wait)
    }

    @Test func aFailedOwnJobIsTheAnswerAndStoppedOnesAreNot() throws {
        var (s, job) = try Self.withJob()
        s.ended(job, error: .http(status: 404, reason: "Not Found"))
        #expect(s.step(Self.at(0, started: [job], asked: 1)) == .failedHere(.http(status: 404, reason: "Not Found")))
        var (t, other) = try Self.withJob()
        t.ended(other, error: .interrupted)
        if case .failedHere = t.step(Self.at(0, started: [other], asked: 1)) { Issue.record("a stopped job is no failure of the origin") }
    }

    @Test func anEndedJobIsForgottenWhenItsReaderLeaves() throws {
        var (s, job) = try Self.withJob()
        s.ended(job, error: nil)
        #expect(s.jobs[job] != nil)
        _ = s.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [job])
        #expect(s.jobs[job] == nil)
        // A job whose reader left first is forgotten when it ends.
        var (t, other) = try Self.withJob()
        _ = t.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [other])
        t.ended(other, error: nil)
        #expect(t.jobs[other] == nil)
    }

    // MARK: The last reader leaving

    @Test func theLastReaderStopsFarJobsAndLeavesNearOnesAsOrphans() throws {
        var (s, job) = try Self.withJob(from: 0)
        let leaving = s.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [job])
        #expect(leaving.stop == [job])  // 8 MiB left: more than the window
        var (t, near) = try Self.withJob(from: (8 << 20) - 1000)
        let l2 = t.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [near])
        #expect(l2.stop.isEmpty && l2.orphans == [near])
        #expect(t.orphansDue(l2) == [near])
        t.readerArrived(holding: nil, ownHead: RangeSet(), version: Self.v1)
        #expect(t.orphansDue(l2).isEmpty)  // a reader came back: it goes on
    }

    /// The grace a leaving reader gives a job near its end is void once another reader came: when
    /// that one left in turn, its own grace began. The first timer, firing a moment after the
    /// second reader left, must not stop the job (it did: it saw no reader and stopped it, so the
    /// second reader's grace of 30 s was one of a second).
    @Test func anOrphanGraceIsVoidOnceAnotherReaderCameAndLeft() throws {
        var (s, near) = try Self.withJob(from: (8 << 20) - 1000)
        let first = s.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [near])
        #expect(first.orphans == [near])
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        let second = s.readerLeft(holding: Self.f1, claims: RangeSet(), promised: Self.v1, started: [])
        #expect(second.orphans == [near])
        #expect(s.orphansDue(first).isEmpty, "the first grace, over now, stopped the job the second reader's grace keeps")
        #expect(s.orphansDue(second) == [near])
    }

    // MARK: Giving bytes back

    @Test func bytesGivenBackWaitForReadsInFlightAndAreNotOfferedAgain() throws {
        var (s, job) = try Self.withJob()
        s.wrote(ByteRange(0, 4096), in: Self.f1, by: job, version: Self.v1)
        #expect(s.step(Self.at(0)) == .read(upTo: 4096, fromWrites: true))
        #expect(s.giveBack(RangeSet([ByteRange(0, 4096)]), in: Self.f1) == .waitForReaders)
        #expect(s.ownWrites(Self.f1, promised: Self.v1).isEmpty)
        s.doneReadingWrites()
        #expect(s.giveBackWaited() == .punch)
    }

    /// A job giving bytes back after a failed checkpoint punches none where another job of this
    /// process writes: an overtaken job's bytes staged under its old limit land past the new
    /// one, in the span of the job that overtook it, which writes and claims the same bytes.
    @Test func aGiveBackPunchesNothingAnotherJobWrote() throws {
        let board = EntryBoard()
        let cache = try TestCache()
        let key = CacheKey(String(repeating: "cd", count: 32))!
        board.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        var jobs: [EntryState.JobID] = []
        for p: Int64 in [0, 2 << 20] {
            let step = board.step(Self.at(p)) { start in
                guard board.takeLock(for: start, { (try? cache.store.tryLockWriter(key: key)) ?? nil }) else { return .none }
                return board.admit(start, room: nil, file: Self.f1, stop: {}).0.map { .started($0.job) } ?? .none
            }
            guard case .asked(let job?) = step else { throw Failure("no job: \(step)") }
            jobs.append(job)
        }
        #expect(board.limit(of: jobs[0]) == 2 << 20)
        // The first job's staged bytes land past its new limit; the second writes the same span.
        board.recordWrite(ByteRange(0, (2 << 20) + 100_000), in: Self.f1, by: jobs[0], version: Self.v1)
        board.recordWrite(ByteRange(2 << 20, (2 << 20) + 300_000), in: Self.f1, by: jobs[1], version: Self.v1)
        // The first job's checkpoint failed: it gives back everything it wrote.
        let punched = Box<RangeSet>()
        punched.value = RangeSet()
        board.giveBack(RangeSet([ByteRange(0, (2 << 20) + 100_000)]), in: Self.f1, by: jobs[0]) { punched.value?.insert($0) }
        #expect(punched.value == RangeSet([ByteRange(0, 2 << 20)]), "punched \(punched.value ?? RangeSet()), under the second job's bytes")
        for job in jobs {
            board.writerEnded(job, error: nil)
            board.jobLeft()
        }
    }

    // MARK: The writer lock

    @Test func aJobAloneDropsAtOnceAndNoJobJoinsMeanwhile() throws {
        var (s, _) = try Self.withJob()
        let now = s.dropAlone()
        #expect(now)
        #expect(s.lock == .dropping(jobs: 1))
        #expect(s.step(Self.at(3_000_000)) == .noJob)
        s.endExclusive()
        #expect(s.lock == .held(jobs: 1))
    }

    @Test func aDropAmongOtherJobsWaitsForTheLastOneToLeave() throws {
        var (s, _) = try Self.withJob()
        guard case .startJob(let start) = s.step(Self.at(3_000_000)) else { throw Failure("expected a job start") }
        _ = try #require(s.admit(start, room: nil, file: Self.f1).admitted)
        let exclusive = s.beginExclusive(), now = s.dropAlone()
        #expect(!exclusive && !now)
        #expect(s.lock == .dropPending(jobs: 2))
        #expect(s.step(Self.at(2_000_000)) == .noJob)
        #expect(s.leaveLock() == .none)
        #expect(s.leaveLock() == .release(runDrop: true))
        #expect(s.lock == .releasing)
        s.released()
        #expect(s.lock == .free)
    }

    /// The shell runs the handed-over drop outside its lock, holding the flock, then lets the
    /// entry go; a failing drop is the last job's to report.
    @Test func theShellRunsAHandedOverDropThenReleasesTheFlock() throws {
        struct DiskFailed: Error {}
        let cache = try TestCache()
        let key = CacheKey(String(repeating: "ab", count: 32))!
        let board = EntryBoard()
        board.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        var jobs: [EntryState.JobID] = []
        for p: Int64 in [0, 3_000_000] {
            let step = board.step(Self.at(p)) { start in
                guard board.takeLock(for: start, { (try? cache.store.tryLockWriter(key: key)) ?? nil }) else { return .none }
                return board.admit(start, room: nil, file: Self.f1, stop: {}).0.map { .started($0.job) } ?? .none
            }
            guard case .asked(let job?) = step else { throw Failure("no job: \(step)") }
            jobs.append(job)
        }
        let lock = board.jobLock()
        let ran = Atomic<Int>(0)
        let store = cache.store
        let heldWhileRunning = Atomic<Bool>(false)
        let now = try lock.dropAlone {
            ran.add(1, ordering: .relaxed)
            heldWhileRunning.store(((try? store.tryLockWriter(key: key)) ?? nil) == nil, ordering: .relaxed)
            throw DiskFailed()
        }
        #expect(!now)
        board.writerEnded(jobs[0], error: nil)
        #expect(board.jobLeft() == nil)
        #expect(ran.load(ordering: .relaxed) == 0)
        board.writerEnded(jobs[1], error: nil)
        #expect(board.jobLeft() is DiskFailed)
        #expect(ran.load(ordering: .relaxed) == 1)
        let held = heldWhileRunning.load(ordering: .relaxed)
        #expect(held)
        let again = try #require(try store.tryLockWriter(key: key))
        again.release()
    }

    // MARK: An operation alone (start over, drop, MPD kept whole)

    /// An operation outside any job takes the lock only when it is free; while it runs, a reader
    /// needing a job waits (no job starts under it), and once it ends the job starts.
    @Test func anOperationAloneTakesOnlyAFreeLockAndHoldsJobStartsUntilItEnds() throws {
        var (busy, _) = try Self.withJob()
        let underJob = busy.beginAlone()
        #expect(!underJob, "an operation alone ran under this process's own job")
        #expect(busy.lock == .held(jobs: 1))

        var s = EntryState()
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        let g = s.generation
        let began = s.beginAlone()
        #expect(began)
        #expect(s.lock == .alone && s.generation > g)
        let second = s.beginAlone()
        #expect(!second, "two operations alone at once")
        #expect(s.step(Self.at(0)) == .wait)
        #expect(s.starting == nil)
        #expect(!s.isIdle)
        s.endAlone()
        #expect(s.lock == .free)
        guard case .startJob(let start) = s.step(Self.at(0)) else { throw Failure("no job start after the operation ended") }
        #expect(start.takesLock)
    }

    @Test func anOperationAloneWaitsForNoStartAndNotWhileClosing() throws {
        var s = EntryState()
        s.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        guard case .startJob = s.step(Self.at(0)) else { throw Failure("expected a job start") }
        let duringStart = s.beginAlone()
        #expect(!duringStart, "an operation alone began while a start took the lock")
        var c = EntryState()
        _ = c.close()
        let whileClosing = c.beginAlone()
        #expect(!whileClosing)
    }

    /// The shell: while an operation alone holds the entry (its flock taken), another reader of
    /// the process that needs a job waits, and starts its job once the operation is over; the
    /// flock is free again after.
    @Test func theShellHoldsJobStartsWhileAnOperationAloneRuns() throws {
        let cache = try TestCache()
        let key = CacheKey(String(repeating: "cd", count: 32))!
        let store = cache.store
        let board = EntryBoard()
        board.readerArrived(holding: Self.f1, ownHead: RangeSet(), version: Self.v1)
        let inside = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let ran = Atomic<Bool>(false)
        Thread.detachNewThread {
            let r = board.alone(take: { (try? store.tryLockWriter(key: key)) ?? nil }) { () -> Bool in
                inside.signal()
                _ = go.wait(timeout: .now() + 30)
                return true
            }
            ran.store(r == true, ordering: .relaxed)
            done.signal()
        }
        #expect(inside.wait(timeout: .now() + 30) == .success)
        // Another process could not take the entry meanwhile; this process's reader waits.
        #expect(((try? store.tryLockWriter(key: key)) ?? nil) == nil)
        let starts = Atomic<Int>(0)
        let step = board.step(Self.at(0)) { _ in
            starts.add(1, ordering: .relaxed)
            return .none
        }
        guard case .waited = step else { throw Failure("a reader needing a job did not wait: \(step)") }
        let startsMeanwhile = starts.load(ordering: .relaxed)
        #expect(startsMeanwhile == 0)
        go.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        let didRun = ran.load(ordering: .relaxed)
        #expect(didRun)
        let after = board.step(Self.at(0)) { start in
            guard board.takeLock(for: start, { (try? store.tryLockWriter(key: key)) ?? nil }) else { return .none }
            return board.admit(start, room: nil, file: Self.f1, stop: {}).0.map { .started($0.job) } ?? .none
        }
        guard case .asked(let job?) = after else { throw Failure("no job after the operation: \(after)") }
        board.writerEnded(job, error: nil)
        #expect(board.jobLeft() == nil)
        let again = try #require(try store.tryLockWriter(key: key))
        again.release()
    }

    // MARK: The model test

    /// Random events against the machine, checked against an independent model of what each
    /// file (each incarnation of an inode number) really holds.
    @Test func randomEventSequencesKeepEveryInvariant() throws {
        let seed = ProcessInfo.processInfo.environment["VCACHE_ENTRY_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("EntryStateTests model: seed \(seed) (rerun: VCACHE_ENTRY_SEED=\(seed))")
        var steps = 0
        for run in 0..<60 {
            var model = Model(seed: seed &+ UInt64(run) &* 0x9E37_79B9)
            for _ in 0..<300 {
                try model.randomEvent()
                try model.checkInvariants()
                steps += 1
            }
            try model.windDown()
            try model.checkInvariants()
            #expect(model.state.isIdle, "seed \(seed) run \(run): not idle at the end: \(model.state)")
        }
        #expect(steps == 18_000)
    }
}

/// An independent model of one entry: real file incarnations and their bytes, readers, jobs.
struct Model {
    typealias Random = SeededRandom

    static let length: Int64 = 4 << 20
    static let ids = [FileID(device: 1, inode: 1), FileID(device: 1, inode: 2), FileID(device: 1, inode: 3)]
    static let versions = [Validators(length: length, etag: "\"a\"", lastModified: nil), Validators(length: length, etag: "\"b\"", lastModified: nil)]

    /// One incarnation of an inode number: the bytes of each version really in it.
    struct Incarnation { var bytes: [Int: RangeSet] = [:] }

    struct Reader {
        var file: FileID?
        var incarnation: Int
        var version: Int
        var claims: RangeSet
        var position: Int64
        var end: Int64
        var started: [EntryState.JobID] = []
        var asked = 0
        var inFlight: ByteRange?
    }

    struct Job {
        var file: FileID?
        var incarnation: Int
        var version: Int
        var dropped = false
        var stopRequested = false
        var ended = false
        var leftLock = false
        var written = RangeSet()
        var givingBack: RangeSet?
    }

    var rng: Random
    var state = EntryState()
    var readers: [Int: Reader] = [:]
    var jobs: [EntryState.JobID: Job] = [:]
    var nextReader = 0
    /// The current incarnation of each inode number, and its bytes.
    var incarnations: [FileID: [Incarnation]] = [:]
    var releasing = false

    init(seed: UInt64) { rng = Random(state: seed) }

    func holders(_ f: FileID) -> Int {
        readers.values.filter { $0.file == f }.count + jobs.values.filter { !$0.dropped && !$0.ended && $0.file == f }.count
    }

    func current(_ f: FileID) -> Int { (incarnations[f]?.count ?? 1) - 1 }

    /// A file nobody holds may be freed and its number given out again: a new incarnation.
    mutating func take(_ f: FileID) -> Int {
        if holders(f) == 0 || incarnations[f] == nil { incarnations[f, default: []].append(Incarnation()) }
        return current(f)
    }

    mutating func write(_ f: FileID, _ inc: Int, _ r: ByteRange, version: Int) {
        for v in 0..<2 { incarnations[f]![inc].bytes[v, default: RangeSet()].remove(r) }
        incarnations[f]![inc].bytes[version, default: RangeSet()].insert(r)
    }

    var trail: [String] = []

    mutating func randomEvent() throws {
        let e = rng.below(13)
        trail.append("\(e):\(state.lock)")
        if trail.count > 30 { trail.removeFirst() }
        switch e {
        case 0, 1: arrive()
        case 2, 3, 4: try stepReader()
        case 5, 6: writeJob()
        case 7: finishRead()
        case 8: try leave()
        case 9: try endJob()
        case 10: dropOrRetry()
        case 11: alone()
        default: giveBack()
        }
    }

    mutating func arrive() {
        guard readers.count < 6 else { return }
        let file: FileID? = rng.chance(15) ? nil : Self.ids[rng.below(3)]
        let inc = file.map { take($0) } ?? 0
        let version = rng.below(2)
        // Its claims are true of its file: they are written into the incarnation it holds.
        // (Claims come from the catalog: taken as true of the file, checked apart from writes.)
        var claims = RangeSet()
        if file != nil, rng.chance(50) {
            let a = Int64(rng.below(4)) << 20
            claims.insert(ByteRange(a, a + Int64(rng.below(1 << 20)) + 1))
        }
        let start = Int64(rng.below(Int(Self.length) - 1))
        readers[nextReader] = Reader(file: file, incarnation: inc, version: version, claims: claims, position: start,
                                     end: min(Self.length, start + Int64(rng.below(2 << 20)) + 1))
        nextReader += 1
        state.readerArrived(holding: file, ownHead: RangeSet(), version: Self.versions[version])
    }

    mutating func stepReader() throws {
        guard let (id, r) = readers.filter({ $0.value.inFlight == nil && $0.value.position < $0.value.end }).randomElement(using: &rng) else { return }
        let at = EntryState.ReaderAt(position: r.position, end: r.end, claims: r.claims, file: r.file, promised: Self.versions[r.version],
                                     hasFile: r.file != nil, refreshed: rng.chance(70), mayStore: true, preparing: rng.chance(20),
                                     jobsAsked: r.asked, started: r.started)
        let step = state.step(at)
        trail.append("step \(step) -> \(state.lock)")
        switch step {
        case .read(let upTo, let fromWrites):
            // The invariant: every byte offered is really in the file the reader holds, of its version.
            let span = ByteRange(r.position, upTo)
            guard let f = r.file, f == at.file else { throw Violation("read offered without a file") }
            var truth = incarnations[f]![r.incarnation].bytes[r.version] ?? RangeSet()
            truth.formUnion(r.claims)
            guard truth.contains(span) else {
                throw Violation("reader \(id) offered \(span) of \(f) (incarnation \(r.incarnation)), which holds \(truth)")
            }
            if fromWrites { readers[id]!.inFlight = span } else { readers[id]!.position = upTo }
        case .startJob(let start):
            readers[id]!.asked += 1
            if start.takesLock { state.lockTaken(rng.chance(85)) }
            guard state.starting == start else { return }
            if rng.chance(10) {
                if case .release = state.abandon(start) { releaseNow() }
                return
            }
            let file = r.file ?? Self.ids[rng.below(3)]
            if r.file == nil {
                // The reader adopts a file created for the job.
                readers[id]!.file = file
                readers[id]!.incarnation = take(file)
                state.adopt(file)
            }
            let room: Int64? = rng.chance(30) ? Int64(rng.below(2 << 20)) : nil
            let (admitted, _, release) = state.admit(start, room: room, file: file)
            if case .release = release { releaseNow() }
            if let a = admitted {
                readers[id]!.started.append(a.job)
                jobs[a.job] = Job(file: file, incarnation: readers[id]!.incarnation, version: r.version)
            }
        case .closing, .noJob, .stream, .failedHere, .jobInTrouble:
            readers[id]!.position = r.end
        case .refresh, .wait:
            break
        }
    }

    /// An operation alone (start over, drop, MPD kept whole) begins, or the one running ends.
    mutating func alone() {
        if state.lock == .alone {
            state.endAlone()
        } else if state.beginAlone() {
            guard jobs.values.allSatisfy(\.leftLock), state.starting == nil else {
                Issue.record("an operation alone began while a job or start holds the lock")
                return
            }
        }
    }

    mutating func finishRead() {
        guard let (id, r) = readers.first(where: { $0.value.inFlight != nil }), let span = r.inFlight else { return }
        readers[id]!.inFlight = nil
        readers[id]!.position = span.upperBound
        state.doneReadingWrites()
        for (j, job) in jobs where job.givingBack != nil { completeGiveBack(j) }
    }

    mutating func writeJob() {
        // (A job gives bytes back as it finishes: it writes no more, and drops nothing, after.)
        guard let (id, job) = jobs.filter({ !$0.value.ended && $0.value.givingBack == nil }).randomElement(using: &rng), let limit = state.limit(of: id) else { return }
        let position = state.jobs[id].map(\.position) ?? limit
        guard position < limit else { return }
        let r = ByteRange(position, min(limit, position + Int64(rng.below(256 << 10)) + 1))
        if job.dropped {
            // It writes another version into a new file no reader holds.
            let other = FileID(device: 2, inode: UInt64(rng.below(1000)))
            state.wrote(r, in: other, by: id, version: Self.versions[1 - job.version])
            return
        }
        guard let f = job.file else { return }
        write(f, job.incarnation, r, version: job.version)
        jobs[id]!.written.insert(r)
        state.wrote(r, in: f, by: id, version: Self.versions[job.version])
    }

    mutating func dropOrRetry() {
        guard let (id, job) = jobs.filter({ !$0.value.ended && $0.value.givingBack == nil }).randomElement(using: &rng) else { return }
        switch rng.below(3) {
        case 0:
            state.retrying(id, reason: "origin answered 503")
        case 1 where !job.dropped:
            state.dropping(id)
            jobs[id]!.dropped = true
        default:
            if state.dropAlone() { state.endExclusive() }
        }
    }

    mutating func giveBack() {
        guard let (id, job) = jobs.filter({ !$0.value.ended && !$0.value.dropped && $0.value.givingBack == nil && !$0.value.written.isEmpty }).randomElement(using: &rng),
              let f = job.file else { return }
        let back = job.written
        jobs[id]!.givingBack = back
        if state.giveBack(back, in: f) == .punch { completeGiveBack(id) }
    }

    mutating func completeGiveBack(_ id: EntryState.JobID) {
        guard let back = jobs[id]?.givingBack, let f = jobs[id]?.file, state.giveBackWaited() == .punch else { return }
        // No read of those bytes may be in flight when they are punched.
        for r in readers.values where r.file == f && r.incarnation == jobs[id]!.incarnation {
            if let span = r.inFlight, back.ranges.contains(where: { $0.lowerBound < span.upperBound && span.lowerBound < $0.upperBound }) {
                Issue.record("bytes punched under a read in flight")
            }
        }
        // The shell punches only what no other job writes (`punchable`).
        for r in state.punchable(back, in: f, by: id).ranges {
            for v in 0..<2 { incarnations[f]![jobs[id]!.incarnation].bytes[v]?.remove(r) }
        }
        jobs[id]!.givingBack = nil
        jobs[id]!.written = RangeSet()
    }

    mutating func endJob() throws {
        guard let (id, job) = jobs.filter({ !$0.value.ended && $0.value.givingBack == nil }).randomElement(using: &rng) else { return }
        let errors: [PrefetchError?] = [nil, .interrupted, .http(status: 404, reason: "Not Found"), .deadline]
        state.ended(id, error: errors[rng.below(errors.count)])
        jobs[id]!.ended = true
        _ = job
        if case .release = state.leaveLock() { releaseNow() }
        jobs[id]!.leftLock = true
    }

    mutating func releaseNow() {
        guard state.lock == .releasing else { return }
        state.released()
    }

    mutating func leave() throws {
        guard let (id, r) = readers.filter({ $0.value.inFlight == nil }).randomElement(using: &rng) else { return }
        let leaving = state.readerLeft(holding: r.file, claims: r.claims, promised: Self.versions[r.version], started: r.started)
        readers[id] = nil
        for j in leaving.stop { jobs[j]?.stopRequested = true }
        for j in state.orphansDue(leaving) { jobs[j]?.stopRequested = true }
    }

    /// Every read finishes, every job ends and leaves, every reader leaves: nothing is lost.
    mutating func windDown() throws {
        if state.lock == .alone { state.endAlone() }
        let stops = state.close()
        for j in stops where jobs[j] == nil || jobs[j]!.ended { throw Violation("stop of job \(j), which is not running") }
        for (id, r) in readers where r.inFlight != nil {
            readers[id]!.inFlight = nil
            state.doneReadingWrites()
        }
        for (j, job) in jobs where job.givingBack != nil { completeGiveBack(j) }
        for (j, job) in jobs where !job.ended {
            state.ended(j, error: .interrupted)
            jobs[j]!.ended = true
            if case .release = state.leaveLock() { releaseNow() }
            jobs[j]!.leftLock = true
        }
        for id in Array(readers.keys) {
            let r = readers[id]!
            _ = state.readerLeft(holding: r.file, claims: r.claims, promised: Self.versions[r.version], started: r.started)
            readers[id] = nil
        }
    }

    func checkInvariants() throws {
        let inFlight = readers.values.filter { $0.inFlight != nil }.count
        guard state.readingWrites == inFlight else { throw Violation("readingWrites \(state.readingWrites), reads in flight \(inFlight)") }
        for (f, record) in state.files {
            guard record.holders == holders(f) else { throw Violation("\(f): \(record.holders) holders recorded, \(holders(f)) real") }
            // What the machine believes written into a file is really there, in its current incarnation.
            if let w = record.writes, let v = Self.versions.firstIndex(of: w.version) {
                let truth = incarnations[f]![current(f)].bytes[v] ?? RangeSet()
                guard truth.contains(w.ranges) else { throw Violation("\(f): believed \(w.ranges) of version \(v), holds \(truth)") }
            }
        }
        for f in Self.ids where holders(f) > 0 && state.files[f] == nil { throw Violation("\(f) held but not recorded") }
        let inLock = jobs.values.filter { !$0.leftLock }.count + (state.starting.map { _ in 1 } ?? 0)
        switch state.lock {
        case .held(let n), .dropping(let n), .dropPending(let n):
            guard n == inLock else { throw Violation("lock counts \(n) jobs, \(inLock) hold it") }
        case .free, .releasing, .alone:
            guard inLock == 0 else { throw Violation("lock \(state.lock) with \(inLock) jobs in it") }
        case .taking:
            guard state.starting != nil else { throw Violation("taking the lock with no start") }
        }
        guard state.readers == readers.count else { throw Violation("readers \(state.readers), real \(readers.count)") }
    }

    func Violation(_ d: String) -> ViolationError { ViolationError(description: d + "; jobs: \(jobs) state jobs \(state.jobs); events: " + trail.joined(separator: " ")) }
    static func Violation(_ d: String) -> ViolationError { ViolationError(description: d) }

    struct ViolationError: Error, CustomStringConvertible {
        let description: String
    }
}

extension Dictionary {
    func randomElement(using rng: inout Model.Random) -> (key: Key, value: Value)? {
        guard !isEmpty else { return nil }
        let sorted = self.sorted { "\($0.key)" < "\($1.key)" }
        return sorted[rng.below(sorted.count)]
    }
}
