#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A span of a video straight from the origin to a player, not stored: for a reader whose entry
/// is being written elsewhere. Its response is judged like any other (`ResponseJudge`): only a
/// 206 of exactly the asked bytes of the same version is passed on. Runs its own fetch loop on
/// the reader's thread, only while the reader wants bytes, so at most what one loop turn
/// receives is buffered.
final class DirectStream: TransferDelegate {
    private let fetcher: Fetcher
    private var buffer: [UInt8] = []
    private var consumed = 0
    private var done = false
    private(set) var error: String?
    /// The origin's status when it refused with an HTTP error.
    private(set) var status: Int?
    private var transfer: CurlTransfer?
    private let judge: ResponseJudge
    private var remaining: Int64
    /// The origin's head was judged the bytes asked (`awaitHead`).
    private var accepted = false

    init(url: String, span: ByteRange, validators: Validators, options: RequestOptions) {
        // serve's --limit-rate, per stream (libcurl's own receive limit alone let bursts through).
        fetcher = Fetcher(maxRate: options.maxReceiveRate)
        // Under a weak validator (or none) the response must carry exactly the promised weak
        // ETag, Last-Modified and length: the reader only asks for that when the bytes already
        // sent are this run's own, or none (`ServeDecision`).
        judge = ResponseJudge(asked: .init(span), held: validators,
                              hasBytes: true, wantedEnd: span.upperBound, weakPartsCombine: true, promised: validators)
        remaining = span.count
        do {
            let t = try CurlTransfer(url: url, range: span.httpSpec, ifRange: validators.ifRange, options: options, delegate: self)
            transfer = t
            fetcher.add(t)
        } catch {
            self.error = "\(error)"
        }
    }

    /// Runs the transfer until the origin's head is judged, before a player is sent a head
    /// promising its bytes (hostile probe h9d, F5: an origin whose ETag differs per answer
    /// answers the If-Range'd span 200 whole under another ETag, and the player got `200,
    /// Content-Length` and no byte): true when the bytes asked will come; false (`error` says
    /// why) when they will not.
    func awaitHead() -> Bool {
        if !accepted, error == nil, transfer != nil {
            fetcher.run(until: { [unowned self] in accepted || error != nil })
        }
        if !accepted, error == nil { error = "the origin ended the answer before its head" }
        return accepted && error == nil
    }

    /// Copies the next bytes into `out`; nil when the stream failed or ended early.
    func read(into out: UnsafeMutableRawBufferPointer) -> Int? {
        while buffer.count == consumed {
            if error != nil || done { return nil }
            fetcher.run(until: { [unowned self] in buffer.count > consumed || error != nil })
            if buffer.count == consumed && transfer == nil { done = true }
        }
        let n = min(out.count, buffer.count - consumed)
        buffer.withUnsafeBytes { src in out.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[consumed..<consumed + n])) }
        consumed += n
        if consumed == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            consumed = 0
        }
        return n
    }

    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        switch judge.judge(head) {
        case .accept(let offset, _, _) where offset == judge.asked.start:
            accepted = true
            return .proceed
        case .reject(let e):
            error = e.description
            if case .http(let s, _) = e { status = s }
        default:
            error = "the origin sent another version, or bytes other than those asked"
        }
        return .stop
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        let n = Int(min(Int64(bytes.count), remaining))
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        remaining -= Int64(n)
        return n == bytes.count
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        self.transfer = nil
        if let error, self.error == nil { self.error = error.description }
        if remaining > 0 && self.error == nil { self.error = "the origin ended the body early" }
    }
}
