#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// What `serve` answers a player: the HTTP rules of the issue in one place, in front of
/// `ReadThrough`. GET and HEAD only; a Range (`A-B`, `A-`, `-N`; several ranges get the span
/// covering them) gets a 206 with an exact Content-Range, none a 200, an unsatisfiable one a 416
/// with `bytes */LEN`; always Accept-Ranges, a Content-Length, a stable ETag and Last-Modified when
/// known, never chunked encoding. A fully cached span goes out by sendfile.
public final class Proxy: Sendable {
    public struct LogLine: Sendable {
        public var time: Date
        public var client: String
        public var method: String
        public var url: String
        public var range: String?
        public var status: Int
        public var fromCache: Int64
        public var fromOrigin: Int64
        public var seconds: Double
        public var note: String?
    }

    public let readThrough: ReadThrough
    /// The only origins contacted (nil: any, for a proxy that listens on loopback only).
    public let allowedOrigins: AllowedOrigins?
    /// The names a request's Host may carry (the proxy's own; anything else is refused: DNS
    /// rebinding). Set once the server listens (its port is known then); until then nothing is served.
    private let names = Locked<ServerNames?>(nil)
    public var serverNames: ServerNames? {
        get { names.withLock { $0 } }
        set { names.withLock { $0 = newValue } }
    }
    let log: @Sendable (LogLine) -> Void
    public let metrics = ServeMetrics()
    /// Live playlists fetched in the last half target duration (`LivePlaylists`).
    let livePlaylists = LivePlaylists()
    /// Per manifest a player read in a version serve could not store (`takeNewVersion`), the
    /// members it names, by role: passed through, never cached.
    let unstored = Locked<[CacheKey: [CacheKey: StreamRole]]>([:])
    /// Per MPD root naming more than `eagerMembers` segments, its template Representations whose
    /// segments are recorded as members one at a time, when serve stores one (`lazyMember`).
    let lazyTemplates = Locked<[CacheKey: [LazyTemplate]]>([:])
    /// Per manifest serve confirms after storing members it names (`Proxy+Confirm`).
    let confirmations = Locked<[CacheKey: Confirmation]>([:])
    /// Who may read `/metrics` and `/status`: loopback always, and these addresses (`--metrics-from`).
    public let metricsClients: Set<String>
    /// Called (once) when a request finds the catalog replaced since serve opened it (a repair
    /// by `verify --fix`): serve must stop, and start again on the new one.
    private let catalogReplaced = Locked<(@Sendable () -> Void)?>(nil)
    public func onCatalogReplaced(_ f: @escaping @Sendable () -> Void) { catalogReplaced.withLock { $0 = f } }
    /// Open connections, from the server once it listens (for the metrics).
    private let connectionCount = Locked<(@Sendable () -> Int)?>(nil)
    public func countConnections(_ count: @escaping @Sendable () -> Int) { connectionCount.withLock { $0 = count } }

    public init(readThrough: ReadThrough, allowedOrigins: AllowedOrigins? = nil, serverNames: ServerNames? = nil,
                metricsClients: Set<String> = [], log: @escaping @Sendable (LogLine) -> Void) {
        self.readThrough = readThrough
        self.allowedOrigins = allowedOrigins
        self.metricsClients = metricsClients
        self.log = log
        names.withLock { $0 = serverNames }
    }

    /// This process's name in the `Via` header of every origin request it makes (RFC 9110
    /// §7.6.3), random per process. A request that arrives carrying it came from this serve
    /// itself: an origin URL (or a redirect) that leads back to the proxy. Answered 508 at once,
    /// however deep the URL nests (each hop would hold a connection and a thread), and never
    /// with `/metrics` or `/status`, which are for this machine's own clients.
    public static let pseudonym: String = {
        var g = SystemRandomNumberGenerator()
        return "vcache-" + String(g.next() as UInt64, radix: 16)
    }()
    public static var viaHeader: String { "Via: 1.1 \(pseudonym)" }

