#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CMicroHTTPD
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The HTTP/1.1 server of `serve`: libmicrohttpd in thread-per-connection mode, behind this one
/// type (no other file imports CMicroHTTPD). It parses requests, keeps connections alive, answers
/// HEAD from the same response, and sends files with sendfile(2); the handler only decides.
///
/// libmicrohttpd calls back on its own threads: into global functions (a closure written inside
/// `@main` would be main-actor code and trap there), with this server and each request's state
/// passed through `cls` pointers (Unmanaged, retained while libmicrohttpd holds them).
public final class HTTPServer: @unchecked Sendable {
    // @unchecked: `daemon` is set once in init and cleared once in stop (under `stopLock`); the
    // handler is immutable; libmicrohttpd serialises what it calls per connection.

    public struct Request: Sendable {
        public var method: String
        public var path: String
        /// Request headers vcache acts on, names lower-cased (range, if-range, host, icy-metadata,
        /// user-agent, via).
        public var headers: [String: String]
        public var client: String
        /// The request came with a body (none is accepted).
        public var hadBody: Bool
        /// What makes the head unacceptable (RFC 9112 §3.2: no Host in HTTP/1.1, or a Host,
        /// Range or If-Range header given twice, which two parties could read differently).
        public var malformed: String? = nil
        /// The request-target's query as the client sent it (after the first `?`, still
        /// percent-encoded), nil when it had none: libmicrohttpd hands `path` without it.
        public var query: String? = nil
    }

    /// How a response ended.
    public struct Ending: Sendable {
        /// Every byte went out.
        public var completed: Bool
        /// For a file body: how many of its bytes the client got (all when completed; what TCP
        /// saw acknowledged when it left midway); nil for other bodies or where unknown.
        public var fileBytesSent: Int64?
        /// For a file body abandoned midway: true when the client was still connected (so the
        /// server stopped sending: the file could not be read), false when it had left; nil
        /// where the system cannot say.
        public var clientStayed: Bool? = nil
    }

    /// Bytes of a response body produced on demand, on the connection's thread (it may block).
    public protocol Producer: AnyObject, Sendable {
        /// Fills `buffer` with the bytes at `offset` (relative to the body's start); returns how many,
        /// or nil when the body cannot be completed (the connection is then cut).
        func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int?
        /// The response ended (completed, or the client left).
        func finished(completed: Bool)
    }

    public enum Body: @unchecked Sendable {
        // @unchecked: a RawFile is Sendable; Producer is.
        case none
        /// A span of a file, sent with sendfile(2). The server duplicates the descriptor.
        case file(RawFile, offset: Int64, length: Int64)
        case stream(length: Int64, Producer)
        /// A small body made in memory (the metrics), copied by the server.
        case bytes([UInt8])
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: Body
        /// Called once the response is done or abandoned, with whether it went out whole.
        public var completed: (@Sendable (Ending) -> Void)?

        public init(status: Int, headers: [(String, String)] = [], body: Body = .none, completed: (@Sendable (Ending) -> Void)? = nil) {
            self.status = status
            self.headers = headers
            self.body = body
            self.completed = completed
        }
    }

    public struct Limits: Sendable {
        /// Seconds a connection may stay idle.
        public var idleTimeout: UInt32 = 30
        public var connections: UInt32 = 256
        /// Connections from one client address (0: no limit; loopback players are all 127.0.0.1).
        public var perClient: UInt32 = 0
        /// Bytes for one connection's request head and buffers (a bigger head gets 431). 32 KiB:
        /// libmicrohttpd takes a pool of at most 32 KiB from `malloc`, a larger one from `mmap`,
        /// and a thread per connection then paid an `mmap`, page faults on all of it (it is zeroed)
        /// and a `munmap` (a TLB shootdown) per connection: a quarter of serve's CPU for a cached
        /// head on a new connection (Docs/performance.md). nginx's own limit is 8 KiB a line.
        public var connectionMemory = 32 * 1024
        /// Time a new connection has to send its whole request head (nginx's
        /// client_header_timeout). The idle timeout alone cannot stop a client that sends one
        /// header byte every few seconds. The next head on a kept-alive connection has `idleTimeout`.
        public var headTimeout: Duration = .seconds(10)
        public init() {}
    }

