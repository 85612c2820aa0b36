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
        /// Other bytes: the origin's manifest now, with its validators. `queriesAreTokens`: it
        /// differs from the cached copy in its URLs' queries, and a member cached from the old
        /// URL was asked at the new one and is the same bytes by its validators
        /// (`MemberProbe`): the queries are tokens, not a version.
        case changed(body: [UInt8], validators: Validators, contentType: String?, finalURL: String?, queriesAreTokens: Bool = false)
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
        /// The request's options (a member asked at its new URL goes with these), and the
        /// validator header the manifest's request adds.
        let options: RequestOptions
        let validator: String?
        /// Members cached from the cached copy's URLs, to ask at a new answer's when it differs
        /// in its URLs' queries only (`MemberProbe`), and the key rules it is judged under.
        let members: [Member]
        let rules: CacheKeyRules
        /// The request carried a validator (`If-None-Match`, `If-Modified-Since`): only then is a
        /// 304 an answer about the cached copy.
        let conditional: Bool
        /// Retries after no answer worth waiting for (a 5xx, the network), as any request's.
        let policy: RetryPolicy
    }

    /// A member cached whole from the URL the cached manifest names, with its validators.
    struct Member {
        let url: String
        let validators: Validators
    }

    private let question: Question
    private let fetcher: Fetcher
    /// The members asked at the new answer's URLs, while they are.
    private var probes: [MemberProbe] = []
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
                      policy: RetryPolicy, members: [Member] = [], rules: CacheKeyRules = CacheKeyRules(),
                      fetcher: Fetcher, done: @escaping (Outcome) -> Void) -> ManifestRevalidation? {
        let header = validators.etag.map { "If-None-Match: \($0)" } ?? validators.lastModified.map { "If-Modified-Since: \($0)" }
        let q = Question(url: url, cached: cached, cachedBase: cachedBase, mpd: mpd, options: options, validator: header, members: members, rules: rules,
                         conditional: validators.etag != nil || validators.lastModified != nil, policy: policy)
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
        var outcome = judged(head: head, error: error)
        if case .failed(_, .tryLater) = outcome, attempt < question.policy.retries, !fetcher.isStopped {
            attempt += 1
            fetcher.after(question.policy.backoff(attempt: attempt, jitter: .random(in: 0.8...1.2))) { [self] in
                if !send() { finish(outcome) }
            }
            return
        }
        if case .changed(let body, let v, let type, let finalURL, _) = outcome, !fetcher.isStopped,
           Self.onlyQueriesDiffer(body, question.cached, mpd: question.mpd, rules: question.rules),
           case let asks = Self.membersToAsk(question.members, changes: Self.queryChanges(body, question.cached, mpd: question.mpd)), !asks.isEmpty {
            probes = MemberProbe.ask(asks, options: question.options, fetcher: fetcher) { [self] same in
                probes = []
                finish(.changed(body: body, validators: v, contentType: type, finalURL: finalURL, queriesAreTokens: same))
            }
            if !probes.isEmpty { return }
            outcome = .changed(body: body, validators: v, contentType: type, finalURL: finalURL, queriesAreTokens: false)
        }
        finish(outcome)
    }

    /// The members asked at their new URLs when a new answer differs only in its URLs' queries.
    static let membersAsked = 3

    /// The first `membersAsked` of `members` whose URL's query the new answer names otherwise
    /// (`changes`), with a strong ETag or a Last-Modified to compare, each with its URL under
    /// the new query.
    static func membersToAsk(_ members: [Member], changes: [String: String]?) -> [(Member, String)] {
        guard let changes, !changes.isEmpty else { return [] }
        var out: [(Member, String)] = []
        for m in members where m.validators.ifRange != nil || m.validators.lastModified != nil {
            let (path, query) = split(m.url)
            guard let new = changes[query] else { continue }
            out.append((m, new.isEmpty ? path : path + "?" + new))
            if out.count == membersAsked { break }
        }
        return out
    }

    /// Whether `new`, a manifest answered for the cached copy `old`, is the same encode only if
    /// its URLs' queries are tokens, and they are: some of `members` (cached from the old URLs)
    /// asked at their new URLs and each the same bytes there (`MemberProbe`). Blocks the calling
    /// thread on a fetch loop of its own while they are asked (serve's answer of a manifest:
    /// serve and prefetch judge a query change alike, hostile probe h9d F4). False when the two
    /// differ otherwise too, or in no query, or no member can be asked.
    static func queriesAreTokens(_ new: [UInt8], _ old: [UInt8], mpd: Bool, rules: CacheKeyRules, members: () -> [Member], options: RequestOptions) -> Bool {
        guard onlyQueriesDiffer(new, old, mpd: mpd, rules: rules) else { return false }
        let asks = membersToAsk(members(), changes: queryChanges(new, old, mpd: mpd))
        guard !asks.isEmpty else { return false }
        let fetcher = Fetcher()
        var said: Bool?
        let probes = MemberProbe.ask(asks, options: options, fetcher: fetcher) { said = $0 }
        guard !probes.isEmpty else { return false }
        fetcher.run(until: { said != nil })
        return said ?? false
    }

    /// The members cached whole among `keys` (of the stream rooted at `root` in `store`), by the
    /// URL they were fetched from, with their validators: a manifest answered in other URL
    /// queries is judged by asking some of them at their new URLs (`MemberProbe`). Segments
    /// first, the first stored first (a re-encode during a run leaves the members stored after
    /// it the new encode under the old URLs, so only those stored before it tell a version from
    /// a token), then the stream's other members (its media playlists), init sections and keys
    /// last (a re-encode at the same settings often leaves the init section byte for byte the
    /// same). At most 256 looked at.
    static func cachedMembers(_ keys: [CacheKey], root: CacheKey, store: CacheStore) -> [Member] {
        let some = Array(keys.prefix(256))
        let entries = (try? store.catalog.entries(keys: some)) ?? [:]
        var roles: [CacheKey: StreamRole] = [:]
        for m in ((try? store.catalog.stream(root: root)) ?? nil)?.members ?? [] { roles[m.key] = m.role }
        func rank(_ k: CacheKey) -> Int {
            switch roles[k] {
            case .segment?: 0
            case .initSection?, .key?: 2
            default: 1
            }
        }
        let held = some.enumerated().compactMap { i, k in entries[k].flatMap { $0.isComplete ? (i, k, $0) : nil } }
        return held.sorted { (rank($0.1), $0.2.created, $0.0) < (rank($1.1), $1.2.created, $1.0) }
            .map { Member(url: $0.2.latestURL, validators: $0.2.validators) }
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

/// One member cached from the URL the cached manifest names, asked (`Range: bytes=0-0`) at the
/// URL a new answer names for it, when the two manifests differ only in their URLs' queries
/// (hostile probe h9d, F4: a signed-URL CDN's tokens, new on every answer, or a cache-busting
/// `?v=2` of a re-encode). The same bytes by its validators (the same strong ETag; else the same
/// Last-Modified and length) make the queries tokens; anything else (other validators, none to
/// compare, no answer) counts them a version: the safe side, a stream is never completed from
/// two encodes (Docs/dash.md, "Changed during a run").
final class MemberProbe: TransferDelegate {
    private let member: ManifestRevalidation.Member
    private var done: ((Bool) -> Void)?

    private init(member: ManifestRevalidation.Member, done: @escaping (Bool) -> Void) {
        self.member = member
        self.done = done
    }

    static func start(url: String, member: ManifestRevalidation.Member, options: RequestOptions, fetcher: Fetcher, done: @escaping (Bool) -> Void) -> MemberProbe? {
        let p = MemberProbe(member: member, done: done)
        guard let t = try? CurlTransfer(url: url, range: "0-0", ifRange: nil, options: options, delegate: p) else { return nil }
        fetcher.add(t)
        return p
    }

    /// Whether an answer with `head` is the bytes `held` names.
    static func same(_ held: Validators, _ head: ResponseHead) -> Bool {
        guard head.status == 200 || head.status == 206 else { return false }
        let length = head.status == 206 ? head.contentRange?.complete : head.contentLength
        if let a = held.etag, !a.hasPrefix("W/"), let b = head.etag, !b.hasPrefix("W/") { return a == b && (held.length == nil || length == nil || held.length == length) }
        if let a = held.lastModified, let b = head.lastModified, let n = held.length, let m = length { return a == b && n == m }
        return false
    }

    func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
        end(Self.same(member.validators, head))
        return .stop
    }

    func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool { false }

    func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
        end(false)
    }

    /// Asks each of `asks` (a member and its new URL) on `fetcher`; `done` gets, once every one
    /// answered, whether each is the same bytes there (tokens only then). The probes started
    /// (to be held while they run); none started: `done` is never called.
    static func ask(_ asks: [(ManifestRevalidation.Member, String)], options: RequestOptions, fetcher: Fetcher, done: @escaping (Bool) -> Void) -> [MemberProbe] {
        var (left, same) = (asks.count, true)
        var started: [MemberProbe] = []
        let answered = { (s: Bool) in
            (left, same) = (left - 1, same && s)
            if left == 0, !started.isEmpty { done(same) }
        }
        for (member, url) in asks {
            if let p = MemberProbe.start(url: url, member: member, options: options, fetcher: fetcher, done: answered) { started.append(p) } else { (left, same) = (left - 1, false) }
        }
        return started
    }

    private func end(_ same: Bool) {
        guard let done else { return }
        self.done = nil
        done(same)
    }
}
