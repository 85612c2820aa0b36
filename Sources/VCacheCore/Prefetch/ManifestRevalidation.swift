#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Asks the origin whether a cached static manifest (a static MPD, a VOD playlist) whose stream
/// is partly cached is still the one it serves, before the run completes the stream from it
/// (Docs/dash.md, "A partly cached stream"): a conditional GET (`If-None-Match` with the stored
/// ETag, else `If-Modified-Since`), the whole body read when the origin sends one. Runs on the
/// run's fetch loop; `done` is called there once, with the outcome.
final class ManifestRevalidation: TransferDelegate {
    enum Outcome: Equatable {
        /// 304, or the same bytes: the cached manifest stands.
        case unchanged
        /// Other bytes: the origin's manifest now, with its validators.
        case changed(body: [UInt8], validators: Validators, contentType: String?, finalURL: String?)
        /// No answer to judge by (an error status, the network, a body past the limit).
        case failed(String, PrefetchError.Remedy)
    }

    /// What is asked, of which manifest, and how often.
    private struct Question {
        let url: String
        let cached: [UInt8]
        /// The URL the cached manifest's relative URLs resolve against (where it was answered).
        let cachedBase: String?
        /// An MPD (else an HLS playlist): what a 200 answer must be to be judged.
        let mpd: Bool
        var maxBytes: Int { mpd ? MPD.maxBytes : HLSPlaylist.maxBytes }
        /// The request's options, and the validator header the manifest's request adds.
        let options: RequestOptions
        let validator: String?
        /// The request carried a validator (`If-None-Match`, `If-Modified-Since`): only then is a
        /// 304 an answer about the cached copy.
        let conditional: Bool
        /// Retries after no answer worth waiting for (a 5xx, the network), as any request's.
        let policy: RetryPolicy
    }

    private let question: Question
    private let fetcher: Fetcher
    /// Retries made so far.
    private var attempt = 0
    private var head: ResponseHead?
    private var body: [UInt8] = []
    private var failure: String?
    private var done: ((Outcome) -> Void)?

    private init(_ question: Question, fetcher: Fetcher, done: @escaping (Outcome) -> Void) {
        self.question = question
        self.fetcher = fetcher
        self.done = done
    }

    /// Starts the request for `url` on `fetcher`; nil (and `done` not called) when it cannot be
    /// made. No answer to judge by that may come later (a 5xx, a timeout, the network) is asked
    /// again after `policy`'s backoff, up to its retries, as any request of the run
    /// (`--retries`); `done` gets the last answer.
    static func start(url: String, cached: [UInt8], cachedBase: String?, validators: Validators, mpd: Bool, options: RequestOptions,
                      policy: RetryPolicy, fetcher: Fetcher, done: @escaping (Outcome) -> Void) -> ManifestRevalidation? {
        let header = validators.conditionalHeader
        let q = Question(url: url, cached: cached, cachedBase: cachedBase, mpd: mpd, options: options, validator: header,
                         conditional: header != nil, policy: policy)
        let r = ManifestRevalidation(q, fetcher: fetcher, done: done)
        return r.send() ? r : nil
    }

    private func send() -> Bool {
        (head, body, failure) = (nil, [], nil)
        var o = question.options
        if let v = question.validator { o.headers.append(v) }
        guard let t = try? CurlTransfer(url: question.url, range: nil, ifRange: nil, options: o, delegate: self) else { return false }
        fetcher.add(t)
        return true
    }