    public typealias Handler = @Sendable (Request) -> Response

    /// Descriptors a connection may cost: a cold one seven (measured by
    /// `ServeDescriptorLimitTests`): the player's socket, `data` twice (the reader's and the
    /// storing job's), the entry's folder (the job's lock), a socket to the origin and the job's
    /// libcurl socket pair; one more to spare.
    public static let descriptorsPerColdConnection = 8

    /// Connections to accept with `descriptors` open files allowed: each may cost
    /// `descriptorsPerColdConnection`, and 64 are kept for the rest; at most 1,024 (a thread each).
    /// Never more than the descriptors allow: serve must not run out of them, since libdispatch
    /// ends the process when it cannot open `/proc/<tid>/stat` for its thread-pool monitor
    /// (SIGILL, "registered worker exited prematurely"), whatever vcache's own code does with
    /// EMFILE. Below `minimumDescriptors` serve does not start.
    public static func connectionLimit(descriptors: Int) -> UInt32 {
        UInt32(max(minimumConnections, min(1024, (descriptors - 64) / descriptorsPerColdConnection)))
    }

    static let minimumConnections = 4
    /// The fewest open files serve starts with: the 64 kept for the rest and four cold connections.
    public static let minimumDescriptors = 64 + minimumConnections * descriptorsPerColdConnection

    /// libmicrohttpd's version, e.g. "0.9.75".
    public static var libraryVersion: String { MHD_get_version().map { String(cString: $0) } ?? "?" }

    let handler: Handler
    let heads: HeadDeadlines
    /// libmicrohttpd's messages about players it could not take, filtered (`ServerErrorLog`).
    private let errorLog: (@Sendable (String) -> Void)?
    private let errorLines = Locked(ServerErrorLog())
    /// Given to libmicrohttpd as its logger's context; freed once the daemon is stopped.
    private let logger = UnsafeMutablePointer<vc_mhd_logger>.allocate(capacity: 1)
    private var daemon: OpaquePointer?
    private let stopLock = MonotonicCondition()
    public private(set) var port: Int = 0

    public enum StartError: Error, CustomStringConvertible {
        case badAddress(String)
        /// The address, and errno as it was when the start failed.
        case cannotListen(String, errno: Int32)
        public var description: String {
            switch self {
            case .badAddress(let a): "'\(a)' is not an IPv4 or IPv6 address"
            case .cannotListen(let a, let code):
                "cannot listen on \(a): \(String(cString: strerror(code)))" + (code == EADDRINUSE ? " (another program uses the port; choose another with --listen)" : "")
            }
        }
    }

