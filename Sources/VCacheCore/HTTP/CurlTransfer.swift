import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transfer's owner hears, always on the thread running `Fetcher.run`.
public protocol TransferDelegate: AnyObject {
    /// The final response head (after redirects), before any body byte.
    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision
    /// A piece of body (at most 16 KiB, CURL_MAX_WRITE_SIZE). Return false to stop the transfer.
    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool
    /// The transfer ended. `error` is nil when the body arrived whole or the delegate stopped it.
    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?)
    /// Before each piece of body: true holds the transfer (libcurl keeps the bytes) until
    /// `Fetcher.release(_:)`, e.g. while the disk catches up with the checkpoints.
    func transferShouldWait(_ transfer: CurlTransfer) -> Bool
}

extension TransferDelegate {
    public func transferShouldWait(_ transfer: CurlTransfer) -> Bool { false }
}

/// What to do with a response once its head is judged.
public enum HeadDecision: Sendable {
    /// Deliver the body.
    case proceed
    /// End the transfer now; nothing of the body is delivered.
    case stop
    /// Hold the body (libcurl keeps it) until `Fetcher.release(_:)`: slow work such as dropping an
    /// old version runs off the loop meanwhile, and no other transfer waits for it.
    case hold
}

/// One GET on one libcurl easy handle. Created per request (options never leak between
/// requests); connections are pooled by the multi handle in `Fetcher`.
public final class CurlTransfer {
    let easy: UnsafeMutableRawPointer
    public let url: String
    public let range: String?
    private(set) weak var delegate: TransferDelegate?
    private let headerList: UnsafeMutablePointer<curl_slist>?
    private let resolveList: UnsafeMutablePointer<curl_slist>?
    private var headerLines: [String] = []
    private(set) var head: ResponseHead?
    private(set) var stoppedByDelegate = false
    /// When a header or body byte last arrived (or the request started): the stall clock.
    private(set) var lastActivity = ContinuousClock.now
    /// No byte for this long and the Fetcher abandons the transfer.
    let stallTimeout: Duration
    /// The run's shared bucket, when the total rate is capped (`Fetcher.add` hands it over).
    private(set) var limiter: RateLimiter?
    /// Why the body waits, if it does: libcurl was told to pause it.
    enum Waiting {
        /// Paused because the bucket was empty; the Fetcher resumes it when there are tokens.
        case forTokens
        /// Held by its delegate (`HeadDecision.hold`) until `Fetcher.release(_:)`; no stall clock meanwhile.
        case heldByDelegate
    }
    private(set) var waiting: Waiting?
    var paused: Bool { waiting == .forTokens }
    var held: Bool { waiting == .heldByDelegate }
    /// The only origins this transfer may reach, redirects included (`RequestOptions.allowedOrigins`).
    private let allowedOrigins: AllowedOrigins?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    /// Shared with the shim's socket and request callbacks: the errno of a socket(2) that failed
    /// (0: none did), which libcurl does not report, and whether a URL not allowed was refused.
    private let slot = UnsafeMutablePointer<vc_transfer_slot>.allocate(capacity: 1)

