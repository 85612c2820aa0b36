import Foundation

/// One GET of a small body (at most `limit` bytes), for `vcache status` asking a running serve
/// for its counters. No proxy, no redirects; nil when nothing answered.
public enum SmallGet {
    public static func get(_ url: String, timeout: Double = 2, limit: Int = 1 << 20) -> (status: Int, body: Data)? {
        var o = RequestOptions()
        o.proxy = ""  // never through http_proxy: this asks a server on this machine
        o.maxRedirects = 0
        o.connectTimeout = timeout
        o.stallTimeout = timeout
        let fetcher = Fetcher()
        let collector = Collector(limit: limit)
        guard let t = try? CurlTransfer(url: url, range: nil, ifRange: nil, options: o) else { return nil }
        t.delegate = collector
        fetcher.add(t)
        fetcher.run()
        guard let status = collector.status, collector.complete else { return nil }
        return (status, collector.body)
    }

    private final class Collector: TransferDelegate {
        let limit: Int
        var status: Int?
        var body = Data()
        var complete = false
        init(limit: Int) { self.limit = limit }

        func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
            status = head.status
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