    /// `errorLog`: a line for each kind of player libmicrohttpd could not take (no descriptor for
    /// it, the connection limit reached), at most one a kind every 10 s.
    public init(address: String, port: UInt16, limits: Limits = Limits(), errorLog: (@Sendable (String) -> Void)? = nil,
                handler: @escaping Handler) throws {
        self.handler = handler
        self.errorLog = errorLog
        heads = HeadDeadlines(head: limits.headTimeout, next: .seconds(Int64(limits.idleTimeout)))
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let isV6: Bool
        if inet_pton(AF_INET, address, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            isV6 = false
        } else if inet_pton(AF_INET6, address, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            isV6 = true
        } else {
            throw StartError.badAddress(address)
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        logger.initialize(to: vc_mhd_logger(fn: serverErrorLine, ctx: me))
        let started: OpaquePointer? = isV6
            ? withUnsafePointer(to: &v6) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { start($0, me, limits, ipv6: true) } }
            : withUnsafePointer(to: &v4) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { start($0, me, limits, ipv6: false) } }
        guard let started else {
            let code = errno  // read at once: stopping the deadline thread may change it
            heads.stop()
            throw StartError.cannotListen("\(address):\(port)", errno: code)
        }
        daemon = started
        self.port = Int(vc_mhd_port(started))
    }

    private func start(_ addr: UnsafePointer<sockaddr>, _ me: UnsafeMutableRawPointer, _ limits: Limits, ipv6: Bool) -> OpaquePointer? {
        vc_mhd_start(addr, accessHandler, me, requestCompleted, me, notifyConnection, me, uriLog, me, limits.idleTimeout, limits.connections, limits.perClient,
                     limits.connectionMemory, 256 * 1024, ipv6 ? 1 : 0, errorLog == nil ? nil : logger)
    }

    /// Each connection's request-target as it arrived (libmicrohttpd's URI log, before it splits
    /// off the query and decodes the path), taken by the request's first access-handler call and
    /// dropped when the connection closes.
    fileprivate let rawTargets = Locked<[UInt: String]>([:])

    /// A message of libmicrohttpd's (on any of its threads).
    fileprivate func errorLine(_ message: String) {
        guard let errorLog, let line = errorLines.withLock({ $0.admit(message, at: .now) }) else { return }
        errorLog(line)
    }

    /// Stops accepting, ends open connections (waiting for their threads), and returns.
    public func stop() {
        stopLock.lock()
        defer { stopLock.unlock() }
        guard let d = daemon else { return }
        daemon = nil
        MHD_stop_daemon(d)
        heads.stop()
    }

    /// Connections cut so far for not sending their request head in time.
    public var headTimeouts: Int { heads.cut }
    /// Connections open now (players, and clients still sending their request head).
    public var openConnections: Int { heads.openCount }

    deinit {
        stop()
        logger.deallocate()
    }
}

/// libmicrohttpd's logger (`vc_mhd_log` formats the line): `ctx` is the server.
private func serverErrorLine(_ ctx: UnsafeMutableRawPointer?, _ line: UnsafePointer<CChar>?) {
    guard let ctx, let line else { return }
    Unmanaged<HTTPServer>.fromOpaque(ctx).takeUnretainedValue().errorLine(String(cString: line))
}

/// One request's state between libmicrohttpd's calls (`*con_cls`).
private final class RequestState {
    var hadBody = false
    /// The request-target's raw query (`HTTPServer.Request.query`).
    var query: String?
    var completed: (@Sendable (HTTPServer.Ending) -> Void)?
    /// A file body queued: its length, the connection's socket, the bytes the client had
    /// acknowledged then (-1: unknown), and about how many bytes the response head takes.
    var file: (length: Int64, fd: Int32, ackedBefore: Int64, head: Int64)?

    /// How the response ended: for a file body abandoned midway, how much of it the client
    /// acknowledged (TCP's count, less the head; nil where the system cannot say).
    func ending(completed: Bool) -> HTTPServer.Ending {
        guard let file else { return HTTPServer.Ending(completed: completed, fileBytesSent: nil) }
        if completed { return HTTPServer.Ending(completed: true, fileBytesSent: file.length) }
        let open = vc_tcp_peer_open(file.fd)
        let stayed: Bool? = open < 0 ? nil : open == 1
        let now = vc_tcp_bytes_acked(file.fd)
        guard now >= 0, file.ackedBefore >= 0 else { return HTTPServer.Ending(completed: false, fileBytesSent: nil, clientStayed: stayed) }
        return HTTPServer.Ending(completed: false, fileBytesSent: min(file.length, max(0, Int64(now) - file.ackedBefore - file.head)), clientStayed: stayed)
    }
}

