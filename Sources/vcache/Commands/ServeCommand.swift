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
import Dispatch
import Synchronization
import VCacheCore

/// `vcache serve`: a local HTTP proxy any player can read through; cached bytes from disk, the
/// rest streamed from the origin and kept.
enum ServeCommand: VCacheCommand {
    static let defaultPort = 8089

    static let configuration = CommandConfiguration(
        name: "serve",
        abstract: "a local proxy players read through: cached bytes from disk, the rest streamed and kept",
        usage: "serve [--port N] [--listen ADDR:PORT --allow-host HOST...] [--json]",
        discussion: """
        Listens on 127.0.0.1 (port \(defaultPort) unless --port; 0 picks a free one). The first line on
        stdout is the server's base URL; 'vcache url ORIGIN_URL' prints a video's proxy URL. One
        line per request on stderr (--quiet: none). An HLS playlist or DASH MPD is answered
        rewritten so its segments come through the cache (offline: only what plays from it).
        SIGINT/SIGTERM stop it cleanly; SIGHUP reads the
        cache's settings again (config max-size) without dropping a connection. Under systemd it
        reports readiness (Type=notify).
        """,
        minPositionals: 0, maxPositionals: 0, handlesQuiet: true)

    struct Options: OptionGroup {
        var port = Option("port", .port(0...65535), help: "port on 127.0.0.1 (default \(defaultPort); 0: any free port, printed)")
        var listen = Option("listen", .listenAddress, help: "listen on another address (needs --allow-host): e.g. 0.0.0.0:8089")
        var allowHost = Repeated("allow-host", .originRule, help: "the only origin hosts (and ports) the proxy contacts (repeatable; required with --listen)")
        var serverName = Repeated("server-name", .text("NAME"), help: "another name players use for this proxy in their Host header (repeatable; loopback names and the --listen address are always accepted)")
        var header = Repeated("header", short: "H", .text("'NAME: VALUE'"), help: "extra request header sent to origins (repeatable)")
        var timeout = Option("timeout", .duration, help: "give up on an origin when no byte arrives for DURATION (default 30s)")
        var headerTimeout = Option("header-timeout", .duration, help: "cut a player's connection that has not sent its request head within DURATION (default 10s)")
        var maxSize = Option("max-size", .size(), help: "keep the cache under SIZE while serving (default: config max-size); a bigger video still plays")
        var retries = Option("retries", .count(0...Int.max), help: "retries of a storing job's failed origin request (default 3)")
        var connectTimeout = Option("connect-timeout", .duration, help: "give up connecting to an origin after DURATION (default 15s)")
        var limitRate = Option("limit-rate", .size(minimum: 1024).named("RATE"), help: "at most RATE bytes per second for each origin transfer (e.g. 2M)")
        var stats = Option("stats", .duration, help: "a summary line (requests, hit ratio, bytes) every DURATION (default 10m)")
        var metricsFrom = Repeated("metrics-from", .clientAddress, help: "another client address allowed to read /metrics and /status (loopback always is; repeatable)")
        var origin = OriginOptions()
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        var address = "127.0.0.1"
        var port = UInt16(args.port ?? defaultPort)
        if let l = args.listen {
            address = l.host
            port = l.port
        }
        let headTimeout: Duration = .milliseconds(Int64((args.headerTimeout ?? 10) * 1000))
        var allowed: AllowedOrigins?
        if !args.allowHost.isEmpty {
            var a = AllowedOrigins()
            for rule in args.allowHost { a.add(host: rule.host, port: rule.port) }
            allowed = a
        }
        let loopback = address == "127.0.0.1" || address == "::1" || address.hasPrefix("127.")
        if !loopback && allowed == nil {
            console.usage("--listen \(address) reaches beyond this machine: name the origin hosts it may contact with --allow-host HOST, so it is never an open proxy")
            return 2
        }
        var options = PrefetchOptions()
        do {
            options.request.headers = try PrefetchCommand.headers(args.header)
            try OriginOptions.apply(args.origin, to: &options.request)
        } catch {
            console.error(error)
            return 2
        }
        // First, before any -H Via: the one line the loop check reads carries this serve's name.
        options.request.headers.insert(Proxy.viaHeader, at: 0)
        if let t = args.connectTimeout { options.request.connectTimeout = t }
        if let t = args.timeout { options.request.stallTimeout = t }
        if let n = args.retries { options.retries = n }
        options.maxRate = args.limitRate
        // A rate for serve is per origin transfer (players each get theirs), not one bucket: each
        // storing job's fetch loop gets its own bucket (libcurl's own limit also, for streams).
        if let rate = options.maxRate { options.request.maxReceiveRate = rate }
        // With a list of origin hosts, a redirect is followed only to one of them: every URL
        // libcurl is about to connect to or request is checked (CurlTransfer).
        options.request.allowedOrigins = allowed
        // Each connection costs a descriptor, a cold one a few more (its storing job's `data`,
        // sockets to the origin): sized from the descriptor limit, raised first as nginx does.
        let usable = Resources.usableDescriptors()
        let descriptors = usable.usable
        guard descriptors >= HTTPServer.minimumDescriptors else {
            console.error("cannot serve: only \(Resources.describe(usable)), and serve needs at least \(HTTPServer.minimumDescriptors): raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit)",
                          kind: "failed", exitCode: 1)
            return 1
        }
        guard let store = openStore(args, console: console) else { return StoreOpening.failure }
        let overrides = Settings.Overrides(maxSize: args.maxSize)
        do { try Settings.apply(store: store, overrides, to: &options) } catch { console.error(error); return 2 }
        options.connections = 1  // `config connections` is prefetch's: a player's span is one transfer

