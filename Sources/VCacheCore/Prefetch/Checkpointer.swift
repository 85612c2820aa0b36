import Dispatch
import Foundation
import Synchronization

/// Makes written bytes durable off the fetch loop: fsync `data`, then commit the ranges in one
/// catalog transaction (invariant 1: the catalog never claims a byte that is not durably in `data`).
/// One serial queue per entry, so commits land in order; the fetch loop keeps downloading meanwhile.
final class Checkpointer: Sendable {
    private let queue: DispatchQueue
    private let catalog: Catalog
    private let key: String
    private let data: RawFile
    private struct State {
        var committed: RangeSet
        var inFlight = RangeSet()
        var error: PrefetchError?
    }
    private let state: Mutex<State>

    init(catalog: Catalog, key: String, data: RawFile, committed: RangeSet) {
        self.catalog = catalog
        self.key = key
        self.data = data
        self.queue = DispatchQueue(label: "vcache.checkpoint.\(key.prefix(8))")
        self.state = Mutex(State(committed: committed))
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

    var firstError: PrefetchError? { state.withLock { $0.error } }

    /// Hands `batch` (bytes already pwritten) to the queue.
    func submit(_ batch: RangeSet) {
        guard !batch.isEmpty else { return }
        state.withLock { $0.inFlight.formUnion(batch) }
        queue.async { [self] in
            do {
                try data.sync()
                let disk = (try? data.status()).map(FileSystem.allocatedBytes) ?? 0
                let all = try catalog.commitRanges(key: key, adding: batch, diskBytes: disk)
                state.withLock { s in
                    s.committed = all
                    for r in batch.ranges { s.inFlight.remove(r) }
                }
            } catch let e as SystemError {
                state.withLock { s in
                    for r in batch.ranges { s.inFlight.remove(r) }
                    if s.error == nil { s.error = .disk(e) }
                }
            } catch {
                state.withLock { s in
                    for r in batch.ranges { s.inFlight.remove(r) }
                    if s.error == nil { s.error = .catalog("\(error)") }
                }
            }
        }
    }

    /// Waits for every submitted batch to be committed.
    func drain() { queue.sync {} }

    /// After the video changed: forget what was committed (the catalog rows were dropped).
    func reset() {
        drain()
        state.withLock { $0.committed = RangeSet() }
    }
}