    /// Headers on every answer: no answer of the proxy is ever an active document (an origin's
    /// HTML would otherwise run script with the proxy's origin).
    static let inert: [(String, String)] = [("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "sandbox")]

    public func handle(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let start = ContinuousClock.now
        var line = LogLine(time: Date(), client: request.client, method: request.method, url: request.path, range: request.headers["range"],
                           status: 0, fromCache: 0, fromOrigin: 0, seconds: 0, note: nil)
        let log = self.log, metrics = self.metrics
        // Every answer ends here: its log line and its counters, from one record.
        @Sendable func account(_ l: LogLine, cache: CacheStatus?, originError: String?) {
            var l = l
            l.seconds = (ContinuousClock.now - start).inSeconds
            log(l)
            metrics.record(status: l.status, cache: cache, fromCache: l.fromCache, fromOrigin: l.fromOrigin, originError: originError)
        }
        func finish(_ status: Int, _ note: String?, headers: [(String, String)] = [], originError: String? = nil, body: String? = nil) -> HTTPServer.Response {
            line.status = status
            line.note = note
            account(line, cache: nil, originError: originError)
            guard let body else { return HTTPServer.Response(status: status, headers: headers + Self.inert) }
            return HTTPServer.Response(status: status, headers: headers + [("Content-Type", "text/plain; charset=utf-8")] + Self.inert,
                                       body: .bytes(Array((body + "\n").utf8)))
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return finish(405, "only GET and HEAD", headers: [("Allow", "GET, HEAD")])
        }
        guard !request.hadBody else { return finish(400, "a request body is not accepted") }
        if let why = request.malformed { return finish(400, why) }
        guard let serverNames else { return finish(503, "not listening yet") }
        if let host = request.headers["host"], !serverNames.accepts(host) {
            return finish(403, "Host '\(host)' is not a name of this proxy (add it with --server-name)")
        }
        if let via = request.headers["via"], via.contains(Self.pseudonym) {
            return finish(508, "a request from this serve itself: its origin URL leads back to the proxy (a loop)")
        }
        // The operator's own paths are not players' requests: a scrape does not count itself.
        if let answer = control(request) { return answer }
        let origin: String
        switch ProxyURL.lookup(path: request.path) {
        // A query the player put on a folder-form URL (a DASH player's UrlQueryInfo, CMCD) is
        // the origin's too, as sent; the `/v/` form names its whole origin URL in the token.
        case .origin(let o): origin = request.path.hasPrefix("/d/") ? ProxyURL.appendingQuery(o, request.query) : o
        case .refused(let why): return finish(404, why, body: why)
        case .notOurs: return finish(404, "not a vcache proxy path (/v/ORIGIN/NAME)")
        }
        line.url = origin
        // The catalog this process reads is not the cache's any more: its claims are stale (the
        // files they were about may have been replaced since), so nothing is answered from them.
        if readThrough.store.catalogReplaced {
            var answer = finish(503, "the catalog was replaced (a repair by 'vcache verify --fix'): serve stops, to start again on the new one",
                                headers: [("Retry-After", "5")])
            // Stopped once this answer went out (a stop first would cut it).
            let stop = catalogReplaced.withLock { f -> (@Sendable () -> Void)? in defer { f = nil }; return f }
            answer.completed = { _ in stop?() }
            return answer
        }
        // Refuses control characters, other schemes, and what libcurl's own parser refuses.
        if let why = Self.urlProblem(origin) { return finish(400, "origin \(why)") }
        if let allowed = allowedOrigins, let target = OriginTarget.of(origin), !allowed.allows(target) {
            return finish(403, "origin \(target) is not allowed by --allow-host")
        }
        /// The rewritten playlist, when `video` is one.
        func asPlaylist(_ video: ReadThrough.Video) -> HTTPServer.Response? {
            // The first bytes the three checks look at, read once.
            let peeked = peekHead(video)
            guard let playlist = playlistAnswer(request, origin: origin, video: video, peeked: peeked) ?? mpdAnswer(request, origin: origin, video: video, peeked: peeked)
                    ?? remoteElementAnswer(request, origin: origin, video: video, peeked: peeked) else { return nil }
            // Not answered as a playlist (the origin's error, or one serve refuses): no part of
            // one is kept (the head `open` stored is no playlist a later answer could use).
            if playlist.cache == nil { forgetPartialPlaylist(video) }
            readThrough.markUsed(video.key)
            line.status = playlist.response.status
            line.fromCache = playlist.fromCache
            line.fromOrigin = playlist.fromOrigin
            line.note = playlist.note
            account(line, cache: playlist.cache, originError: playlist.cache == nil ? "status" : nil)
            return playlist.response
        }
        // A member of a stream whose new manifest could not be stored: never read from nor
        // stored in the cache (its cached bytes, if any, are the old version's).
        // A stream marked unconfirmed whose manifest this serve has no answer of: asked first
        // (after a restart, the new version another serve passed through, h9d F3).
        let unconfirmed = askIfMarked(member: readThrough.options.keyRules.key(for: origin))
        if let (manifest, role) = unstoredMember(readThrough.options.keyRules.key(for: origin)) {
            if role == .playlist {
                let unread = ReadThrough.Video(key: readThrough.options.keyRules.key(for: origin), url: origin, length: 0,
                                               validators: Validators(length: nil, etag: nil, lastModified: nil),
                                               contentType: nil, fromCatalog: false, snapshot: ReadThrough.Snapshot())
                if let answer = asPlaylist(unread) { return answer }
            }
            let passed = passThrough(request, origin: origin, manifest: manifest, role: role)
            line.status = passed.response.status
            line.fromOrigin = passed.fromOrigin
            line.note = passed.note
            account(line, cache: passed.response.status < 300 ? .miss : nil, originError: passed.response.status < 300 ? nil : "status")
            return passed.response
        }
        // Not passed through, and its stream's manifest could not be asked (offline): not from the cache.
        if unconfirmed {
            line.status = 502
            line.note = "its stream is not confirmed unchanged on the origin since members were fetched for it (manifest-unconfirmed: they may be of two encodes), and its manifest could not be asked: not answered from the cache"
            account(line, cache: nil, originError: "status")
            return HTTPServer.Response(status: 502, headers: Self.inert)
        }
        let video: ReadThrough.Video
        do {
            video = try openMember(origin)
        } catch {
            switch error {
            // The player learns what the origin said; no error body is ever stored as video bytes.
            case .origin(let status, _): return finish(Self.relayedStatus(status), error.description, originError: "status")
            case .unreachable(let why):
                // A playlist sent chunked and longer than the head: no length came with it, which
                // a playlist needs not (it is read whole, up to its limit, not served by ranges).
                let lengthless = ReadThrough.Video(key: readThrough.options.keyRules.key(for: origin), url: origin, length: 0,
                                                   validators: Validators(length: nil, etag: nil, lastModified: nil),
                                                   contentType: nil, fromCatalog: false, snapshot: ReadThrough.Snapshot())
                return asPlaylist(lengthless) ?? finish(502, why, originError: "unreachable")
            }
        }
        if let answer = asPlaylist(video) { return answer }
        let etag = ProxyURL.etag(video)
        var headers: [(String, String)] = [
            ("Accept-Ranges", "bytes"),
            ("Content-Type", Self.contentType(path: request.path, origin: video.contentType)),
            ("ETag", etag),
        ]
        if let lm = video.validators.lastModified { headers.append(("Last-Modified", lm)) }
        let span: ByteRange
        var status = 200
        var rangeHeader = request.headers["range"]
        // RFC 9110 §13.1.5: a Range under an If-Range naming another version is ignored.
        if let ifRange = request.headers["if-range"], !IfRange.matches(ifRange, etag: etag, lastModified: video.validators.lastModified) {
            rangeHeader = nil
        }
        switch RangeHeader(rangeHeader, length: video.length) {
        case .whole:
            span = ByteRange(0, video.length)
        case .span(let r):
            span = r
            status = 206
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(video.length)"))
        case .unsatisfiable:
            return finish(416, nil, headers: headers + [("Content-Range", "bytes */\(video.length)")])
        }
        var first = readThrough.reader(video, range: span)
        readThrough.markUsed(video.key)
        let isHead = request.method == "HEAD"
        if !isHead, let problem = first.prepare() {
            // Nothing could be read where the response begins: a status now, not a 200 cut at once.
            first.finished(completed: false)
            // A stream member whose signed URL expired: read under the URL its playlist names now.
            guard let renewed = renewedReader(video, range: span, refused: problem.status) else {
                return finish(problem.status, problem.reason, originError: problem.status == 502 ? "unreachable" : "status")
            }
            first = renewed
        }
        let reader = first
        // A video the catalog did not know had its head fetched by `open` for this very request:
        // every byte of it came from the origin now.
        let fresh = !video.fromCatalog
        let cacheStatus = fresh ? .miss : reader.cacheStatus
        headers.append(("X-Cache", cacheStatus.rawValue))
        // Bytes of a stream member come from the origin: its manifest is asked for again (`Proxy+Confirm`).
        let confirming = cacheStatus == .hit ? [] : memberBegins(key: video.key, began: start)
        let body: HTTPServer.Body
        // A member's signed URL that expires while the body goes out is renewed for the rest.
        let streamed = RenewingReader(reader, span: span) { [self] rest, status in self.renewedReader(video, range: rest, refused: status) }
        if !isHead, !span.isEmpty, let data = reader.cachedFile {
            body = .file(data, offset: span.lowerBound, length: span.count)
        } else {
            body = .stream(length: span.count, streamed)
        }
        let sendfileBytes: Int64 = { if case .file = body { return span.count } else { return 0 } }()
        let base = line, finalStatus = status
        return HTTPServer.Response(status: status, headers: headers + Self.inert, body: body) { ending in
            let completed = ending.completed
            // A file body stopped while the client stayed: the server could not read the file
            // (EIO from a failing disk), which is what the log says, not that the client left.
            var unread: String?
            if !completed, sendfileBytes > 0, ending.clientStayed == true {
                unread = reader.readProblem(from: span.lowerBound + (ending.fileBytesSent ?? 0))
                    ?? "stopped with the client still connected (it read nothing for too long, or the cached bytes could not be sent)"
            }
            streamed.finished(completed: completed)
            var done = base
            done.status = finalStatus
            // A file body abandoned midway counts what the client acknowledged (TCP's count).
            let fileBytes = isHead ? 0 : ending.fileBytesSent ?? (completed ? sendfileBytes : 0)
            done.fromCache = fileBytes + streamed.fromCache
            done.fromOrigin = streamed.fromOrigin
            if fresh {
                done.fromOrigin += done.fromCache
                done.fromCache = 0
            }
            var notes: [String] = []
            if let p = reader.fileProblem { notes.append(p) }
            if streamed.renewed { notes.append("the origin refused its signed URL midway: the rest was read under the URL its playlist names now") }
            if !completed { notes.append(unread ?? streamed.failure ?? "the client left before the end") }
            done.note = notes.isEmpty ? nil : notes.joined(separator: "; ")
            account(done, cache: cacheStatus, originError: completed || streamed.failure == nil ? nil : "cut")
            if !confirming.isEmpty { self.memberEnded(key: video.key, url: video.url, began: start, targets: confirming) }
        }
    }
}

extension Proxy {
    /// The operator's paths (reached only under a Host that names the proxy, as every path: DNS
    /// rebinding): `/healthz` for any client address (a liveness probe), `/metrics` (Prometheus text
    /// format) and `/status` (JSON) for loopback clients and `--metrics-from` addresses only (they
    /// name every cached count; a player or a page elsewhere on the LAN has no business there).
    func control(_ request: HTTPServer.Request) -> HTTPServer.Response? {
        // A path that begins with `/` keeps its beginning through the split: one beginning with
        // none of them (a player's `/v/`, `/d/`) is told at once, with no split.
        if request.path.hasPrefix("/"), !["/healthz", "/metrics", "/status"].contains(where: { request.path.hasPrefix($0) }) { return nil }
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        guard ["/healthz", "/metrics", "/status"].contains(path) else { return nil }
        func text(_ status: Int, _ body: String, type: String = "text/plain; charset=utf-8") -> HTTPServer.Response {
            HTTPServer.Response(status: status, headers: [("Content-Type", type), ("Cache-Control", "no-store")] + Self.inert,
                                body: .bytes(Array(body.utf8)))
        }
        if path == "/healthz" { return text(200, "ok\n") }
        guard Self.isLoopback(request.client) || metricsClients.contains(request.client) else {
            return text(403, "\(path) is for this machine only (serve --metrics-from ADDR allows another address)\n")
        }
        // Another serve (on this machine: its address is loopback) asking for a client of its own,
        // who may be anywhere on its LAN: the other serve's Via names it, never this one's.
        if let via = request.headers["via"], let name = Self.serveInVia(via) {
            return text(403, "\(path) is for this machine only: this request came through a vcache serve (\(name)) for a client of its own\n")
        }
        var gauges = ServeMetrics.Gauges.measure(readThrough.store, cap: readThrough.currentCap)
        gauges.storingJobs = readThrough.storingJobs
        gauges.openConnections = connectionCount.withLock { $0?() } ?? 0
        gauges.unconfirmedManifests = unconfirmedCount
        if path == "/metrics" { return text(200, metrics.prometheus(gauges), type: "text/plain; version=0.0.4; charset=utf-8") }
        return text(200, String(decoding: metrics.statusJSON(gauges), as: UTF8.self) + "\n", type: "application/json")
    }

    /// The first vcache serve a `Via` value names (`1.1 vcache-<hex>`, RFC 9110 §7.6.3: the
    /// received-by of each comma-separated hop), nil when none.
    static func serveInVia(_ via: String) -> String? {
        for hop in via.split(separator: ",") {
            let parts = hop.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if parts.count >= 2, parts[1].lowercased().hasPrefix("vcache-") { return String(parts[1]) }
        }
        return nil
    }

    /// `PrefetchItem.urlProblem` of an origin URL (a pure function of it: two URL parses),
    /// remembered for the origins asked last.
    static func urlProblem(_ origin: String) -> String? {
        recentURLProblems.answer(origin) { PrefetchItem.urlProblem($0) }
    }
    private static let recentURLProblems = RecentAnswers<String?>()

    /// The extension of an origin URL's path, lower-cased (`m3u8`, `mpd`; "" for none): a pure
    /// function of it (a URL parse), remembered for the origins asked last.
    static func pathExtension(_ origin: String) -> String {
        recentExtensions.answer(origin) { (URL(string: $0)?.path ?? $0).fileExtension.lowercased() }
    }
    private static let recentExtensions = RecentAnswers<String>()

    /// A video answer's Content-Type: the origin's when it is safe to pass on, else one for the
    /// name the path ends with (`ProxyURL.contentType`, `safeContentType`). A pure function of
    /// the two, remembered per path with the origin's type it was made for.
    static func contentType(path: String, origin type: String?) -> String {
        if let known = recentContentTypes.known(path), known.origin == type { return known.answer }
        let name = PercentCoding.decode(PathText.lastPathComponent(path)) ?? ""
        let answer = ProxyURL.safeContentType(ProxyURL.contentType(origin: type, name: name))
        recentContentTypes.remember((type, answer), for: path)
        return answer
    }
    private static let recentContentTypes = RecentAnswers<(origin: String?, answer: String)>()

    static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address.hasPrefix("127.") || address.hasPrefix("::ffff:127.")
    }
}

/// The names the proxy answers to: loopback names and its listening address, plus any given with
/// `--server-name`, on its port. A page whose own name was rebound to 127.0.0.1 sends its own
/// name as Host and is refused (DNS rebinding).
public struct ServerNames: Sendable, Equatable {
    public var names: Set<String>
    public var port: Int
    /// The proxy's own base URL (its listening address; loopback when it listens on any).
    public var base: String