/// The access handler: called first with no state (make it), then with body chunks (discarded),
/// then once more with none: the request is complete and the response is queued.
private func accessHandler(_ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
                           _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?,
                           _ uploadSize: UnsafeMutablePointer<Int>?, _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> MHD_Result {
    guard let cls, let connection, let state else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    if state.pointee == nil {
        // The whole head is in: its deadline is met.
        server.heads.headArrived(connection)
        let request = RequestState()
        let target = server.rawTargets.withLock { $0.removeValue(forKey: UInt(bitPattern: connection)) }
        request.query = target.flatMap { t in t.firstIndex(of: "?").map { String(t[t.index(after: $0)...]) } }
        state.pointee = Unmanaged.passRetained(request).toOpaque()
        // A request announcing a body is answered at once, without reading it: a client dripping
        // a body would otherwise hold its connection (and thread) past every head deadline.
        let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length").map { String(cString: $0) }
        let chunked = MHD_lookup_connection_value(connection, .HEADER_KIND, "Transfer-Encoding") != nil
        if chunked || (length.flatMap { Int64($0) } ?? 0) > 0 || (length != nil && Int64(length!) == nil) {
            request.hadBody = true
            return respondNow(server, connection, request, method: method, url: url, status: 400)
        }
        return .YES
    }
    let request = Unmanaged<RequestState>.fromOpaque(state.pointee!).takeUnretainedValue()
    if let uploadSize, uploadSize.pointee > 0 {
        request.hadBody = true
        uploadSize.pointee = 0  // discard it
        return .YES
    }
    var headers: [String: String] = [:]
    for (name, key) in actedOn {
        // Case-insensitive; the value is copied at once.
        if let v = MHD_lookup_connection_value(connection, .HEADER_KIND, name) { headers[key] = String(cString: v) }
    }
    var req = makeRequest(connection, method: method, url: url, headers: headers, hadBody: request.hadBody)
    req.query = request.query
    req.malformed = headProblem(connection, version: version.map { String(cString: $0) } ?? "", headers: headers)
    let response = server.handler(req)
    request.completed = response.completed
    // A head that could not be read as one request: the connection is not trusted with another.
    let outgoing = response.headers + (response.status == 400 ? [("Connection", "close")] : [])
    guard let mhd = makeResponse(response.body), add(outgoing, to: mhd) else {
        request.completed?(HTTPServer.Ending(completed: false, fileBytesSent: nil))
        request.completed = nil
        return .NO
    }
    if case .file(_, _, let length) = response.body {
        // The head as libmicrohttpd writes it: the status line, these headers, and its own
        // (Date, Content-Length, Connection), about 80 bytes.
        let head = response.headers.reduce(Int64(96)) { $0 + Int64($1.0.utf8.count + $1.1.utf8.count + 4) }
        let fd = vc_mhd_connection_fd(connection)
        request.file = (length, fd, Int64(vc_tcp_bytes_acked(fd)), head)
    }
    let queued = MHD_queue_response(connection, UInt32(response.status), mhd)
    MHD_destroy_response(mhd)  // reference-counted: the queued response lives on
    return queued
}

/// The request headers vcache acts on, as asked of libmicrohttpd and as named in `Request.headers`.
private let actedOn = [("Range", "range"), ("If-Range", "if-range"), ("Host", "host"), ("Icy-MetaData", "icy-metadata"),
                       ("User-Agent", "user-agent"), ("Via", "via")]

/// The request as the handler sees it: method, path, the headers read, the client's address.
private func makeRequest(_ connection: OpaquePointer, method: UnsafePointer<CChar>?, url: UnsafePointer<CChar>?,
                         headers: [String: String], hadBody: Bool) -> HTTPServer.Request {
    var client = [CChar](repeating: 0, count: 64)
    vc_mhd_client(connection, &client, socklen_t(client.count))
    return HTTPServer.Request(method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/",
                              headers: headers, client: String(nulTerminated: client), hadBody: hadBody)
}

/// Why a request head cannot be answered, if it cannot: a header vcache acts on given more than
/// once, or an HTTP/1.1 request without Host.
private func headProblem(_ connection: OpaquePointer, version: String, headers: [String: String]) -> String? {
    // How many of each came, any case, counted on libmicrohttpd's own strings (no String made
    // for every header of every request). No other character lower-cases to these letters.
    var counts = (host: 0, range: 0, ifRange: 0)
    withUnsafeMutablePointer(to: &counts) { p in
        _ = MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, _ in
            guard let cls, let key else { return .YES }
            let c = cls.assumingMemoryBound(to: (host: Int, range: Int, ifRange: Int).self)
            if strcasecmp(key, "Host") == 0 { c.pointee.host += 1 }
            else if strcasecmp(key, "Range") == 0 { c.pointee.range += 1 }
            else if strcasecmp(key, "If-Range") == 0 { c.pointee.ifRange += 1 }
            return .YES
        }, p)
    }
    for (name, n) in [("Host", counts.host), ("Range", counts.range), ("If-Range", counts.ifRange)] where n > 1 {
        return "more than one \(name) header"
    }
    if version.hasPrefix("HTTP/1.") && version != "HTTP/1.0" && headers["host"] == nil { return "an \(version) request without a Host header" }
    if let host = headers["host"], host.trimming(.whitespaces).isEmpty { return "an empty Host header" }
    return nil
}

