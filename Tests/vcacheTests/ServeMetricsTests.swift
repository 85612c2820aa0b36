import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// Issue 23, "what an operator needs to see": each video response says what the cache held
/// (`X-Cache`), and `/metrics` (Prometheus), `/status` (JSON) and `/healthz` report what serve did,
/// the counters moving by exactly what the test sent.
@Suite struct ServeMetricsTests {
    let dir = TempDirectory("vcache-metrics")
    var cache: String { dir.file("cache") }

    /// curl: (status, headers, body).
    func curl(_ args: [String]) throws -> (status: Int, headers: [String: String], body: Data) {
        try Curl.fetch(args, in: dir)
    }

    /// `name{labels} value` lines of the text format, by name with labels.
    static func samples(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let v = Double(parts[1]) { out[String(parts[0])] = v }
        }
        return out
    }

    @Test
    func xCacheAndTheCountersSayWhatCameFromTheCache() throws {
        let origin = try TestOrigin()
        let a = TestBytes.make(1 << 20, seed: 241), b = TestBytes.make(768 << 10, seed: 242)
        origin.setResource("/a.mp4", .init(body: a, etag: "\"a\""))
        origin.setResource("/b.mp4", .init(body: b, etag: "\"b\""))
        // b's first 256 KiB are warm; a is cold.
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/b.mp4"), "--bytes", "256K"], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let miss = try curl([serve.url(origin.url("/a.mp4"))])
        #expect(miss.status == 200 && miss.headers["x-cache"] == "MISS" && TestBytes.sha256(miss.body) == TestBytes.sha256(a))
        let hit = try curl([serve.url(origin.url("/a.mp4"))])
        #expect(hit.headers["x-cache"] == "HIT" && hit.body == a)
        let range = try curl(["-r", "100-199", serve.url(origin.url("/a.mp4"))])
        #expect(range.status == 206 && range.headers["x-cache"] == "HIT")
        let partial = try curl([serve.url(origin.url("/b.mp4"))])
        #expect(partial.headers["x-cache"] == "PARTIAL" && partial.body == b)

        // A response is counted when serve sees it end, and b's storing job completes b after its
        // response went out: scraped until both have happened (a real condition, not a pause).
        var metrics = try curl([serve.base + "/metrics"])
        var m = Self.samples(String(decoding: metrics.body, as: UTF8.self))
        let deadline = Date().addingTimeInterval(60)
        while (m["vcache_requests_total{code=\"200\"}"] != 3 || m["vcache_cache_entries{state=\"complete\"}"] != 2) && Date() < deadline {
            metrics = try curl([serve.base + "/metrics"])
            m = Self.samples(String(decoding: metrics.body, as: UTF8.self))
        }
        #expect(metrics.status == 200 && metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        #expect(m["vcache_responses_total{cache=\"miss\"}"] == 1)
        #expect(m["vcache_responses_total{cache=\"hit\"}"] == 2)
        #expect(m["vcache_responses_total{cache=\"partial\"}"] == 1)
        #expect(m["vcache_requests_total{code=\"200\"}"] == 3 && m["vcache_requests_total{code=\"206\"}"] == 1)
        // From the cache: the whole of a once, 100 bytes of it, b's warm head.
        #expect(m["vcache_sent_bytes_total{source=\"cache\"}"] == Double((1 << 20) + 100 + (256 << 10)))
        #expect(m["vcache_sent_bytes_total{source=\"origin\"}"] == Double((1 << 20) + (512 << 10)))
        #expect(m["vcache_cache_entries{state=\"complete\"}"] == 2)
        #expect((m["vcache_cache_size_bytes"] ?? 0) > Double((1 << 20) + (768 << 10)))
        #expect(m["vcache_storing_jobs"] != nil && m["vcache_open_connections"] != nil && m["vcache_disk_free_bytes"] != nil)

        // A scrape is not a request: scraping again changes no count.
        let again = Self.samples(String(decoding: try curl([serve.base + "/metrics"]).body, as: UTF8.self))
        #expect(again["vcache_requests_total{code=\"200\"}"] == 3)
        let status = try curl([serve.base + "/status"])
        let json = try #require(try JSONSerialization.jsonObject(with: status.body) as? [String: Any])
        #expect(json["from_cache_bytes"] as? Int == (1 << 20) + 100 + (256 << 10))
        #expect((json["responses_by_cache"] as? [String: Int])?["hit"] == 2)
        let health = try curl([serve.base + "/healthz"])
        #expect(health.status == 200 && health.body == Data("ok\n".utf8))
        // A page that rebinds its own name to 127.0.0.1 still cannot read them.
        #expect(try curl(["-H", "Host: evil.example:\(serve.port)", serve.base + "/metrics"]).status == 403)
        // /healthz too (issue 32: the docs said it answered anyone): any client address, but only
        // under a Host that names the proxy, so a rebound page cannot even learn serve runs here.
        #expect(try curl(["-H", "Host: evil.example:\(serve.port)", serve.base + "/healthz"]).status == 403)
        #expect(try curl(["-H", "Host: localhost:\(serve.port)", serve.base + "/healthz"]).status == 200)
        serve.stop()
    }

    /// A player that reads 1 MiB of a cached 24 MiB file sent by sendfile and leaves: the bytes
    /// counted from the cache are about what it got (TCP's acknowledged count), not none and
    /// not the whole file.
    @Test
    func aFileResponseAbandonedMidwayCountsWhatTheClientGot() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(24 << 20, seed: 243)
        origin.setResource("/big.mp4", .init(body: body, etag: "\"big\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/big.mp4")], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir)
        let fd = Sockets.connectLoopback(serve.port)
        try #require(fd >= 0)
        var small: Int32 = 16 << 10
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let path = "/v/" + ProxyURLCoding.encode(origin.url("/big.mp4")) + "/big.mp4"
        Sockets.say(fd, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(serve.port)\r\n\r\n")
        var received = 0
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        while received < 1 << 20 {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            received += n
        }
        close(fd)
        // The response is counted when serve sees it end.
        var m: [String: Double] = [:]
        let deadline = Date().addingTimeInterval(20)
        repeat {
            m = Self.samples(String(decoding: try curl([serve.base + "/metrics"]).body, as: UTF8.self))
        } while m["vcache_requests_total{code=\"200\"}"] == nil && Date() < deadline
        let fromCache = m["vcache_sent_bytes_total{source=\"cache\"}"] ?? 0
        #expect(fromCache >= Double(received) - 1024 && fromCache < Double(8 << 20), "counted \(fromCache) of the \(received) bytes read")
        serve.stop()
    }

    /// An origin URL that leads back to serve (its own address and port, which `--allow-host
    /// 127.0.0.1` with no port allows, or a redirect there) is a loop: serve names itself in the
    /// Via header of every origin request and answers a request carrying that name 508 at once.
    /// A LAN client cannot read `/metrics` through it, and a URL nested ten deep costs one hop,
    /// not ten connections held.
    @Test
    func anOriginURLLeadingBackToServeIsALoopAnswered508() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(100_000, seed: 9)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--allow-host", "127.0.0.1"])
        defer { serve.stop() }
        let metrics = try curl([serve.url("http://127.0.0.1:\(serve.port)/metrics")])
        #expect(metrics.status == 508)
        #expect(!String(decoding: metrics.body, as: UTF8.self).contains("vcache_"), "the metrics went out through the loop")
        var nested = "http://127.0.0.1:\(serve.port)/status"
        for _ in 0..<10 { nested = serve.url(nested) }
        let deep = try curl([serve.url(nested)])
        #expect(deep.status == 508)
        // Each request to serve itself is refused at its first hop (two asks of it at most: the
        // probe and the span), never passed on deeper. (A refusal is logged before it is sent.)
        let loops = serve.log.filter { $0.contains("leads back to the proxy (a loop)") }
        #expect(loops.count >= 2 && loops.count <= 4, "\(serve.log)")
        // A video is served as ever, its origin told which proxy asked; a player's own Via (it
        // sits behind another proxy) is no loop.
        let video = try curl(["-H", "Via: 1.1 squid", serve.url(origin.url("/v.mp4"))])
        #expect(video.status == 200 && TestBytes.sha256(video.body) == TestBytes.sha256(body))
        let via = origin.headers("/v.mp4").compactMap { $0.first { $0.key.lowercased() == "via" }?.value }
        #expect(!via.isEmpty && via.allSatisfy { $0.hasPrefix("1.1 vcache-") }, "\(via)")
    }

    /// Another serve on the same machine (the operator's loopback one, no --allow-host) is an
    /// origin `--allow-host 127.0.0.1` allows: its /metrics, and through it the LAN serve's own
    /// (each serve saw the other's Via, not its own), went out to a LAN client.
    @Test
    func noServeReadsAnotherServesMetricsForItsClient() throws {
        let lan = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--allow-host", "127.0.0.1"])
        defer { lan.stop() }
        let local = try ServeProcess(cacheDir: dir.file("local"), logDir: dir)
        defer { local.stop() }
        for path in ["/metrics", "/status"] {
            let other = try curl([lan.url("http://127.0.0.1:\(local.port)\(path)")])
            #expect(other.status == 403, "\(path)")
            let own = try curl([lan.url(local.url("http://127.0.0.1:\(lan.port)\(path)"))])
            #expect(own.status == 403, "\(path)")
            for body in [other.body, own.body] {
                let text = String(decoding: body, as: UTF8.self)
                #expect(!text.contains("vcache_") && !text.contains("requests_by_status"), "\(path) went out through a serve: \(text)")
            }
            // This machine's own clients still read them.
            #expect(try curl(["http://127.0.0.1:\(local.port)\(path)"]).status == 200)
        }
    }

    /// A proxy URL given to `vcache url` again (a script wrapping twice) made a URL of serve
    /// itself, which only ever answers 508.
    @Test func urlOfServesOwnAddressIsAUsageError() throws {
        let origin = "http://127.0.0.2:8000/v.mp4"
        let once = try VCacheBinary.run(["url", origin, "--port", "8089"], cacheDir: cache)
        #expect(once.status == 0)
        let proxied = once.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let twice = try VCacheBinary.run(["url", proxied, "--port", "8089"], cacheDir: cache)
        #expect(twice.status == 2 && twice.stdout.isEmpty)
        #expect(twice.stderr.contains("is serve's own address, which a player would get 508 (a loop) from; it is already the proxy URL of \(origin)"),
                "\(twice.stderr)")
        for own in ["http://localhost:8089/metrics", "http://[::1]:8089/x.mp4", "http://192.168.1.20:9000/v.mp4"] {
            let args = own.contains("9000") ? ["url", own, "--listen", "192.168.1.20:9000"] : ["url", own, "--port", "8089"]
            let r = try VCacheBinary.run(args, cacheDir: cache)
            #expect(r.status == 2 && r.stderr.contains("give the video's origin URL"), "\(own): \(r.stderr)")
        }
        // Another serve (another port) is an origin like any other.
        #expect(try VCacheBinary.run(["url", "http://127.0.0.1:8090/v.mp4", "--port", "8089"], cacheDir: cache).status == 0)
    }

    @Test func metricsFromTakesOneAddress() throws {
        for bad in ["10.0.0.0/8", "300.1.1.1", "garbage", "box.local"] {
            let r = try VCacheBinary.run(["serve", "--port", "0", "--metrics-from", bad], cacheDir: dir.file("mf"))
            #expect(r.status == 2 && r.stderr.contains("for --metrics-from"), "\(bad): \(r.stderr)")
        }
    }

    @Test func onlyLoopbackAndNamedAddressesReadTheMetrics() throws {
        for (client, allowed) in [("127.0.0.1", true), ("127.1.2.3", true), ("::1", true), ("::ffff:127.0.0.1", true),
                                  ("192.168.1.20", false), ("10.0.0.7", false), ("::ffff:192.168.1.20", false), ("fe80::1", false)] {
            #expect(Proxy.isLoopback(client) == allowed, "\(client)")
        }
    }

    @Test func cacheStatusIsWhatTheCacheHeldOfTheSpan() {
        #expect(CacheStatus(cached: 100, of: 100) == .hit)
        #expect(CacheStatus(cached: 0, of: 0) == .hit)  // an empty span needs nothing
        #expect(CacheStatus(cached: 1, of: 100) == .partial)
        #expect(CacheStatus(cached: 0, of: 100) == .miss)
    }

    @Test func aSummaryCountsOnlyItsPeriod() {
        let m = ServeMetrics()
        m.record(status: 200, cache: .hit, fromCache: 1000, fromOrigin: 0, originError: nil)
        let before = m.current
        m.record(status: 206, cache: .partial, fromCache: 300, fromOrigin: 700, originError: nil)
        m.record(status: 502, cache: nil, fromCache: 0, fromOrigin: 0, originError: "unreachable")
        let d = m.current.since(before)
        #expect(d.requestCount == 2 && d.requests[206] == 1 && d.requests[200] == 0)
        #expect(d.cache[.partial] == 1 && d.cache[.hit] == 0)
        #expect(d.fromCacheBytes == 300 && d.fromOriginBytes == 700 && d.byteHitRatio == 0.3)
        #expect(d.originErrors["unreachable"] == 1)
    }
}
