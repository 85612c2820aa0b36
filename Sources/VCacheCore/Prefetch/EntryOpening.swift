import Dispatch

/// A prefetch job taking its entry off the fetch loop: the writer lock (the entry's folder made
/// when missing), `data` opened (created when missing) and the entry read from the catalog under
/// that lock (`PrefetchJob.open`). On the loop these cost a new entry's folder and file (ext4's
/// inode allocator) and a wait for the catalog's connection behind another entry's commit, while
/// every other transfer stood still (Docs/performance.md, "500 heads").
///
/// One opening hands its outcome to the loop, or cleans up itself: the job may end before the
/// outcome arrives (a stop, whose loop never delivers it), and a lock or a new folder must never
/// be left behind. Whoever comes second (the worker storing, or the job abandoning) cleans up.
final class EntryOpening: Sendable {
    /// The entry, taken: its lock, its `data`, what the catalog holds of it (nil: no row) and
    /// the digests stored for it.
    struct Opened: Sendable {
        let lock: EntryLock
        let data: RawFile
        let found: CacheEntry?
        let stored: [DigestCheck]
        /// `data` was there before this job (see `EntryFacts.existedBefore`).
        let existedBefore: Bool
    }

    enum Outcome: Sendable {
        /// Another writer holds the entry.
        case busy
        case opened(Opened)
        /// It failed, after taking the lock (then given, to be released as any job's end does) or before.
        case failed(PrefetchError, lock: EntryLock?, existedBefore: Bool)
    }

    private enum State { case pending, abandoned, ready(Outcome), taken }
    private let state = Locked<State>(.pending)
    private let store: CacheStore
    private let key: CacheKey

    /// Entries are taken on a queue of their own, several at a time (each may wait for a lock
    /// or for the catalog).
    static let queue = DispatchQueue(label: "vcache.open", attributes: .concurrent)

    init(store: CacheStore, key: CacheKey) {
        self.store = store
        self.key = key
    }

    /// Off the loop: takes the entry, then hands the outcome over (false: the job is gone; then
    /// everything taken is given back here).
    func run(replacingUnclaimed: Bool) {
        let outcome = Self.take(store: store, key: key, replacingUnclaimed: replacingUnclaimed)
        let keep = state.withLock { s -> Bool in
            guard case .pending = s else { return false }
            s = .ready(outcome)
            return true
        }
        if !keep { giveBack(outcome) }
    }

    /// On the loop: the outcome, once (nil: not there yet, already taken, or abandoned).
    func take() -> Outcome? {
        state.withLock { s -> Outcome? in
            guard case .ready(let o) = s else { return nil }
            s = .taken
            return o
        }
    }

    /// On the loop, the job ending before it took the outcome: what was taken is given back now,
    /// or by the worker when it is done.
    func abandon() {
        let ready = state.withLock { s -> Outcome? in
            switch s {
            case .pending:
                s = .abandoned
                return nil
            case .ready(let o):
                s = .taken
                return o
            case .abandoned, .taken:
                return nil
            }
        }
        if let ready { giveBack(ready) }
    }

    /// As a job's end leaves an entry it did not write to: `data` closed, a folder this job made
    /// (no `data` and no row before it) removed, the lock released.
    private func giveBack(_ outcome: Outcome) {
        switch outcome {
        case .busy:
            break
        case .opened(let o):
            o.data.close()
            if !o.existedBefore && o.found == nil { store.removeFiles(key: key) }
            o.lock.release()
        case .failed(_, let lock?, let existedBefore):
            if !existedBefore { store.removeFiles(key: key) }
            lock.release()
        case .failed:
            break
        }
    }

    /// The lock, `data` and the catalog's entry, as the job had taken them on the loop.
    /// `replacingUnclaimed`: bytes in `data` that no claim vouches for get a new file.
    private static func take(store: CacheStore, key: CacheKey, replacingUnclaimed: Bool) -> Outcome {
        let lock: EntryLock
        do {
            guard let taken = try store.tryLockWriter(key: key) else { return .busy }
            lock = taken
        } catch {
            return .failed(PrefetchError(error), lock: nil, existedBefore: true)
        }
        // Known before anything can fail (see `EntryFacts.existedBefore`).
        let existedBefore = FileSystem.exists(store.dataPath(key))
        do {
            let (opened, found) = try PrefetchJob.open(store: store, key: key, replacingUnclaimed: replacingUnclaimed)
            let stored: [DigestCheck]
            do {
                stored = found == nil ? [] : try store.catalog.expectedDigests(key: key)
            } catch {
                opened.close()
                throw error
            }
            return .opened(Opened(lock: lock, data: opened, found: found, stored: stored, existedBefore: existedBefore || found != nil))
        } catch {
            return .failed(PrefetchError(error), lock: lock, existedBefore: existedBefore)
        }
    }
}
