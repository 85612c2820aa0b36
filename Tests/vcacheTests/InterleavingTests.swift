import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// serve under every interleaving: a seeded random schedule of real processes on one cache
/// (players reading whole videos and random ranges through `serve` with curl, `prefetch` of
/// random ranges and of overlapping lists with `-j 8`, `evict --all` and `evict --max-size`, `verify --fix`, the origin changing a
/// video's version under a strong ETag, a weak ETag and none, serve restarted), run by four
/// workers at once. Every body that arrives with 200/206 is compared with the bytes of the
/// version its headers name, and a 206 must start and end where the range asked (its
/// Content-Range, its first and last byte against the origin's); a response may be cut (a player
/// retries) but never wrong; the cache verifies clean at the end. A run must compare at least
/// `minimumBodies` bodies, and answers that are no body (a 502 while the origin changed, a serve
/// restarting) are counted apart: a run where they are half the plays or more fails, since it
/// compared too little to prove anything.
///
/// The seed is printed first; `VCACHE_STRESS_SEED=N` reruns that schedule;
/// `VCACHE_STRESS_SECONDS=S` runs for S seconds (`make stress SECONDS=600`) instead of
/// `VCACHE_STRESS_OPS` operations (default 240).
@Suite struct InterleavingTests {
    let dir = TempDirectory("vcache-interleave")
    var cache: String { dir.file("cache") }

    /// A video's versions on the origin: each has its own bytes and its own length (so a version
    /// without validators is still named by the length in the response's headers).
    final class Videos: @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        struct Version {
            var body: Data
            var etag: String?
        }
        enum Kind: String, CaseIterable { case strong, weak, none }
        private let lock = NSLock()
        private var versions: [String: [Version]] = [:]
        let origin: TestOrigin
        let kinds: [String: Kind]

        init(origin: TestOrigin) {
            self.origin = origin
            var k: [String: Kind] = [:]
            for kind in Kind.allCases { k["/\(kind.rawValue).mp4"] = kind }
            kinds = k
            for path in k.keys.sorted() { bump(path) }
        }

        var paths: [String] { kinds.keys.sorted() }

        /// Publishes a new version of `path`.
        func bump(_ path: String) {
            lock.lock()
            let n = versions[path, default: []].count
            let seed = path.utf8.reduce(UInt64(n)) { $0 &* 31 &+ UInt64($1) }
            let body = TestBytes.make((3 << 20) + n * 4099 + (path == "/weak.mp4" ? 17 : path == "/none.mp4" ? 29 : 0), seed: seed)
            let etag: String? = switch kinds[path]! {
            case .strong: "\"v\(n)\""
            case .weak: "W/\"v\(n)\""
            case .none: nil
            }
            versions[path, default: []].append(Version(body: body, etag: etag))
            lock.unlock()
            origin.setResource(path, .init(body: body, etag: etag))
        }

