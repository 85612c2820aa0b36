import Foundation

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
    /// The only origin hosts contacted (nil: any, for a proxy that listens on loopback only).
    public let allowedHosts: Set<String>?
    private let log: @Sendable (LogLine) -> Void

    public init(readThrough: ReadThrough, allowedHosts: Set<String>? = nil, log: @escaping @Sendable (LogLine) -> Void) {
        self.readThrough = readThrough
        self.allowedHosts = allowedHosts.map { Set($0.map { $0.lowercased() }) }
        self.log = log
    }

    public func handle(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let start = ContinuousClock.now
        var line = LogLine(time: Date(), client: request.client, method: request.method, url: request.path, range: request.headers["range"],
                           status: 0, fromCache: 0, fromOrigin: 0, seconds: 0, note: nil)
        let log = self.log
        func finish(_ status: Int, _ note: String?, headers: [(String, String)] = []) -> HTTPServer.Response {
            line.status = status
            line.note = note
            line.seconds = (ContinuousClock.now - start).inSeconds
            log(line)
            return HTTPServer.Response(status: status, headers: headers)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return finish(405, "only GET and HEAD", headers: [("Allow", "GET, HEAD")])
        }
        guard !request.hadBody else { return finish(400, "a request body is not accepted") }
        guard let origin = ProxyURL.origin(path: request.path) else { return finish(404, "not a vcache proxy path (/v/ORIGIN/NAME)") }
        line.url = origin
        if let why = PrefetchItem.urlProblem(origin) { return finish(400, "origin \(why)") }
        if let allowed = allowedHosts {
            let host = URL(string: origin)?.host?.lowercased() ?? ""
            guard allowed.contains(host) else { return finish(403, "origin host '\(host)' is not in --allow-host") }
        }
        let video: ReadThrough.Video
        do {
            video = try readThrough.open(origin)
        } catch {
            switch error {
            // The player learns what the origin said; no error body is ever stored as video bytes.
            case .origin(let status, _): return finish(status, error.description)
            case .unreachable(let why): return finish(502, why)
            }
        }
        let name = (request.path as NSString).lastPathComponent.removingPercentEncoding ?? ""
        var headers: [(String, String)] = [
            ("Accept-Ranges", "bytes"),
            ("Content-Type", ProxyURL.contentType(origin: video.contentType, name: name)),
            ("ETag", video.validators.etag ?? "\"vcache-\(video.key.prefix(16))-\(video.length)\""),
        ]
        if let lm = video.validators.lastModified { headers.append(("Last-Modified", lm)) }
        let span: ByteRange
        var status = 200
        switch RangeHeader(request.headers["range"], length: video.length) {
        case .whole:
            span = ByteRange(0, video.length)
        case .span(let r):
            span = r
            status = 206
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(video.length)"))
        case .unsatisfiable:
            return finish(416, nil, headers: headers + [("Content-Range", "bytes */\(video.length)")])
        }
        let reader: RangeReader
        do {
            reader = try readThrough.reader(video, range: span)
        } catch {
            return finish(500, "\(error)")
        }
        readThrough.markUsed(video.key)
        let body: HTTPServer.Body
        if request.method != "HEAD", !span.isEmpty, reader.isCached, let data = reader.data {
            body = .file(data, offset: span.lowerBound, length: span.count)
        } else {
            body = .stream(length: span.count, reader)
        }
        let sendfileBytes: Int64 = { if case .file = body { return span.count } else { return 0 } }()
        let base = line, finalStatus = status, isHead = request.method == "HEAD"
        return HTTPServer.Response(status: status, headers: headers, body: body) { completed in
            reader.finished(completed: completed)
            var done = base
            done.status = finalStatus
            done.fromCache = isHead ? 0 : sendfileBytes + reader.fromCache.load(ordering: .relaxed)
            done.fromOrigin = reader.fromOrigin.load(ordering: .relaxed)
            done.seconds = (ContinuousClock.now - start).inSeconds
            if !completed { done.note = reader.failure ?? "the client left before the end" }
            log(done)
        }
    }
}
