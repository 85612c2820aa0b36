#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One GET of a small body (at most `limit` bytes): `vcache status` asking a running serve for its
/// counters (no proxy, no redirects), serve fetching a playlist fresh. Nil when nothing answered
/// whole.
public enum SmallGet {
    public struct Answer: Sendable {
        public var status: Int
        public var body: Data
        /// The URL that answered, after redirects (what a playlist's relative URIs resolve against).
        public var finalURL: String
        public var contentType: String?
        public var etag: String? = nil
        public var lastModified: String? = nil
        /// The answer's Content-Range (a 206 to `fetch`'s `range`).
        public var contentRange: String? = nil
    }

    public static func get(_ url: String, timeout: Double = 2, limit: Int = 1 << 20) -> (status: Int, body: Data)? {
        var o = RequestOptions()
        o.proxy = ""  // never through http_proxy: this asks a server on this machine
        o.maxRedirects = 0
        o.connectTimeout = timeout
        o.stallTimeout = timeout
        return get(url, options: o, limit: limit).map { ($0.status, $0.body) }
    }

    /// With the caller's origin options (headers, proxy, CA, redirects). Nil when nothing
    /// answered whole, the body over `limit` included.
    public static func get(_ url: String, options o: RequestOptions, limit: Int) -> Answer? {
        if case .answer(let a) = fetch(url, options: o, limit: limit) { return a }
        return nil
    }

    public enum Outcome: Sendable {
        case answer(Answer)
        /// The body is longer than the limit (said by its Content-Length, or found as it came):
        /// the transfer was stopped there, nothing of it kept.
        case tooLarge
        /// Nothing answered whole (no connection, a cut body).
        case failed
    }

    /// `get`, saying when the body was over `limit`: memory never holds more than `limit` bytes
    /// of it, however long (or endless) the origin makes it. `reserve`: asked for each part of
    /// the body before it is held; false stops the transfer (`tooLarge`), as the limit does.
    /// `range`: a byte range asked (`0-375`), answered as the origin answers it.
    public static func fetch(_ url: String, options o: RequestOptions, limit: Int, range: String? = nil, reserve: ((Int) -> Bool)? = nil) -> Outcome {
        let fetcher = Fetcher()
        let collector = Collector(limit: limit, reserve: reserve)
        guard let t = try? CurlTransfer(url: url, range: range, ifRange: nil, options: o, delegate: collector) else { return .failed }
        fetcher.add(t)
        fetcher.run()
        if collector.overLimit { return .tooLarge }
        guard let head = collector.head, collector.complete else { return .failed }
        return .answer(Answer(status: head.status, body: collector.body, finalURL: head.effectiveURL, contentType: head.header("content-type"),
                              etag: head.header("etag"), lastModified: head.header("last-modified"), contentRange: head.header("content-range")))
    }

    private final class Collector: TransferDelegate {
        let limit: Int
        var head: ResponseHead?
        var body = Data()
        var complete = false
        var overLimit = false
        let reserve: ((Int) -> Bool)?
        init(limit: Int, reserve: ((Int) -> Bool)?) {
            self.limit = limit
            self.reserve = reserve
        }

        func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
            self.head = head
            if let n = head.header("content-length").flatMap({ Int64($0.trimming(.whitespaces)) }), n > Int64(limit) {
                overLimit = true
                return .stop
            }
            return .proceed
        }

        func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
            // Stopping is no error to the transfer: the body would look whole, cut at the limit.
            guard body.count + bytes.count <= limit, reserve?(bytes.count) ?? true else {
                overLimit = true
                body = Data()
                return false
            }
            body.append(contentsOf: bytes)
            return true
        }

        func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
            complete = error == nil && !overLimit
        }
    }
}
