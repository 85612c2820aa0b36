/// A response body read through `RangeReader`s that outlives an expired signed URL: when the
/// origin refuses the rest of a stream member with 401 or 403 after the response head went out
/// (its first bytes were cached, the rest is fetched as the player reads), the rest of the span is
/// read under the URL its playlist names now (`Proxy.renewedReader`: the same length and
/// validators, so the bytes are the same version's), from where the first reader stopped. Renewed
/// once per response; anything else that ends a reader early ends the body (the connection is
/// cut: a player never gets a wrong byte, only fewer).
final class RenewingReader: HTTPServer.Producer, @unchecked Sendable {
    // @unchecked: read and finished by one connection thread at a time, as the readers it holds;
    // the counters it sums are atomics.
    private var current: RangeReader
    /// The body offset where `current`'s range begins.
    private var start: Int64 = 0
    private var spent: [RangeReader] = []
    private let span: ByteRange
    private let renew: (ByteRange, Int) -> RangeReader?

    /// `renew(rest, status)`: a reader of `rest` under the renewed URL, its first bytes ready.
    init(_ reader: RangeReader, span: ByteRange, renew: @escaping (ByteRange, Int) -> RangeReader?) {
        current = reader
        self.span = span
        self.renew = renew
    }

    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        if let n = current.read(at: offset - start, into: buffer) { return n }
        guard spent.isEmpty, let status = current.failureStatus, status == 401 || status == 403,
              offset > start, span.lowerBound + offset < span.upperBound,
              let next = renew(ByteRange(span.lowerBound + offset, span.upperBound), status) else { return nil }
        current.finished(completed: false)
        spent.append(current)
        current = next
        start = offset
        return current.read(at: 0, into: buffer)
    }

    func finished(completed: Bool) { current.finished(completed: completed) }

    var fromCache: Int64 { (spent + [current]).reduce(0) { $0 + $1.fromCache.load(ordering: .relaxed) } }
    var fromOrigin: Int64 { (spent + [current]).reduce(0) { $0 + $1.fromOrigin.load(ordering: .relaxed) } }
    /// Why the body was cut short, if it was; a renewal says so too.
    var failure: String? { current.failure }
    var renewed: Bool { !spent.isEmpty }
}
