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

    private let cached: [UInt8]
    private let maxBytes: Int
    private var head: ResponseHead?
    private var body: [UInt8] = []
    private var failure: String?
    private var done: ((Outcome) -> Void)?

    /// The URL the cached manifest's relative URLs resolve against (where it was answered).
    private let cachedBase: String?
    /// The request carried a validator (`If-None-Match`, `If-Modified-Since`): only then is a
    /// 304 an answer about the cached copy.
    private let conditional: Bool

    private init(cached: [UInt8], cachedBase: String?, maxBytes: Int, conditional: Bool, done: @escaping (Outcome) -> Void) {
        self.cached = cached
        self.cachedBase = cachedBase
        self.maxBytes = maxBytes
        self.conditional = conditional
        self.done = done
    }

    /// Starts the request for `url` on `fetcher`; nil (and `done` not called) when it cannot be made.
    static func start(url: String, cached: [UInt8], cachedBase: String?, validators: Validators, maxBytes: Int, options: RequestOptions,
                      fetcher: Fetcher, done: @escaping (Outcome) -> Void) -> ManifestRevalidation? {
        let r = ManifestRevalidation(cached: cached, cachedBase: cachedBase, maxBytes: maxBytes,
                                     conditional: validators.etag != nil || validators.lastModified != nil, done: done)
        var o = options
        if let etag = validators.etag {
            o.headers.append("If-None-Match: \(etag)")
        } else if let lm = validators.lastModified {
            o.headers.append("If-Modified-Since: \(lm)")
        }
        guard let t = try? CurlTransfer(url: url, range: nil, ifRange: nil, options: o, delegate: r) else { return nil }
        fetcher.add(t)
        return r
    }

    /// What an answer means for the cached manifest `cached` (a pure decision). Answered from
    /// another folder than the cached copy was (`cachedBase`; the MPD moved behind a redirect),
    /// the same bytes name other URLs: changed.
    static func outcome(status: Int, body: [UInt8], cached: [UInt8], cachedBase: String? = nil, validators: Validators, contentType: String?, finalURL: String?) -> Outcome {
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
        if let n = head.contentLength, n > Int64(maxBytes) {
            failure = "its answer (\(Units.formatSize(n))) is larger than the \(Units.formatSize(Int64(maxBytes))) vcache reads as one"
            return .stop
        }
        return head.status == 200 ? .proceed : .stop
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= maxBytes else {
            failure = "its answer is larger than the \(Units.formatSize(Int64(maxBytes))) vcache reads as one"
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        guard let done else { return }
        self.done = nil
        let outcome: Outcome
        if let failure {
            outcome = .failed(failure, .fixOrigin)
        } else if let error, (head ?? self.head)?.status != 304 {
            outcome = .failed(error.description, PrefetchError.transport(error).remedy)
        } else if let h = head ?? self.head {
            if h.status == 304, !conditional {
                // A 304 to a request that named no version says nothing of the bytes (h9b F12).
                outcome = .failed("origin answered 304 to a request without validators", .fixOrigin)
            } else if let n = h.contentLength, h.status == 200, Int64(body.count) != n {
                outcome = .failed("its body ended after \(body.count) of \(n) bytes", .tryLater)
            } else {
                outcome = Self.outcome(status: h.status, body: body, cached: cached, cachedBase: cachedBase,
                                       validators: Validators(length: Int64(body.count), etag: h.etag, lastModified: h.lastModified),
                                       contentType: h.contentType, finalURL: h.effectiveURL)
            }
        } else {
            outcome = .failed("no answer", .tryLater)
        }
        done(outcome)
    }
}
