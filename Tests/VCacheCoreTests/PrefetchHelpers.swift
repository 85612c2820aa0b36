import Foundation
import VCacheCore
import VCacheTestSupport

/// A fresh cache in a temp dir, and a one-call prefetch that also records the events.
final class TestCache {
    let dir = TempDirectory("vcache-core")
    let store: CacheStore
    var inspector: CacheInspector { CacheInspector(store: store) }
    private(set) var events: [PrefetchEvent] = []

    init() throws { store = try CacheStore(directory: dir.file("cache")) }

    static func fastOptions() -> PrefetchOptions {
        var o = PrefetchOptions()
        o.retryDelay = 0.02
        o.request.stallTimeout = 2
        return o
    }

    @discardableResult
    func prefetch(_ url: String, _ requests: [RangeRequest] = [], options: PrefetchOptions = TestCache.fastOptions()) -> PrefetchResult {
        let p = Prefetcher(store: store, options: options) { self.events.append($0) }
        return p.run([PrefetchItem(url: url, requests: requests)])[0]
    }

    var retries: [(attempt: Int, delay: Double)] {
        events.compactMap { if case .retrying(_, let a, let d, _) = $0 { return (a, d) } else { return nil } }
    }

    var changes: Int { events.filter { if case .videoChanged = $0 { true } else { false } }.count }
}