        // Signals: blocked before the server's threads start (they inherit the mask), then
        // waited for here. SIGPIPE from a player that left is ignored.
        signal(SIGPIPE, SIG_IGN)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &set, nil)

        let json = args.json, quiet = args.quiet
        let readThrough = ReadThrough(store: store, options: options)
        let every = args.stats ?? 600
        let metricsClients = Set(args.metricsFrom.joined())
        let proxy = Proxy(readThrough: readThrough, allowedOrigins: allowed, metricsClients: metricsClients) { line in
            if quiet { return }
            if json { console.event("request", fields(line)) } else { console.err(render(line)) }
        }
        // A storing job the disk or the catalog failed: players are served on from the origin,
        // so this line is what tells the operator (even with --quiet).
        readThrough.onStoreFailure { url, error in
            let failure = FailureInfo(error)
            if json {
                console.event("store_failed", ["url": url, "error": failure.json])
            } else {
                console.err("vcache serve: cannot store \(Console.escaped(url)): \(Console.escaped(failure.message)); players are served from the origin meanwhile\n")
            }
        }
        let server: HTTPServer
        do {
            var limits = HTTPServer.Limits()
            if allowed != nil { limits.perClient = 16 }
            limits.connections = HTTPServer.connectionLimit(descriptors: descriptors)
            limits.headTimeout = headTimeout
            // Players libmicrohttpd could not take never become requests: said here (rate-limited).
            let turnedAway: @Sendable (String) -> Void = { line in
                if json { console.event("turned_away", ["message": line]) } else { console.err("vcache serve: \(line)\n") }
            }
            server = try HTTPServer(address: address, port: port, limits: limits, errorLog: turnedAway) { proxy.handle($0) }
        } catch {
            return console.fail(error, context: "cannot serve")
        }
        // A repair replaced the catalog: stop cleanly and exit 5, so that systemd
        // (Restart=on-failure) starts serve again on the new catalog.
        let replaced = Atomic<Bool>(false)
        proxy.onCatalogReplaced {
            replaced.store(true, ordering: .relaxed)
            if json {
                console.event("catalog_replaced", ["cache_dir": store.directory])
            } else {
                console.err("vcache serve: the catalog of \(store.directory) was replaced (a repair by 'vcache verify --fix'); stopping: start serve again to use the new one\n")
            }
            kill(getpid(), SIGTERM)
        }
        proxy.serverNames = ServerNames(listening: address, port: server.port, extra: args.serverName)
        proxy.countConnections { server.openConnections }
        let summaries = summarize(proxy.metrics, every: every, readThrough: readThrough, server: server, console: console, json: json)
        let host = address.contains(":") ? "[\(address)]" : address
        let base = "http://\(host):\(server.port)"
        if json {
            console.event("listening", ["url": base, "cache_dir": store.directory])
        } else {
            console.out(base + "\n")
            console.err("vcache serve: listening on \(base) with the cache at \(store.directory); 'vcache url ORIGIN_URL --port \(server.port)' prints a video's proxy URL\n")
        }
        ServiceManager.notify("READY=1\nSTATUS=serving \(base) from \(store.directory)")
        var caught: Int32 = 0
        while true {
            sigwait(&set, &caught)
            guard caught == SIGHUP else { break }
            reload(readThrough, store: store, overrides, console: console, json: json)
        }
        ServiceManager.notify("STOPPING=1")
        summaries.cancel()
        summaries.emit()  // the last (partial) period, so a stop never loses counts
        let name = caught == SIGINT ? "SIGINT" : "SIGTERM"
        if json { console.event("stopping", ["signal": name]) } else { console.err("vcache serve: stopping (\(name))\n") }
        // Whatever the jobs and connections are doing (an origin that drips, a player that never
        // reads), serve is gone 30 s after the signal: the jobs get 25 s to checkpoint, then the
        // process ends even if a thread is stuck. What it wrote is safe: claims follow fsync.
        let forcedStatus = 128 + caught
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.stopDeadline) {
            console.err("vcache serve: still stopping after \(Int(Self.stopDeadline)) s; exiting now (what was stored is kept)\n")
            _exit(forcedStatus)
        }
        readThrough.shutdown(timeout: Self.stopDeadline - 5)
        server.stop()
        readThrough.flushUse()
        if replaced.load(ordering: .relaxed) { return 5 }
        // Die by the signal, as prefetch does (the shell sees 130/143; systemd a clean stop).
        signal(caught, SIG_DFL)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(caught)
        return 128 + caught
    }

    /// Seconds from SIGINT/SIGTERM to the end of the process, at most (Docs/serve.md).
    static let stopDeadline: Double = 30

    /// An IP address as the server reports clients (inet_ntop's form), with its IPv4-mapped IPv6
    /// twin for an IPv4 one; nil when `text` is not one address.
    static func canonicalAddress(_ text: String) -> Set<String>? {
        var v4 = in_addr(), v6 = in6_addr()
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        if inet_pton(AF_INET, text, &v4) == 1, inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count)) != nil {
            let s = String(nulTerminated: buffer)
            return [s, "::ffff:" + s]
        }
        if inet_pton(AF_INET6, text, &v6) == 1, inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil {
            return [String(nulTerminated: buffer)]
        }
        return nil
    }

    /// SIGHUP: the cache's settings read again. The cap reaches the next room made; a `--max-size`
    /// given on the command line still wins; key rules stay as started (a change would give every
    /// cached video a new key: restart for that), and a change of them in the config is said.
    static func reload(_ readThrough: ReadThrough, store: CacheStore, _ overrides: Settings.Overrides, console: Console, json: Bool) {
        ServiceManager.notify("RELOADING=1\nMONOTONIC_USEC=\(ServiceManager.monotonicMicroseconds)")
        defer { ServiceManager.notify("READY=1") }
        var fresh = PrefetchOptions()
        do {
            try Settings.apply(store: store, overrides, to: &fresh)
        } catch {
            console.error(error, context: "cannot reload the settings; keeping the current ones")
            return
        }
        readThrough.setLimits(cap: fresh.maxSize, minFree: fresh.minFree)
        // Key rules changed in the config are not taken (every cached video would get another
        // key): said, with what to do, rather than left unseen (hostile probe h10b, F1).
        let keysChanged = fresh.keyRules != readThrough.keyRules
        let cap = fresh.maxSize.map(Units.formatSize) ?? "none"
        if json {
            var o: [String: Any] = ["signal": "SIGHUP"]
            if let m = fresh.maxSize { o["max_size_bytes"] = m }
            if let m = fresh.minFree { o["min_free_bytes"] = m }
            if keysChanged { o["key_rules_kept"] = true }
            console.event("reloaded", o)
        } else {
            let minFree = fresh.minFree.map { ", min-free \(Units.formatSize($0))" } ?? ""
            console.err("vcache serve: reloaded the settings (SIGHUP): cap \(cap)\(overrides.maxSize != nil ? " (from --max-size)" : "")\(minFree)\n")
            if keysChanged {
                console.err("vcache serve: the key rules in the cache's config changed (key-ignore-query, key-strip-param); a running serve keeps the ones it started with: restart it (systemctl restart vcache-serve) to key URLs by the new ones\n")
            }
        }
    }

    /// A line every `every` seconds with what the last period served (in the log even with --quiet).
    struct Summaries {
        let timer: DispatchSourceTimer
        let queue: DispatchQueue
        let emit_: @Sendable () -> Void
        func cancel() { timer.cancel() }
        /// One line now, for what the period so far served.
        func emit() { queue.sync { emit_() } }
    }

    static func summarize(_ metrics: ServeMetrics, every: Double, readThrough: ReadThrough, server: HTTPServer,
                          console: Console, json: Bool) -> Summaries {
        let queue = DispatchQueue(label: "vcache.serve.summary")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let last = Locked((counts: metrics.current, at: ContinuousClock.now))
        timer.schedule(deadline: .now() + every, repeating: every)
        let emit: @Sendable () -> Void = {
            let now = metrics.current, instant = ContinuousClock.now
            let (d, seconds) = last.withLock { previous -> (ServeMetrics.Counts, Double) in
                defer { previous = (now, instant) }
                return (now.since(previous.counts), (instant - previous.at).inSeconds)
            }
            let ratio = d.byteHitRatio.map { String(cFormat: "%.0f%%", $0 * 100) } ?? "-"
            if json {
                var o: [String: Any] = ["seconds": (seconds * 1000).rounded() / 1000, "requests": d.requestCount, "hit": d.cache[.hit] ?? 0, "partial": d.cache[.partial] ?? 0,
                                        "miss": d.cache[.miss] ?? 0, "from_cache_bytes": d.fromCacheBytes, "from_origin_bytes": d.fromOriginBytes,
                                        "storing_jobs": readThrough.storingJobs, "open_connections": server.openConnections]
                if let r = d.byteHitRatio { o["byte_hit_ratio"] = r }
                console.event("summary", o)
            } else {
                console.err("vcache serve: last \(Units.formatDuration(seconds)): \(d.requestCount) requests (HIT \(d.cache[.hit] ?? 0), PARTIAL \(d.cache[.partial] ?? 0), MISS \(d.cache[.miss] ?? 0)), "
                    + "\(Units.formatSize(d.fromCacheBytes + d.fromOriginBytes)) sent, \(ratio) of it from the cache; "
                    + "\(readThrough.storingJobs) storing, \(server.openConnections) connections\n")
            }
        }
        timer.setEventHandler(handler: emit)
        timer.resume()
        return Summaries(timer: timer, queue: queue, emit_: emit)
    }

    /// A request's `request` event (Docs/json.md).
    static func fields(_ l: Proxy.LogLine) -> [String: Any] {
        var o: [String: Any] = ["client": l.client, "method": l.method, "url": l.url, "http_status": l.status,
                                "from_cache_bytes": l.fromCache, "from_origin_bytes": l.fromOrigin,
                                "elapsed_seconds": (l.seconds * 1_000_000).rounded() / 1_000_000,
                                "started": Timestamp.iso8601(l.time, milliseconds: true)]
        if let r = l.range { o["range"] = r }
        if let n = l.note { o["note"] = n }
        return o
    }

    /// `seconds` as the log line's `%.1fms`, without printf (its argument list cost as much as
    /// the rest of the line).
    static func milliseconds(_ seconds: Double) -> String {
        let tenths = (seconds * 10_000).rounded()
        guard tenths.isFinite, tenths >= 0, tenths < 1e15 else { return String(cFormat: "%.1fms", seconds * 1000) }
        let t = Int(tenths)
        return "\(t / 10).\(t % 10)ms"
    }

    static func render(_ l: Proxy.LogLine) -> String {
        let time = Timestamp.iso8601(l.time)
        let ms = milliseconds(l.seconds)
        // What a client sent is escaped: a CR or LF in a URL must not forge a log line.
        return "\(time) \(l.client) \(l.method) \(Console.escaped(l.url)) \(Console.escaped(l.range ?? "-")) \(l.status) cache=\(l.fromCache) origin=\(l.fromOrigin) \(ms)"
            + (l.note.map { " (\(Console.escaped($0)))" } ?? "") + "\n"
    }
}

