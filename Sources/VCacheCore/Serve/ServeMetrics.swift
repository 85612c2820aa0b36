#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// What the cache held of a response's span when it began: nginx's `$upstream_cache_status` as
/// serve's `X-Cache` header, and the hit-ratio counters.
public enum CacheStatus: String, Sendable, CaseIterable {
    /// Every byte from the cache.
    case hit = "HIT"
    /// Some bytes from the cache, the rest from the origin.
    case partial = "PARTIAL"
    /// Nothing cached: every byte from the origin.
    case miss = "MISS"

    public init(cached: Int64, of total: Int64) {
        self = cached >= total ? .hit : cached > 0 ? .partial : .miss
    }
}

/// serve's counters since it started, for `/metrics` (Prometheus text format), `/status` (JSON),
/// the periodic summary line and `vcache status`. Updated once per finished request.
public final class ServeMetrics: Sendable {
    public struct Counts: Sendable, Equatable {
        /// Responses by HTTP status.
        public var requests: [Int: Int] = [:]
        /// Video responses by what the cache held (`X-Cache`).
        public var cache: [CacheStatus: Int] = [:]
        public var fromCacheBytes: Int64 = 0
        public var fromOriginBytes: Int64 = 0
        /// Responses that failed because of the origin, by kind: `unreachable` (502), `status`
        /// (the origin's own 4xx/5xx passed on), `cut` (the response ended early).
        public var originErrors: [String: Int] = [:]

        public var requestCount: Int { requests.values.reduce(0, +) }
        /// Body bytes sent from the cache over all body bytes sent (nil before any).
        public var byteHitRatio: Double? {
            let all = fromCacheBytes + fromOriginBytes
            return all > 0 ? Double(fromCacheBytes) / Double(all) : nil
        }

        /// What happened between `earlier` and this (for the periodic summary).
        public func since(_ earlier: Counts) -> Counts {
            var d = Counts()
            for (k, v) in requests { d.requests[k] = v - (earlier.requests[k] ?? 0) }
            for (k, v) in cache { d.cache[k] = v - (earlier.cache[k] ?? 0) }
            for (k, v) in originErrors { d.originErrors[k] = v - (earlier.originErrors[k] ?? 0) }
            d.fromCacheBytes = fromCacheBytes - earlier.fromCacheBytes
            d.fromOriginBytes = fromOriginBytes - earlier.fromOriginBytes
            return d
        }
    }

    private let counts = Locked(Counts())
    public let started = Date()

    public init() {}

    public var current: Counts { counts.withLock { $0 } }

    /// One finished request. `cache` is nil for answers that are not a video's bytes.
    public func record(status: Int, cache: CacheStatus?, fromCache: Int64, fromOrigin: Int64, originError: String?) {
        counts.withLock { c in
            c.requests[status, default: 0] += 1
            if let cache { c.cache[cache, default: 0] += 1 }
            c.fromCacheBytes += fromCache
            c.fromOriginBytes += fromOrigin
            if let originError { c.originErrors[originError, default: 0] += 1 }
        }
    }

    /// The state of the box beside the counters: measured when asked (a scrape).
    public struct Gauges: Sendable {
        public var storingJobs = 0
        public var openConnections = 0
        /// Manifests whose members serve stored are not confirmed yet (`Proxy+Confirm`).
        public var unconfirmedManifests = 0
        public var cacheBytes: Int64 = 0
        public var capBytes: Int64?
        public var completeEntries = 0
        public var partialEntries = 0
        public var diskFreeBytes: Int64?

        public init() {}

        /// `entries`: the catalog's rows when the caller has read them already.
        public static func measure(_ store: CacheStore, cap: Int64?, entries known: [CacheEntry]? = nil) -> Gauges {
            var g = Gauges()
            let entries = known ?? (try? store.catalog.allEntries()) ?? []
            g.cacheBytes = Evictor(store: store).footprint().total(entries)
            g.capBytes = cap
            g.completeEntries = entries.filter(\.isComplete).count
            g.partialEntries = entries.count - g.completeEntries
            g.diskFreeBytes = FileSystem.space(store.directory)?.free
            return g
        }
    }

    /// The Prometheus text exposition format (version 0.0.4).
    public func prometheus(_ g: Gauges) -> String {
        let c = current
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in samples { out += "\(name)\(s.labels.isEmpty ? "" : "{\(s.labels)}") \(s.value)\n" }
        }
        metric("vcache_requests_total", "counter", "Responses sent, by HTTP status.",
               c.requests.keys.sorted().map { ("code=\"\($0)\"", "\(c.requests[$0]!)") })
        metric("vcache_responses_total", "counter", "Video responses by what the cache held when they began (X-Cache).",
               CacheStatus.allCases.map { ("cache=\"\($0.rawValue.lowercased())\"", "\(c.cache[$0] ?? 0)") })
        metric("vcache_sent_bytes_total", "counter", "Body bytes sent to players, by where they came from.",
               [("source=\"cache\"", "\(c.fromCacheBytes)"), ("source=\"origin\"", "\(c.fromOriginBytes)")])
        metric("vcache_origin_errors_total", "counter", "Responses that failed because of the origin, by kind.",
               ["unreachable", "status", "cut"].map { ("kind=\"\($0)\"", "\(c.originErrors[$0] ?? 0)") })
        metric("vcache_storing_jobs", "gauge", "Storing jobs running.", [("", "\(g.storingJobs)")])
        metric("vcache_open_connections", "gauge", "Player connections open.", [("", "\(g.openConnections)")])
        metric("vcache_cache_size_bytes", "gauge", "Disk the cache uses, as du counts it.", [("", "\(g.cacheBytes)")])
        if let cap = g.capBytes { metric("vcache_cache_cap_bytes", "gauge", "The size cap in force.", [("", "\(cap)")]) }
        metric("vcache_cache_entries", "gauge", "Entries in the cache, by state.",
               [("state=\"complete\"", "\(g.completeEntries)"), ("state=\"partial\"", "\(g.partialEntries)")])
        if let free = g.diskFreeBytes { metric("vcache_disk_free_bytes", "gauge", "Free space on the cache's file system.", [("", "\(free)")]) }
        metric("vcache_start_time_seconds", "gauge", "When serve started (Unix time).", [("", String(cFormat: "%.3f", started.timeIntervalSince1970))])
        return out
    }

    /// `/status`: the counters and gauges as one JSON object (what `vcache status` shows).
    public func statusJSON(_ g: Gauges) -> Data {
        let c = current
        var o: [String: Any] = [
            "requests": c.requestCount,
            "requests_by_status": Dictionary(uniqueKeysWithValues: c.requests.map { (String($0.key), $0.value) }),
            "responses_by_cache": Dictionary(uniqueKeysWithValues: CacheStatus.allCases.map { ($0.rawValue.lowercased(), c.cache[$0] ?? 0) }),
            "from_cache_bytes": c.fromCacheBytes, "from_origin_bytes": c.fromOriginBytes,
            "origin_errors": c.originErrors,
            "storing_jobs": g.storingJobs, "open_connections": g.openConnections, "manifests_unconfirmed": g.unconfirmedManifests,
            "cache_bytes": g.cacheBytes, "complete_entries": g.completeEntries, "partial_entries": g.partialEntries,
            "started": UTCTime.iso8601(started),
        ]
        if let r = c.byteHitRatio { o["byte_hit_ratio"] = r }
        if let cap = g.capBytes { o["cap_bytes"] = cap }
        if let free = g.diskFreeBytes { o["disk_free_bytes"] = free }
        return Data(JSONText.sortedObject(o).utf8)
    }
}