    /// `range` is the HTTP form without `bytes=` (`0-99`, `100-`, `-500`); `ifRange` a validator.
    public init(url: String, range: String?, ifRange: String?, options: RequestOptions, delegate: TransferDelegate) throws {
        guard let easy = curl_easy_init() else { throw TransportError(kind: .other, message: "curl_easy_init failed", code: -1) }
        self.easy = easy
        self.url = url
        self.range = range
        self.delegate = delegate
        stallTimeout = .milliseconds(Checked.int64(options.stallTimeout * 1000, clampedTo: 50...Fetcher.longestWaitMilliseconds) ?? 30_000)
        allowedOrigins = options.allowedOrigins
        errorBuffer.initialize(to: 0)
        slot.initialize(to: vc_transfer_slot(socket_errno: 0, refused: 0, easy: nil, allow: nil, allow_context: nil))
        // Only the video's own bytes are stored: no encoding is asked for (an origin that encodes
        // anyway is refused by ResponseJudge).
        var lines = options.headers + ["Accept-Encoding: identity"]
        if let ifRange, range != nil { lines.append("If-Range: \(ifRange)") }
        headerList = Self.slist(lines)
        resolveList = Self.slist(options.resolve)
        try set(vc_easy_setopt_str(easy, CURLOPT_URL, url), "CURLOPT_URL")
        try set(vc_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer), "CURLOPT_ERRORBUFFER")
        try set(vc_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        try set(vc_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https"), "CURLOPT_PROTOCOLS_STR")
        try set(vc_easy_setopt_str(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"), "CURLOPT_REDIR_PROTOCOLS_STR")
        try set(vc_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1), "CURLOPT_FOLLOWLOCATION")
        try set(vc_easy_setopt_long(easy, CURLOPT_MAXREDIRS, options.maxRedirects), "CURLOPT_MAXREDIRS")
        try set(vc_easy_setopt_str(easy, CURLOPT_USERAGENT, options.userAgent), "CURLOPT_USERAGENT")
        try set(vc_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(Checked.int64(options.connectTimeout * 1000, clampedTo: 0...Fetcher.longestWaitMilliseconds) ?? 15_000)), "CURLOPT_CONNECTTIMEOUT_MS")
        // Stalls are timed by the Fetcher from `lastActivity`: curl's LOW_SPEED_TIME averages over
        // a window of several seconds, so it fires late after a fast start.
        try set(vc_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 256 * 1024), "CURLOPT_BUFFERSIZE")
        try set(vc_easy_setopt_str(easy, CURLOPT_ACCEPT_ENCODING, nil), "CURLOPT_ACCEPT_ENCODING")  // byte offsets must be the file's own
        if let rate = options.maxReceiveRate, rate > 0 {
            try set(vc_easy_setopt_off(easy, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate)), "CURLOPT_MAX_RECV_SPEED_LARGE")
        }
        if let range { try set(vc_easy_setopt_str(easy, CURLOPT_RANGE, range), "CURLOPT_RANGE") }
        if options.ownConnection { try set(vc_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)), "CURLOPT_HTTP_VERSION") }
        if let ca = options.caFile { try set(vc_easy_setopt_str(easy, CURLOPT_CAINFO, ca), "CURLOPT_CAINFO") }
        if let proxy = options.proxy { try set(vc_easy_setopt_str(easy, CURLOPT_PROXY, proxy), "CURLOPT_PROXY") }
        if let v = options.ipVersion { try set(vc_easy_setopt_long(easy, CURLOPT_IPRESOLVE, v == 6 ? Int(CURL_IPRESOLVE_V6) : Int(CURL_IPRESOLVE_V4)), "CURLOPT_IPRESOLVE") }
        if let netrc = options.netrcFile {
            try set(vc_easy_setopt_str(easy, CURLOPT_NETRC_FILE, netrc), "CURLOPT_NETRC_FILE")
            try set(vc_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue)), "CURLOPT_NETRC")
        }
        if resolveList != nil { try set(vc_easy_setopt_slist(easy, CURLOPT_RESOLVE, resolveList), "CURLOPT_RESOLVE") }
        if headerList != nil { try set(vc_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList), "CURLOPT_HTTPHEADER") }

        // The callbacks get this object through WRITEDATA/HEADERDATA as an unretained pointer.
        // Safe: the Fetcher keeps the transfer alive while the easy handle is in the multi handle,
        // and libcurl calls back only from curl_multi_perform on the Fetcher's thread.
        let me = Unmanaged.passUnretained(self).toOpaque()
        if allowedOrigins != nil {
            slot.pointee.allow_context = me
            slot.pointee.allow = { context, url in
                let t = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
                guard let url, let allowed = t.allowedOrigins, let target = OriginTarget.of(String(cString: url)) else { return 0 }
                return allowed.allows(target) ? 1 : 0
            }
        }
        try set(vc_easy_set_transfer_slot(easy, slot), "CURLOPT_OPENSOCKETFUNCTION")
        try set(vc_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me), "CURLOPT_WRITEDATA")
        try set(vc_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me), "CURLOPT_HEADERDATA")
        try set(vc_easy_setopt_datacb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let t = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
            return t.receiveBody(UnsafeRawBufferPointer(start: ptr, count: size * count))
        }, "CURLOPT_WRITEFUNCTION")
        try set(vc_easy_setopt_datacb(easy, CURLOPT_HEADERFUNCTION) { ptr, size, count, user in
            let t = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
            t.receiveHeaderLine(UnsafeRawBufferPointer(start: ptr, count: size * count))
            return size * count
        }, "CURLOPT_HEADERFUNCTION")
    }

    /// `curl_slist_append` of each line (nil for none). A line it could not copy (no memory)
    /// would be a header silently missing, so that ends the process as any allocation failure.
    private static func slist(_ lines: [String]) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let longer = curl_slist_append(list, line) else { fatalError("curl_slist_append: out of memory") }
            list = longer
        }
        return list
    }

    /// A setting libcurl refused: the transfer must not run without it (the protocol allow-list
    /// above all), so the request fails with the option's name and libcurl's reason.
    private func set(_ rc: CURLcode, _ option: StaticString) throws {
        guard rc == CURLE_OK else {
            throw TransportError(kind: .other, message: "this libcurl refused \(option): \(String(cString: curl_easy_strerror(rc)))", code: Int(rc.rawValue))
        }
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        curl_slist_free_all(resolveList)
        errorBuffer.deallocate()
        slot.deallocate()
    }

    private func receiveHeaderLine(_ raw: UnsafeRawBufferPointer) {
        lastActivity = ContinuousClock.now
        let line = String(decoding: raw, as: UTF8.self).trimming(.whitespacesAndNewlines)
        // Each response (1xx, redirects, the final one) starts with a status line: keep only the last.
        if line.hasPrefix("HTTP/") { headerLines = [] }
        if !line.isEmpty { headerLines.append(line) }
    }

    private func makeHead() -> ResponseHead {
        var code = 0
        // A status libcurl cannot give stays 0, which ResponseJudge refuses as no HTTP answer.
        if vc_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK { code = 0 }
        var effective: UnsafeMutablePointer<CChar>?
        if vc_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective) != CURLE_OK { effective = nil }
        var reason = ""
        var version = "HTTP/1.1"
        var headers: [(String, String)] = []
        for (i, line) in headerLines.enumerated() {
            if i == 0 && line.hasPrefix("HTTP/") {
                let parts = line.split(separator: " ", maxSplits: 2)
                version = String(parts[0])
                if parts.count == 3 { reason = String(parts[2]) }
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimming(.whitespaces)))
        }
        if reason.isEmpty { reason = HTTPStatus.reason(code) }
        var head = ResponseHead(status: code, reason: reason, headers: headers, effectiveURL: effective.map { String(cString: $0) } ?? url)
        head.version = version
        return head
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        lastActivity = ContinuousClock.now
        if head == nil {
            let h = makeHead()
            head = h
            switch delegate?.transferDidReceiveHead(self, head: h) ?? .stop {
            case .proceed: break
            case .stop:
                stoppedByDelegate = true
                return 0
            case .hold:
                waiting = .heldByDelegate
                return Int(CURL_WRITEFUNC_PAUSE)  // libcurl delivers these bytes again on release
            }
        }
        if delegate?.transferShouldWait(self) == true {
            waiting = .heldByDelegate
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        if let limiter, !limiter.take(bytes.count) {
            waiting = .forTokens
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        if delegate?.transferDidReceive(self, bytes: bytes) != true {
            stoppedByDelegate = true
            return 0
        }
        return bytes.count
    }

    /// Called by the Fetcher as it starts the transfer: the run's rate bucket, if any.
    func share(_ limiter: RateLimiter?) { self.limiter = limiter }

    /// Called by the Fetcher when libcurl reports the transfer done.
    func complete(code: CURLcode) {
        var error: TransportError?
        if code != CURLE_OK && !stoppedByDelegate {
            error = transportError(code)
        }
        if head == nil && error == nil && !stoppedByDelegate {
            // No body at all (an empty 200/206, or an error status without a body): the head
            // still has to be judged before the transfer counts as done.
            // A hold is not possible here (no body to hold): the delegate finishes its work in
            // `transferDidComplete`.
            let h = makeHead()
            head = h
            if delegate?.transferDidReceiveHead(self, head: h) != .proceed { stoppedByDelegate = true }
        }
        delegate?.transferDidComplete(self, head: head, error: error)
    }

    /// Called by the Fetcher when the bucket has tokens again, or the delegate releases a hold.
    /// `curl_easy_pause(CURLPAUSE_CONT)`; its error, if libcurl could not resume the transfer.
    /// libcurl hands over the bytes it kept from inside this call: a delegate that stops the
    /// transfer there makes it fail with a write error, which is that stop (the multi handle
    /// reports the transfer done, as for any stop), not a failure.
    func resume() -> TransportError? {
        waiting = nil
        lastActivity = ContinuousClock.now
        let rc = curl_easy_pause(easy, CURLPAUSE_CONT)
        guard rc == CURLE_OK || stoppedByDelegate else {
            return TransportError(kind: .other, message: "libcurl could not resume the transfer: \(String(cString: curl_easy_strerror(rc)))", code: Int(rc.rawValue))
        }
        return nil
    }

    /// Called by the Fetcher when it abandons the transfer (a stall).
    func fail(_ error: TransportError) {
        delegate?.transferDidComplete(self, head: head, error: error)
    }

    private func transportError(_ code: CURLcode) -> TransportError {
        if slot.pointee.refused != 0 {
            // A redirect to an origin not allowed (curl would say "Couldn't connect" or "aborted
            // by callback"): say where it led and what to do.
            var location: UnsafeMutablePointer<CChar>?
            if vc_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &location) != CURLE_OK { location = nil }
            let url = location.map { String(cString: $0) } ?? "another URL"
            // The origin chooses its length: a log line names at most 1,000 characters of it.
            let to = url.count > 1000 ? url.prefix(1000) + "…" : url
            // No target: refused for what the URL holds, not for its host (which may be allowed).
            guard let target = OriginTarget.of(url) else {
                return TransportError(kind: .redirectRefused,
                                      message: "the origin redirected to \(to), a URL serve does not contact (credentials that decode to a control character, or a URL libcurl refuses)",
                                      code: Int(code.rawValue))
            }
            var refused = TransportError(kind: .redirectRefused,
                                         message: "the origin redirected to \(to), an origin --allow-host does not allow; add --allow-host \(target) if serve may contact it",
                                         code: Int(code.rawValue))
            refused.redirectedTo = target
            return refused
        }
        let buffered = String(cString: errorBuffer)
        var message = buffered.isEmpty ? String(cString: curl_easy_strerror(code)) : buffered
        // No descriptor for a socket: this process's limit (or the system's), not the origin.
        let socketErrno = slot.pointee.socket_errno
        if code == CURLE_COULDNT_CONNECT, socketErrno == EMFILE || socketErrno == ENFILE {
            message = "cannot open a socket: \(String(cString: strerror(socketErrno)))"
        }
        let kind: TransportError.Kind
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: kind = .resolve
        case CURLE_COULDNT_CONNECT: kind = .connect
        // vcache sets no low-speed limit (the Fetcher times stalls itself): a libcurl timeout is the connect timeout.
        case CURLE_OPERATION_TIMEDOUT: kind = .timeout
        case CURLE_PARTIAL_FILE: kind = .partialBody
        case CURLE_UNSUPPORTED_PROTOCOL: kind = .refusedScheme
        case CURLE_TOO_MANY_REDIRECTS: kind = .tooManyRedirects
        case CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM: kind = .receive
        default: kind = .other
        }
        return TransportError(kind: kind, message: message, code: Int(code.rawValue))
    }
}

public enum HTTPStatus {
    public static func reason(_ code: Int) -> String {
        switch code {
        case 200: "OK"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 508: "Loop Detected"
        default: ""
        }
    }
}
