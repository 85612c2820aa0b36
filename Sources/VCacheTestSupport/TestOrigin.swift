#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
import VCacheCore

/// An in-process HTTP/1.1 origin on 127.0.0.1 with fault knobs, for what nginx cannot do:
/// dropped connections, wrong Content-Range, changed ETags, 200 instead of 206, error statuses,
/// stalled and throttled bodies, redirects. Counts every body byte it sends, per path.
public final class TestOrigin: Sendable {
    public struct Resource: Sendable {
        public var body: Data
        public var etag: String?
        public var lastModified: String?
        public var contentType: String
        /// More headers on every answer (e.g. `Content-Encoding: gzip` from a misbehaving origin).
        public var extraHeaders: [String: String] = [:]
        /// Header lines added as given, after the others, on every 200 and 206: a name may repeat
        /// (two `x-goog-hash` lines, say), and nothing is checked (a hostile origin's values).
        public var headerLines: [(String, String)] = []

        public init(body: Data, etag: String? = nil, lastModified: String? = nil, contentType: String = "video/mp4", extraHeaders: [String: String] = [:],
                    headerLines: [(String, String)] = []) {
            self.extraHeaders = extraHeaders
            self.headerLines = headerLines
            self.body = body
            self.etag = etag
            self.lastModified = lastModified
            self.contentType = contentType
        }
    }

    public struct Faults: Sendable {
        /// Close the connection after this many body bytes, for the next `dropCount` responses.
        public var dropAfterBytes: Int?
        public var dropCount = 1
        /// Answer ranged requests with 200 and the whole body.
        public var ignoreRanges = false
        /// Add this to the start and end announced in Content-Range (the body is still the asked bytes).
        public var contentRangeShift: Int64 = 0
        /// Served first, one per request, before normal answers resume: e.g. `(503, [:])`, `(429, ["Retry-After": "1"])`;
        /// a code of 0 is one normal answer (to which `dropAfterBytes` etc. still apply).
        public var statuses: [(Int, [String: String])] = []
        /// Stop sending after this many body bytes and hold the connection open.
        public var stallAfterBytes: Int?
        /// Throttle bodies to about this many bytes per second.
        public var bytesPerSecond: Int?
        /// Serve the range even when If-Range names another version (a non-conforming origin).
        public var ignoreIfRange = false
        /// Answer 302 with this Location.
        public var redirectTo: String?
        /// Answer 403 to a request whose query string is not this one (a signed URL whose token
        /// expired: the query is otherwise ignored).
        public var requiredQuery: String?
        /// Answer every GET with 200, `Transfer-Encoding: chunked` and no Content-Length, ignoring
        /// Range (a live transcoder, some CDNs and object stores).
        public var chunkedWithoutLength = false
        /// Answer every GET with 200, `Connection: close`, no Content-Length and not chunked,
        /// ignoring Range: the body ends where the connection closes (an HTTP/1.0-style origin),
        /// so a `dropAfterBytes` cut looks exactly like its end.
        public var closeDelimited = false
        /// Each answer carries the next of these ETags in turn (two backends behind a balancer).
        public var rotateETags: [String] = []
        /// Claim this length in Content-Range (a hostile origin: near 2^63); a range answers with
        /// at most 64 KiB of it, zeros past the real body.
        public var announcedLength: Int64?

        public init() {}
    }

    private struct State {
        var resources: [String: Resource] = [:]
        var faults: [String: Faults] = [:]
        var served: [String: [ByteRange]] = [:]
        var servedTotal: [String: Int] = [:]
        var requests: [String: [String?]] = [:]
        var queries: [String: [String]] = [:]

        var headers: [String: [[String: String]]] = [:]
        var connections: Set<Int32> = []
        /// `hold`: a response that began below this offset of the path stops there until `release`.
        var holds: [String: Int64] = [:]
        /// Responses waiting at a hold, per path.
        var held: [String: Int] = [:]
        var accepted = 0
        var stopped = false
    }

