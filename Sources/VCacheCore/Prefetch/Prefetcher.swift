import Foundation

/// Runs prefetch jobs on one fetch loop, at most `options.concurrency` at a time (ExoPlayer's
/// `CacheWriter`, for many URLs). The core never prints: it reports through `events`, on the
/// loop's thread, and returns one result per item in input order.
public final class Prefetcher {
    public let store: CacheStore
    public let options: PrefetchOptions
    private let events: (PrefetchEvent) -> Void
    private let fetcher: Fetcher

    public init(store: CacheStore, options: PrefetchOptions, stopFlag: Fetcher.StopFlag = .init(),
                events: @escaping (PrefetchEvent) -> Void = { _ in }) {
        self.store = store
        self.options = options
        self.events = events
        self.fetcher = Fetcher(stopFlag: stopFlag)
    }

    /// Stops the run from another thread: jobs checkpoint what arrived and end as interrupted.
    public func stop(reason: Int32) { fetcher.stop(reason: reason) }

    public func run(_ items: [PrefetchItem]) -> [PrefetchResult] {
        var results = [PrefetchResult?](repeating: nil, count: items.count)
        var running: [ObjectIdentifier: (index: Int, job: PrefetchJob)] = [:]
        var next = 0

        func launch() {
            while next < items.count && running.count < max(1, options.concurrency) && !fetcher.isStopped {
                let index = next
                next += 1
                let job = PrefetchJob(item: items[index], store: store, options: options, fetcher: fetcher, emit: events) { done in
                    results[index] = done.result
                    running.removeValue(forKey: ObjectIdentifier(done))
                    // Start the next one from a timer, not from inside this job's callback.
                    self.fetcher.after(0) { launch() }
                }
                running[ObjectIdentifier(job)] = (index, job)
                job.start()
            }
        }

        launch()
        fetcher.run {
            for (_, r) in running { r.job.tick() }
        }
        // Stopped: every job still running checkpoints and reports; the rest never started.
        for (_, r) in running.sorted(by: { $0.value.index < $1.value.index }) {
            r.job.abort(.interrupted)
        }
        for i in results.indices where results[i] == nil {
            let key = URL(string: items[i].url).map { options.keyRules.key(for: $0) } ?? ""
            results[i] = PrefetchResult(url: items[i].url, key: key, length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                        requestedBytes: nil, complete: false, elapsed: 0, error: .interrupted)
        }
        return results.map { $0! }
    }
}