/// Asks the handler for the answer to a request whose body is refused (it logs it) and queues
/// it with `Connection: close`, before any of the body is read.
private func respondNow(_ server: HTTPServer, _ connection: OpaquePointer, _ request: RequestState, method: UnsafePointer<CChar>?,
                        url: UnsafePointer<CChar>?, status: Int) -> MHD_Result {
    let req = makeRequest(connection, method: method, url: url, headers: [:], hadBody: true)
    let response = server.handler(req)
    request.completed = response.completed
    guard let mhd = MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT) else { return .NO }
    guard add(response.headers + [("Connection", "close")], to: mhd) else { return .NO }
    let queued = MHD_queue_response(connection, UInt32(response.status), mhd)
    MHD_destroy_response(mhd)
    return queued
}

/// `MHD_add_response_header` for each header; false (the response destroyed) when libmicrohttpd
/// refuses one (a value with a line break, or no memory): a response without a header it
/// should carry (`Content-Range`, `Content-Type`) is not sent, the connection is cut instead.
private func add(_ headers: [(String, String)], to mhd: OpaquePointer) -> Bool {
    for (name, value) in headers where MHD_add_response_header(mhd, name, value) != .YES {
        MHD_destroy_response(mhd)
        return false
    }
    return true
}

private func makeResponse(_ body: HTTPServer.Body) -> OpaquePointer? {
    switch body {
    case .none:
        return MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
    case .file(let file, let offset, let length):
        // libmicrohttpd owns and closes the descriptor it is given: give it a duplicate (the
        // LOCK_SH on the open file stays held until both are closed).
        let fd = dup(file.fd)
        guard fd >= 0 else { return nil }
        guard let r = MHD_create_response_from_fd_at_offset64(UInt64(length), fd, UInt64(offset)) else {
            close(fd)
            return nil
        }
        return r
    case .stream(let length, let producer):
        let box = Unmanaged.passRetained(ProducerBox(producer)).toOpaque()
        return MHD_create_response_from_callback(UInt64(length), 64 * 1024, produce, box, releaseProducer)
    case .bytes(let bytes):
        return bytes.withUnsafeBytes { MHD_create_response_from_buffer($0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY) }
    }
}

private final class ProducerBox {
    let producer: HTTPServer.Producer
    var done = false
    init(_ p: HTTPServer.Producer) { producer = p }
}

/// libmicrohttpd asks for body bytes at `pos`; this may block (thread-per-connection mode).
private func produce(_ cls: UnsafeMutableRawPointer?, _ pos: UInt64, _ buf: UnsafeMutablePointer<CChar>?, _ max: Int) -> Int {
    guard let cls, let buf else { return -2 }
    let box = Unmanaged<ProducerBox>.fromOpaque(cls).takeUnretainedValue()
    guard let n = box.producer.read(at: Int64(pos), into: UnsafeMutableRawBufferPointer(start: buf, count: max)), n > 0 else {
        return -2  // MHD_CONTENT_READER_END_WITH_ERROR: the connection is cut, never a short body
    }
    return n
}