    /// What an answer means for the cached manifest `cached` (a pure decision). Answered from
    /// another folder than the cached copy was (`cachedBase`; the MPD moved behind a redirect),
    /// the same bytes name other URLs: changed.
    /// A 200 whose body is not a manifest of the kind cached (`mpd`: an MPD, false: an HLS
    /// playlist, nil: not looked at) at all, an HTML error page, is no answer to judge by.
    static func outcome(status: Int, body: [UInt8], cached: [UInt8], cachedBase: String? = nil, mpd: Bool? = nil, validators: Validators, contentType: String?, finalURL: String?) -> Outcome {
        if status == 200, !body.isEmpty, body != cached, let mpd, let what = notAManifest(body, mpd: mpd, contentType: contentType) {
            return .failed("the origin's answer \(what)", .fixOrigin)
        }
        let moved = finalURL.map { new in cachedBase.map { folder(of: $0) != folder(of: new) } ?? false } ?? false
        switch status {
        case 304 where moved:
            return .changed(body: cached, validators: Validators(length: Int64(cached.count), etag: validators.etag, lastModified: validators.lastModified),
                            contentType: contentType, finalURL: finalURL)
        case 304: return .unchanged
        case 200 where body == cached && !moved: return .unchanged
        case 200 where body.isEmpty: return .failed("origin answered 200 with an empty body", .fixOrigin)
        case 200: return .changed(body: body, validators: validators, contentType: contentType, finalURL: finalURL)
        default:
            let e = PrefetchError.http(status: status, reason: "")
            return .failed(e.description, e.remedy)
        }
    }

    /// Why `body`, answered 200 for a cached MPD (`mpd`) or HLS playlist, is not one at all
    /// (an HTML page, another type), nil when it reads as one by its first bytes.
    static func notAManifest(_ body: [UInt8], mpd: Bool, contentType: String?) -> String? {
        if mpd {
            return MPD.looksLikeMPD(firstBytes: Array(body.prefix(4096)), contentType: contentType) ? nil : "is not an MPD"
        }
        return HLSPlaylist.looksLikePlaylist(firstBytes: body.prefix(16), contentType: contentType) ? nil : "is not a playlist"
    }

    /// A URL without its query and last path segment: what relative URLs resolve against.
    static func folder(of url: String) -> String {
        let path = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? url
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[...slash])
    }

    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        self.head = head
        if head.status == 200, let enc = head.header("Content-Encoding")?.trimming(.whitespaces).lowercased(), !enc.isEmpty, enc != "identity" {
            failure = "origin sent the manifest encoded (Content-Encoding: \(enc))"
            return .stop
        }
        if let n = head.contentLength, n > Int64(question.maxBytes) {
            failure = "its answer (\(Units.formatSize(n))) is larger than the \(Units.formatSize(Int64(question.maxBytes))) vcache reads as one"
            return .stop
        }
        return head.status == 200 ? .proceed : .stop
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= question.maxBytes else {
            failure = "its answer is larger than the \(Units.formatSize(Int64(question.maxBytes))) vcache reads as one"
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        guard done != nil else { return }
        let outcome = judged(head: head, error: error)
        if case .failed(_, .tryLater) = outcome, attempt < question.policy.retries, !fetcher.isStopped {
            attempt += 1
            fetcher.after(question.policy.backoff(attempt: attempt, jitter: .random(in: 0.8...1.2))) { [self] in
                if !send() { finish(outcome) }
            }
            return
        }
        finish(outcome)
    }

    private func finish(_ outcome: Outcome) {
        guard let done else { return }
        self.done = nil
        done(outcome)
    }

    /// What the transfer that ended says of the cached manifest.
    private func judged(head: ResponseHead?, error: TransportError?) -> Outcome {
        let outcome: Outcome
        if let failure {
            outcome = .failed(failure, .fixOrigin)
        } else if let error, (head ?? self.head)?.status != 304 {
            outcome = .failed(error.description, PrefetchError.transport(error).remedy)
        } else if let h = head ?? self.head {
            if h.status == 304, !question.conditional {
                // A 304 to a request that named no version says nothing of the bytes (h9b F12).
                outcome = .failed("origin answered 304 to a request without validators", .fixOrigin)
            } else if let n = h.contentLength, h.status == 200, Int64(body.count) != n {
                outcome = .failed("its body ended after \(body.count) of \(n) bytes", .tryLater)
            } else {
                outcome = Self.outcome(status: h.status, body: body, cached: question.cached, cachedBase: question.cachedBase, mpd: question.mpd,
                                       validators: Validators(length: Int64(body.count), etag: h.etag, lastModified: h.lastModified),
                                       contentType: h.contentType, finalURL: h.effectiveURL)
            }
        } else {
            outcome = .failed("no answer", .tryLater)
        }
        return outcome
    }
}