        /// The version a response names: by its ETag, else by its total length.
        func version(_ path: String, etag: String?, length: Int) -> Version? {
            lock.lock()
            defer { lock.unlock() }
            let all = versions[path] ?? []
            if let etag, let v = all.first(where: { $0.etag == etag }) { return v }
            return all.first { $0.etag == nil && $0.body.count == length }
        }
    }

    /// The running proxy, replaced when the schedule restarts it.
    final class Proxy: @unchecked Sendable {
        // @unchecked: `serve` is swapped under the write lock and used under the read lock.
        private let rw = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        private var serve: ServeProcess
        private let cache: String
        private let dir: TempDirectory
        /// Descriptors and threads of the running serve when it had just started, and at the end.
        private(set) var baseline: (fds: Int, threads: Int)
        private(set) var lastSeen: (fds: Int, threads: Int) = (0, 0)
        init(cache: String, dir: TempDirectory) throws {
            self.cache = cache
            self.dir = dir
            serve = try ServeProcess(cacheDir: cache, logDir: dir)
            baseline = Self.resources(serve)
            pthread_rwlock_init(rw, nil)
        }

        /// Open descriptors and threads of a serve process, from /proc.
        static func resources(_ serve: ServeProcess) -> (fds: Int, threads: Int) {
            let pid = serve.process.pid
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
            let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
            return (fds, threads)
        }

        /// What each open descriptor of a serve process is (for a leak's message).
        static func descriptors(_ serve: ServeProcess) -> String {
            let dir = "/proc/\(serve.process.pid)/fd"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            return names.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
                .map { "\($0)→\((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)) ?? "?")" }
                .joined(separator: " ")
        }

        /// Once every player has gone and every storing job has ended (serve's own counters say
        /// so): more descriptors or threads than serve had at its start is a leak. A connection
        /// counts as closed before its thread has let go of its response (a stream's fetch loop,
        /// a socket pair and a connection to the origin), so what serve holds is read until it
        /// is back within bounds, for up to 30 s: a leak never gets back.
        func leak() -> String? {
            pthread_rwlock_rdlock(rw)
            defer { pthread_rwlock_unlock(rw) }
            let deadline = Date().addingTimeInterval(60)
            var idle = false
            while !idle && Date() < deadline {
                let metrics = (try? Tool.run("/usr/bin/curl", ["-s", serve.base + "/metrics"]))?.out ?? Data()
                let text = String(decoding: metrics, as: UTF8.self)
                // The scrape itself is the one connection open.
                idle = text.contains("\nvcache_storing_jobs 0\n") && text.contains("\nvcache_open_connections 1\n")
            }
            guard idle else { return "serve never became idle (storing jobs or connections left)" }
            // Some slack: the catalog's journal files open lazily, libmicrohttpd's thread for the
            // scrape that just ended may still be leaving, and Dispatch keeps idle workers of
            // the checkpoint and digest queues for a while (a pool, not one per request: a leak
            // of one per connection or job passes any bound over a run's thousands).
            let settled = Date().addingTimeInterval(30)
            var now = Self.resources(serve)
            while now.fds > baseline.fds + 8 || now.threads > baseline.threads + 32 {
                guard Date() < settled else {
                    lastSeen = now
                    return "serve holds \(now.fds) descriptors and \(now.threads) threads, against \(baseline.fds) and \(baseline.threads) at its start: \(Self.descriptors(serve))"
                }
                usleep(20_000)  // polling /proc: no event says a thread let go
                now = Self.resources(serve)
            }
            lastSeen = now
            return nil
        }
        func use<T>(_ body: (ServeProcess) throws -> T) rethrows -> T {
            pthread_rwlock_rdlock(rw)
            defer { pthread_rwlock_unlock(rw) }
            return try body(serve)
        }
        func restart() throws {
            pthread_rwlock_wrlock(rw)
            defer { pthread_rwlock_unlock(rw) }
            _ = serve.stop()
            serve = try ServeProcess(cacheDir: cache, logDir: dir)
            baseline = Self.resources(serve)
        }
        func stop() {
            pthread_rwlock_wrlock(rw)
            _ = serve.stop()
            pthread_rwlock_unlock(rw)
        }
    }

    /// The schedule is a function of the seed.
    typealias Random = SeededRandom

    /// What the players saw: failures, bodies compared (of them, cut), and answers with no body
    /// by status (0: curl had no answer at all).
    final class Failures: @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        private let lock = NSLock()
        private(set) var lines: [String] = []
        private(set) var compared = 0
        private(set) var cut = 0
        private(set) var errors: [Int: Int] = [:]
        var errorCount: Int { lock.lock(); defer { lock.unlock() }; return errors.values.reduce(0, +) }
        var played: Int { lock.lock(); defer { lock.unlock() }; return compared + errors.values.reduce(0, +) }
        func add(_ s: String) { lock.lock(); lines.append(s); lock.unlock() }
        func compared(cut wasCut: Bool) { lock.lock(); compared += 1; if wasCut { cut += 1 }; lock.unlock() }
        func error(status: Int) { lock.lock(); errors[status, default: 0] += 1; lock.unlock() }
    }

    /// Fewest bodies a run must compare (the default 240 operations make about 130 plays).
    static let minimumBodies = 60

    /// The first and last byte a range (curl's `-r` argument; nil: the whole video) asks of a video of `total` bytes.
    static func asked(_ range: String?, total: Int) -> (first: Int, last: Int) {
        guard let range else { return (0, total - 1) }
        let parts = range.split(separator: "-", omittingEmptySubsequences: false)
        if parts[0].isEmpty { return (max(0, total - (Int(parts[1]) ?? 0)), total - 1) }
        let first = Int(parts[0]) ?? 0
        return (first, parts[1].isEmpty ? total - 1 : min(total - 1, Int(parts[1]) ?? total - 1))
    }

    @Test
    func everyBodyServedUnderARandomScheduleIsTheOriginsBytes() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["VCACHE_STRESS_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let seconds = env["VCACHE_STRESS_SECONDS"].flatMap { Double($0) }
        let ops = env["VCACHE_STRESS_OPS"].flatMap { Int($0) } ?? 240
        let tag = "seed \(seed) (rerun: VCACHE_STRESS_SEED=\(seed))"
        print("interleaving: \(tag)")

        let origin = try TestOrigin()
        let videos = Videos(origin: origin)
        for p in videos.paths { origin.throttle(p, to: 48 << 20) }  // transfers overlap the other operations
        let proxy = try Proxy(cache: cache, dir: dir)
        let failures = Failures()
        let deadline = seconds.map { Date().addingTimeInterval($0) }
        let workers = 4
        let group = DispatchGroup()
        for w in 0..<workers {
            DispatchQueue.global().async(group: group) {
                var rng = Random(state: seed &+ UInt64(w) &* 0x1234_5678_9ABC)
                var i = 0
                while deadline.map({ Date() < $0 }) ?? (i < ops / workers) {
                    i += 1
                    let path = videos.paths[rng.below(videos.paths.count)]
                    let url = origin.url(path)
                    let roll = rng.below(100)
                    let op: String
                    var args: [String] = []
                    switch roll {
                    case 0..<55:
                        // A player: the whole video, a range, a tail, or a suffix.
                        let a = rng.below(3 << 20), b = a + rng.below(2 << 20)
                        switch rng.below(4) {
                        case 0: args = []
                        case 1: args = ["-r", "\(a)-\(b)"]
                        case 2: args = ["-r", "\(a)-"]
                        default: args = ["-r", "-\(1 + rng.below(1 << 20))"]
                        }
                        op = "play \(path) \(args.joined(separator: " "))"
                        play(proxy: proxy, path: path, url: url, args: args, videos: videos, failures: failures, op: op, tag: tag)
                        continue
                    case 55..<63:
                        let a = rng.below(3 << 20), b = a + rng.below(1 << 20)
                        args = ["prefetch", url, "--range", "\(a)-\(b)", "-q"]
                    case 63..<70:
                        // A cron warm-up: a list of the videos (each listed once or twice, so two
                        // lists running at once overlap), eight at a time, heads or whole.
                        let list = dir.file("list-\(w)-\(i)")
                        let urls = videos.paths.flatMap { p in Array(repeating: origin.url(p), count: rng.below(3)) }
                        guard (try? urls.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)) != nil else {
                            failures.add("\(tag): list \(list) not written")
                            continue
                        }
                        args = ["prefetch", "-i", list, "-j", "8", "-q"] + (rng.below(2) == 0 ? ["--bytes", "\(1 + rng.below(2))M"] : [])
                    case 70..<76: args = ["evict", "--all"]
                    case 76..<82: args = ["evict", "--lru", "--max-size", "\(2 + rng.below(8))M"]
                    case 82..<88: args = ["verify", "--fix"]
                    case 88..<97:
                        videos.bump(path)
                        continue
                    default:
                        do { try proxy.restart() } catch { failures.add("\(tag): serve did not restart: \(error)") }
                        continue
                    }
                    op = "vcache " + args.joined(separator: " ")
                    guard let r = try? VCacheBinary.run(args, cacheDir: cache) else {
                        failures.add("\(tag): \(op) did not run")
                        continue
                    }
                    if r.signalledOrCrashed || r.stderr.contains("Fatal error") {
                        failures.add("\(tag): \(op) crashed: exit \(r.status) \(r.stderr)")
                    }
                }
            }
        }
        group.wait()
        if let leak = proxy.leak() { failures.add("\(tag): \(leak)") }
        proxy.stop()
        for line in failures.lines.prefix(20) { Issue.record("\(line)") }
        #expect(failures.lines.isEmpty, "\(failures.lines.count) failures; \(tag)")
        let errors = failures.errors.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key == 0 ? "no answer" : String($0.key))" }.joined(separator: ", ")
        #expect(failures.compared >= Self.minimumBodies, "\(failures.compared) bodies compared, fewer than \(Self.minimumBodies): \(errors); \(tag)")
        #expect(failures.errorCount * 2 < failures.played, "\(failures.errorCount) of \(failures.played) plays had no body (\(errors)); \(tag)")
        print("interleaving: \(tag): \(failures.played) plays, \(failures.compared) bodies compared (at least \(Self.minimumBodies) required), \(failures.cut) of them cut, \(failures.errorCount) answers with no body (\(errors.isEmpty ? "none" : errors)), no wrong byte; serve at the end: \(proxy.lastSeen.fds) descriptors, \(proxy.lastSeen.threads) threads (\(proxy.baseline.fds) and \(proxy.baseline.threads) at its start)")

        // The cache claims only bytes of the version each entry records, and verifies clean.
        let inspector = try CacheInspector(directory: cache)
        for path in videos.paths {
            guard let e = try inspector.entry(origin.url(path)), let length = e.length else { continue }
            guard let v = videos.version(path, etag: e.etag, length: Int(length)) else {
                Issue.record("\(tag): \(path) records a version the origin never had (etag \(e.etag ?? "-"), length \(length))")
                continue
            }
            #expect(try inspector.verifyClaims(origin.url(path), origin: v.body).mismatch == nil, "\(path) \(tag)")
        }
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "verify: \(verify.stdout) \(verify.stderr) \(tag)")
    }

    func play(proxy: Proxy, path: String, url: String, args: [String], videos: Videos, failures: Failures, op: String, tag: String) {
        let id = UUID().uuidString.prefix(8)
        let h = dir.file("h-\(id)"), b = dir.file("b-\(id)")
        var keep = false
        defer {
            if !keep {
                try? FileManager.default.removeItem(atPath: h)
                try? FileManager.default.removeItem(atPath: b)
            }
        }
        let run: (status: Int32, out: Data, err: String)? = proxy.use { serve in
            try? Tool.run("/usr/bin/curl", ["-s", "--max-time", "60", "-D", h, "-o", b] + args + [serve.url(url)])
        }
        guard let run else { return failures.add("\(tag): \(op): curl did not run") }
        let head = (try? String(contentsOfFile: h, encoding: .utf8)) ?? ""
        let (status, headers) = ResponseHeadText.parse(head)
        let body = (try? Data(contentsOf: URL(fileURLWithPath: b))) ?? Data()
        guard status == 200 || status == 206 else {
            // Statuses other than a body (a 502 while the origin changed, a stopping server) are
            // allowed, counted apart (a run of mostly these fails); a body must never be wrong.
            failures.error(status: status)
            return
        }
        let range = args.count == 2 && args[0] == "-r" ? args[1] : nil
        var start = 0, total = 0
        var asked: (first: Int, last: Int)?
        if status == 206 {
            let cr = headers["content-range"] ?? ""
            let parts = cr.replacingOccurrences(of: "bytes ", with: "").split(whereSeparator: { $0 == "-" || $0 == "/" })
            guard parts.count == 3, let a = Int(parts[0]), let z = Int(parts[1]), let t = Int(parts[2]) else {
                return failures.add("\(tag): \(op): 206 with Content-Range '\(cr)'")
            }
            // A 206 is the range asked, no more and no less (a whole-video request gets a 200).
            guard range != nil else { return failures.add("\(tag): \(op): 206 (\(cr)) to a request for the whole video") }
            let want = Self.asked(range, total: t)
            guard (a, z) == want else {
                return failures.add("\(tag): \(op): Content-Range '\(cr)' for the range \(range ?? "") of \(t) bytes, which is \(want.first)-\(want.last)")
            }
            start = a
            total = t
            asked = want
        } else {
            total = Int(headers["content-length"] ?? "") ?? -1
        }
        let etag = headers["etag"].flatMap { $0.contains("vcache-") ? nil : $0 }
        guard let version = videos.version(path, etag: etag, length: total) else {
            return failures.add("\(tag): \(op): \(status) names no version of the origin (etag \(headers["etag"] ?? "-"), length \(total))")
        }
        let expected = version.body[start..<min(version.body.count, start + body.count)]
        if body != expected {
            var at = 0
            while at < body.count && at < expected.count && body[at] == expected[expected.startIndex + at] { at += 1 }
            // The head and body stay in the test's folder (kept with VCACHE_KEEP_TEST_DIRS=1, with serve's logs).
            keep = true
            return failures.add("\(tag): \(op): WRONG BYTES at offset \(start + at) of \(status) (etag \(headers["etag"] ?? "-"), length \(total)), \(body.count) bytes received; at \(Date()); head and body: \(h) \(b); X-Cache \(headers["x-cache"] ?? "-")")
        }
        let complete = run.status == 0
        if complete, let cl = headers["content-length"].flatMap({ Int($0) }), cl != body.count {
            failures.add("\(tag): \(op): curl exit 0 with \(body.count) of \(cl) bytes")
        }
        // A complete 206 ends on the last byte asked, and its first and last bytes are the origin's there.
        if let asked, complete {
            if body.count != asked.last - asked.first + 1 {
                failures.add("\(tag): \(op): 206 of \(body.count) bytes for \(asked.first)-\(asked.last)")
            } else if body.first != version.body[asked.first] || body.last != version.body[asked.last] {
                failures.add("\(tag): \(op): 206's first or last byte is not the origin's at \(asked.first) or \(asked.last)")
            }
        }
        failures.compared(cut: !complete)
    }
}