private func releaseProducer(_ cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    Unmanaged<ProducerBox>.fromOpaque(cls).release()
}

private func requestCompleted(_ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                              _ code: MHD_RequestTerminationCode) {
    if let cls, let connection { Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().heads.responded(connection) }
    guard let state, let p = state.pointee else { return }
    state.pointee = nil
    let request = Unmanaged<RequestState>.fromOpaque(p).takeRetainedValue()
    request.completed?(request.ending(completed: code == .REQUEST_TERMINATED_COMPLETED_OK))
}

private func notifyConnection(_ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
                              _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ code: MHD_ConnectionNotificationCode) {
    guard let cls, let connection else { return }
    let heads = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().heads
    if code == .CONNECTION_NOTIFY_STARTED {
        heads.opened(connection, fd: vc_mhd_connection_fd(connection))
    } else {
        heads.closed(connection)
        _ = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().rawTargets.withLock { $0.removeValue(forKey: UInt(bitPattern: connection)) }
    }
}

/// libmicrohttpd's URI log (called with each request line's target, raw): kept for the request's
/// first access-handler call on that connection. Returns no per-request state (the access
/// handler makes it).
private func uriLog(_ cls: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?, _ connection: OpaquePointer?) -> UnsafeMutableRawPointer? {
    guard let cls, let uri, let connection else { return nil }
    let target = String(cString: uri)
    Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().rawTargets.withLock { $0[UInt(bitPattern: connection)] = target }
    return nil
}

/// Request-head deadlines. libmicrohttpd's connection timeout counts idle time, so a client that
/// sends one header byte every few seconds (slowloris) would keep its connection and its thread
/// for ever. Each connection gets a deadline for its request head: `head` from when it opens,
/// `next` after each response (a kept-alive connection waiting for its next request). A watchdog
/// thread shuts down the socket of a connection that misses it; libmicrohttpd then closes it.
/// libmicrohttpd reports a connection closed before it closes the socket, and both the report and
/// the shutdown happen under `condition`, so a descriptor is never shut down after its reuse.
final class HeadDeadlines: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.
    private let condition = MonotonicCondition()
    private var open: [OpaquePointer: (fd: Int32, deadline: ContinuousClock.Instant?)] = [:]
    private var stopping = false
    private var cutCount = 0
    private let head: Duration
    private let next: Duration

    init(head: Duration, next: Duration) {
        self.head = head
        self.next = next
        DetachedThread.start(name: "vcache-head-deadlines") { [self] in watch() }
    }

    var cut: Int { condition.lock(); defer { condition.unlock() }; return cutCount }
    var openCount: Int { condition.lock(); defer { condition.unlock() }; return open.count }

    func opened(_ c: OpaquePointer, fd: Int32) { set(c, fd: fd, deadline: .now + head) }
    func headArrived(_ c: OpaquePointer) { set(c, fd: nil, deadline: nil) }
    func responded(_ c: OpaquePointer) { set(c, fd: nil, deadline: .now + next) }

    func closed(_ c: OpaquePointer) {
        condition.lock()
        open[c] = nil
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func set(_ c: OpaquePointer, fd: Int32?, deadline: ContinuousClock.Instant?) {
        condition.lock()
        if let fd {
            open[c] = (fd, deadline)
        } else if open[c] != nil {
            open[c]!.deadline = deadline
        }
        condition.unlock()
    }

    private func watch() {
        condition.lock()
        defer { condition.unlock() }
        while !stopping {
            let now = ContinuousClock.now
            for (c, entry) in open {
                guard let d = entry.deadline, d <= now, entry.fd >= 0 else { continue }
                shutdown(entry.fd, Int32(SHUT_RDWR))
                open[c]!.deadline = nil
                cutCount += 1
            }
            _ = condition.wait(seconds: 0.25)
        }
    }
}