/// `vcache url ORIGIN_URL`: the proxy URL a player should open.
enum UrlCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "url",
        abstract: "print the proxy URL of a video for 'vcache serve'",
        usage: "url ORIGIN_URL... [--port N | --listen HOST:PORT]",
        discussion: "The proxy URL ends with the origin's file name, so players recognise the format; serve answers it under no other name (404).",
        minPositionals: 1, maxPositionals: nil)

    struct Options: OptionGroup {
        var port = Option("port", .port(1...65535), help: "the port serve listens on (default \(ServeCommand.defaultPort))")
        var listen = Option("listen", .playerAddress, help: "the address players reach serve at (serve --listen, or a --server-name), e.g. 192.168.1.20:8089")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        var base = "http://127.0.0.1:\(args.port ?? ServeCommand.defaultPort)"
        var own = ServerNames(listening: "127.0.0.1", port: args.port ?? ServeCommand.defaultPort)
        if let l = args.listen {
            guard args.port == nil else { console.usage("--listen names the port too; give --port or --listen"); return 2 }
            let host = l.host.contains(":") && !l.host.hasPrefix("[") ? "[\(l.host)]" : l.host  // an IPv6 address
            base = "http://\(host):\(l.port)"
            own = ServerNames(listening: l.host, port: Int(l.port))
        }
        for origin in args.positionals {
            if let why = PrefetchItem.urlProblem(origin) {
                console.usage("cannot make a proxy URL for \(origin): \(why)")
                return 2
            }
            // serve's own address (a proxy URL of it pasted again): serve would fetch from itself,
            // which it answers 508 (a loop), never with a video.
            if let t = OriginTarget.of(origin), t.port == own.port, own.names.contains(t.host) {
                let inner = URLComponents(string: origin).flatMap { ProxyURL.origin(path: $0.percentEncodedPath) }
                console.usage("cannot make a proxy URL for \(origin): it is serve's own address, which a player would get 508 (a loop) from; "
                    + (inner.map { "it is already the proxy URL of \($0)" } ?? "give the video's origin URL"))
                return 2
            }
            console.out(ProxyURL.make(origin: origin, base: base) + "\n")
        }
        return 0
    }
}
