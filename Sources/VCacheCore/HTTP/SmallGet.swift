import Foundation

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
    }

    public static func get(_ url: String, timeout: Double = 2, limit: Int = 1 << 20) -> (status: Int, body: Data)? {
        var o = RequestOptions()
        o.proxy = ""  // never through http_proxy: this asks a server on this machine
        o.maxRedirects = 0
        o.connectTimeout = timeout
        o.stallTimeout = timeout
        return get(url, options: o, limit: limit).map { ($0.status, $0.body) }
    }

    /// With the caller's origin options (headers, proxy, CA, redirects).
    public static func get(_ url: String, options o: RequestOptions, limit: Int) -> Answer? {
        let fetcher = Fetcher()
        let collector = Collector(limit: limit)
        guard let t = try? CurlTransfer(url: url, range: nil, ifRange: nil, options: o, delegate: collector) else { return nil }
        fetcher.add(t)
        fetcher.run()
        guard let head = collector.head, collector.complete else { return nil }
        return Answer(status: head.status, body: collector.body, finalURL: head.effectiveURL, contentType: head.header("content-type"))
    }

    private final class Collector: TransferDelegate {
        let limit: Int
        var head: ResponseHead?
        var body = Data()
        var complete = false
        init(limit: Int) { self.limit = limit }

        func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
            self.head = head
            return .proceed
        }

        func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
            guard body.count + bytes.count <= limit else { return false }
            body.append(contentsOf: bytes)
            return true
        }

        func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
            complete = error == nil && body.count <= limit
        }
    }
}