    public init(listening address: String, port: Int, extra: [String] = []) {
        let own = ["0.0.0.0", "::", ""].contains(address) ? "127.0.0.1" : address
        base = "http://" + (own.contains(":") ? "[\(own)]" : own) + ":\(port)"
        var n: Set<String> = ["localhost", "127.0.0.1", "::1", OriginTarget.canonicalHost(address)]
        for e in extra { n.insert(OriginTarget.canonicalHost(e)) }
        names = n
        self.port = port
    }

    /// Whether a Host header names this proxy (a missing port means 80).
    public func accepts(_ host: String) -> Bool {
        let h = host.trimming(.whitespaces)
        var name = h
        var port = 80
        if h.hasPrefix("[") {
            guard let close = h.firstIndex(of: "]") else { return false }
            name = String(h[h.index(after: h.startIndex)..<close])
            let rest = h[h.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()) else { return false }
                port = p
            }
        } else if let colon = h.lastIndex(of: ":") {
            guard let p = Int(h[h.index(after: colon)...]) else { return false }
            name = String(h[..<colon])
            port = p
        }
        return port == self.port && names.contains(OriginTarget.canonicalHost(name))
    }
}

/// `If-Range` (RFC 9110 §13.1.5): an entity tag matches only by strong comparison, a date only
/// when it is exactly the Last-Modified sent.
public enum IfRange {
    public static func matches(_ value: String, etag: String?, lastModified: String?) -> Bool {
        let v = value.trimming(.whitespaces)
        if v.hasPrefix("\"") || v.hasPrefix("W/") {
            guard let etag, !v.hasPrefix("W/"), !etag.hasPrefix("W/") else { return false }
            return v == etag
        }
        guard let lastModified else { return false }
        return v == lastModified
    }
}