    private let state = Locked(State())
    private let changed = Condition()
    private let listener: Int32
    public let port: Int
    public let address: String

    /// `address`: the loopback address to listen on (127.0.0.2 stands for another host).
    public init(address: String = "127.0.0.1") throws {
        let fd = socket(AF_INET, Sockets.stream, 0)
        guard fd >= 0 else { throw SystemError("create socket", path: "127.0.0.1", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(address)
        addr.sin_port = 0
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 64) == 0 else { close(fd); throw SystemError("listen", path: address, errno: errno) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        listener = fd
        self.address = address
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    public var baseURL: String { "http://\(address):\(port)" }
    public func url(_ path: String) -> String { baseURL + path }

    public func setResource(_ path: String, _ resource: Resource) { state.withLock { $0.resources[path] = resource } }
    public func setFaults(_ path: String, _ faults: Faults) { state.withLock { $0.faults[path] = faults } }

    /// Serves `path` at about `bytesPerSecond` (nil: full speed again), keeping its other faults.
    public func throttle(_ path: String, to bytesPerSecond: Int?) {
        state.withLock { $0.faults[path, default: Faults()].bytesPerSecond = bytesPerSecond }
    }

    /// Body bytes sent for `path`, counting repeats.
    public func servedBytes(_ path: String) -> Int { state.withLock { $0.servedTotal[path] ?? 0 } }

    /// Bytes sent for `path` more than once (0 when no byte was served twice).
    public func bytesServedTwice(_ path: String) -> Int64 {
        state.withLock { s in
            let list = s.served[path] ?? []
            let total = list.reduce(Int64(0)) { $0 + $1.count }
            return total - RangeSet(list).count
        }
    }

    /// The Range header of each request for `path`, in order (nil: none).
    /// Connections accepted so far (a client that connected and sent nothing counts too).
    public var acceptedConnections: Int { state.withLock { $0.accepted } }

    /// Connections open now (a client's that it has not closed, or that this origin is still serving).
    public var openConnections: Int { state.withLock { $0.connections.count } }

    /// Waits until at most `count` connections are open, up to `seconds`; whether it came.
    public func waitForOpenConnections(atMost count: Int, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while openConnections > count {
            if Date() >= deadline { return false }
            changed.wait(until: deadline)
        }
        return true
    }

    public func requests(_ path: String) -> [String?] { state.withLock { $0.requests[path] ?? [] } }

    /// The query string of each request for `path` (without `?`; empty when none), in order.
    public func queries(_ path: String) -> [String] { state.withLock { $0.queries[path] ?? [] } }

    /// Each request's headers for `path` (names lower-cased), in order.
    public func headers(_ path: String) -> [[String: String]] { state.withLock { $0.headers[path] ?? [] } }

    /// Stops every response of `path` that began below `offset` when it gets there (the
    /// connection stays open, sending nothing) until `release`: a transfer held mid-way for as
    /// long as the test needs, whatever the scheduler does. A response that begins at or past
    /// `offset` (a player's seek) is not held.
    public func hold(_ path: String, at offset: Int) {
        state.withLock { $0.holds[path] = Int64(offset) }
        changed.broadcast()
    }

    /// Lets the held responses of `path` go on.
    public func release(_ path: String) {
        state.withLock { $0.holds[path] = nil }
        changed.broadcast()
    }

    /// Blocks until a response of `path` waits at its hold, or `timeout` passes.
    public func waitUntilHeld(_ path: String, timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while state.withLock({ $0.held[path] ?? 0 }) == 0 {
            if Date() >= deadline { return false }
            changed.wait(until: deadline)
        }
        return true
    }

    /// Blocks until at least `bytes` body bytes of `path` were sent, or `timeout` passes.
    public func waitUntilServed(_ path: String, atLeast bytes: Int, timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while servedBytes(path) < bytes {
            if Date() >= deadline { return false }
            changed.wait(until: deadline)
        }
        return true
    }

    /// Shuts the listener and every connection down, once (`deinit` stops again), under the lock
    /// their descriptors are closed under: a descriptor is never shut down after its number went
    /// to another socket of the process (another test's origin or download, which would see its
    /// connection die, or every connection refused).
    public func stop() {
        state.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in s.connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        changed.broadcast()
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if isStopped { break }
                // Not stopped: a connection reset before it was accepted, or no descriptor free
                // for a moment (EMFILE). The listener stays; only `stop` ends it.
                if errno != EINTR { usleep(10_000) }
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let accepted = state.withLock { s -> Bool in
                if s.stopped { return false }
                s.connections.insert(fd)
                s.accepted += 1
                return true
            }
            guard accepted else { close(fd); break }
            Thread.detachNewThread { [self] in
                serve(fd)
                state.withLock { s in
                    s.connections.remove(fd)
                    close(fd)
                }
                changed.broadcast()
            }
        }
        // Stopped: `stop` shut it down under the lock, and no one else closes it.
        state.withLock { _ in _ = close(listener) }
    }

    // MARK: - One connection

    private func serve(_ fd: Int32) {
        var buffer = [UInt8]()
        while !isStopped {
            guard let head = readHead(fd, &buffer) else { return }
            guard respond(fd, head) else { return }
        }
    }

    private func readHead(_ fd: Int32, _ buffer: inout [UInt8]) -> [String]? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = Self.headEnd(buffer) {
                let text = String(decoding: buffer[0..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                return text.components(separatedBy: "\r\n")
            }
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
    }

    private static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }

    /// Returns false when the connection must close.
    private func respond(_ fd: Int32, _ lines: [String]) -> Bool {
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2 else { return false }
        let method = String(parts[0])
        // Resources, faults and counters are per path; the query (signed-URL tokens) is ignored.
        // A proxy request names the whole URL (absolute form): serve its path, as a proxy would.
        var requestTarget = Substring(parts[1])
        if requestTarget.hasPrefix("http://"), let slash = requestTarget.dropFirst(7).firstIndex(of: "/") { requestTarget = requestTarget[slash...] }
        let target = requestTarget.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(target[0])
        let query = target.count > 1 ? String(target[1]) : ""
        var headers: [String: String] = [:]
        for l in lines.dropFirst() {
            guard let c = l.firstIndex(of: ":") else { continue }
            headers[l[..<c].lowercased()] = l[l.index(after: c)...].trimmingCharacters(in: .whitespaces)
        }
        let range = headers["range"]
        // Take this request's faults (consuming one-shot ones) under the lock.
        let (resource, faults, status, nth): (Resource?, Faults, (Int, [String: String])?, Int) = state.withLock { s in
            s.requests[path, default: []].append(range)
            s.queries[path, default: []].append(query)
            s.headers[path, default: []].append(headers)
            var f = s.faults[path] ?? Faults()
            var st: (Int, [String: String])?
            if !f.statuses.isEmpty { st = f.statuses.removeFirst() }
            let current = f
            if f.dropAfterBytes != nil && (st == nil || st?.0 == 0) {
                f.dropCount -= 1
                if f.dropCount <= 0 { f.dropAfterBytes = nil }
            }
            s.faults[path] = f
            return (s.resources[path], current, st, s.requests[path, default: []].count - 1)
        }
        if let (code, extra) = status, code != 0 {
            return send(fd, status: code, headers: extra.merging(["Content-Length": "0"]) { a, _ in a }, body: nil, method: method, path: path, faults: Faults())
        }
        if let required = faults.requiredQuery, query != required {
            return send(fd, status: 403, headers: ["Content-Length": "0"], body: nil, method: method, path: path, faults: Faults())
        }
        if let target = faults.redirectTo {
            return send(fd, status: 302, headers: ["Location": target, "Content-Length": "0"], body: nil, method: method, path: path, faults: Faults())
        }
        guard let resource else {
            return send(fd, status: 404, headers: ["Content-Length": "0"], body: nil, method: method, path: path, faults: Faults())
        }
        let total = faults.announcedLength ?? Int64(resource.body.count)
        var common: [String: String] = ["Content-Type": resource.contentType, "Accept-Ranges": "bytes"]
        for (k, v) in resource.extraHeaders { common[k] = v }
        if let e = resource.etag { common["ETag"] = e }
        if !faults.rotateETags.isEmpty { common["ETag"] = faults.rotateETags[nth % faults.rotateETags.count] }
        if let lm = resource.lastModified { common["Last-Modified"] = lm }

        var wantRange = range.flatMap { Self.parseRange($0, total: total) }
        if let inm = headers["if-none-match"], inm == resource.etag {
            return send(fd, status: 304, headers: common.merging(["Content-Length": "0"]) { a, _ in a }, body: nil, method: method, path: path, faults: Faults())
        }
        if !faults.ignoreIfRange, let ifRange = headers["if-range"], ifRange != resource.etag && ifRange != resource.lastModified { wantRange = nil }
        let wholeOnly = faults.ignoreRanges || faults.chunkedWithoutLength || faults.closeDelimited
        if wholeOnly { wantRange = nil }
        if range != nil && wantRange == nil && !wholeOnly && headers["if-range"] == nil {
            return send(fd, status: 416, headers: ["Content-Range": "bytes */\(total)", "Content-Length": "0"], body: nil, method: method, path: path, faults: Faults())
        }
        if var r = wantRange {
            if faults.announcedLength != nil { r = ByteRange(r.lowerBound, min(r.upperBound, r.lowerBound &+ 65_536 < r.lowerBound ? .max : r.lowerBound + 65_536)) }
            var h = common
            h["Content-Range"] = "bytes \(r.lowerBound + faults.contentRangeShift)-\(r.upperBound - 1 + faults.contentRangeShift)/\(total)"
            h["Content-Length"] = "\(r.count)"
            return send(fd, status: 206, headers: h, lines: resource.headerLines, body: (resource.body, r), method: method, path: path, faults: faults)
        }
        var h = common
        if faults.chunkedWithoutLength {
            h["Accept-Ranges"] = nil
            h["Transfer-Encoding"] = "chunked"
            return send(fd, status: 200, headers: h, lines: resource.headerLines, body: (resource.body, ByteRange(0, total)), method: method, path: path, faults: faults, chunked: true)
        }
        if faults.closeDelimited {
            h["Accept-Ranges"] = nil
            h["Connection"] = "close"
            _ = send(fd, status: 200, headers: h, lines: resource.headerLines, body: (resource.body, ByteRange(0, total)), method: method, path: path, faults: faults)
            return false
        }
        h["Content-Length"] = "\(total)"
        return send(fd, status: 200, headers: h, lines: resource.headerLines, body: (resource.body, ByteRange(0, total)), method: method, path: path, faults: faults)
    }

    /// `bytes=a-b`, `bytes=a-`, `bytes=-n`; nil when unsatisfiable or malformed.
    static func parseRange(_ header: String, total: Int64) -> ByteRange? {
        guard header.hasPrefix("bytes=") else { return nil }
        let spec = header.dropFirst(6)
        let ends = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard ends.count == 2 else { return nil }
        if ends[0].isEmpty {
            guard let n = Int64(ends[1]), n > 0, total > 0 else { return nil }
            return ByteRange(max(0, total - n), total)
        }
        guard let a = Int64(ends[0]), a < total else { return nil }
        let b = ends[1].isEmpty ? total - 1 : min(Int64(ends[1]) ?? -1, total - 1)
        guard b >= a else { return nil }
        return ByteRange(a, b + 1)
    }

    private func send(_ fd: Int32, status: Int, headers: [String: String], lines: [(String, String)] = [], body: (Data, ByteRange)?, method: String, path: String,
                      faults: Faults, chunked: Bool = false) -> Bool {
        var head = "HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n"
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) { head += "\(k): \(v)\r\n" }
        for (k, v) in lines { head += "\(k): \(v)\r\n" }
        head += "\r\n"
        guard writeAll(fd, Array(head.utf8)) else { return false }
        guard method != "HEAD", let (data, range) = body else { return true }
        var offset = range.lowerBound
        var sent = 0
        let chunk = faults.bytesPerSecond.map { max(1024, min(64 * 1024, $0 / 20)) } ?? 256 * 1024
        while offset < range.upperBound {
            if isStopped { return false }
            var n = Int(min(Int64(chunk), range.upperBound - offset))
            if let drop = faults.dropAfterBytes { n = min(n, drop - sent) }
            if let stall = faults.stallAfterBytes { n = min(n, stall - sent) }
            if let at = state.withLock({ $0.holds[path] }), range.lowerBound < at {
                if offset >= at {
                    waitWhileHeld(path, began: range.lowerBound, at: offset)
                    continue
                }
                n = min(n, Int(at - offset))
            }
            if n <= 0 {
                if faults.stallAfterBytes != nil { holdUntilClosed(fd) }
                return false
            }
            if chunked && !writeAll(fd, Array(String(n, radix: 16).utf8) + [13, 10]) { return false }
            let ok = offset + Int64(n) <= Int64(data.count)
                ? data.withUnsafeBytes { raw in writeAll(fd, UnsafeRawBufferPointer(rebasing: raw[Int(offset)..<Int(offset) + n])) }
                : writeAll(fd, [UInt8](repeating: 0, count: n))  // past the body of an announced length
            guard ok, !chunked || writeAll(fd, [13, 10]) else { return false }
            state.withLock { s in
                s.served[path, default: []].append(ByteRange(offset, offset + Int64(n)))
                s.servedTotal[path, default: 0] += n
            }
            changed.broadcast()
            offset += Int64(n)
            sent += n
            if let rate = faults.bytesPerSecond { usleep(UInt32(Double(n) / Double(rate) * 1_000_000)) }
        }
        if chunked { return writeAll(fd, Array("0\r\n\r\n".utf8)) }
        return true
    }

    /// Waits while a hold of `path` stops a response that began at `began` and got to `offset`.
    private func waitWhileHeld(_ path: String, began: Int64, at offset: Int64) {
        func holding() -> Bool { state.withLock { s in s.holds[path].map { began < $0 && offset >= $0 } ?? false } }
        state.withLock { $0.held[path, default: 0] += 1 }
        changed.broadcast()
        while holding() && !isStopped { changed.wait(until: Date().addingTimeInterval(1)) }
        state.withLock { $0.held[path, default: 1] -= 1 }
    }

    private func holdUntilClosed(_ fd: Int32) {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var scratch = [UInt8](repeating: 0, count: 512)
        while !isStopped {
            if poll(&p, 1, 100) > 0 {
                if recv(fd, &scratch, scratch.count, 0) <= 0 { return }
            }
        }
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    private func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var done = 0
        while done < raw.count {
            let n = Sockets.send(fd, raw.baseAddress! + done, raw.count - done)
            if n < 0 { if errno == EINTR { continue }; return false }
            done += n
        }
        return true
    }
}

/// A condition variable for "something changed" waits in test helpers.
final class Condition: @unchecked Sendable {
    // NSCondition is thread-safe; it lacks the Sendable annotation on Linux.
    private let c = NSCondition()
    func wait(until deadline: Date) {
        c.lock()
        _ = c.wait(until: min(deadline, Date().addingTimeInterval(0.2)))
        c.unlock()
    }
    func broadcast() {
        c.lock()
        c.broadcast()
        c.unlock()
    }
}
