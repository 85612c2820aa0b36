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

/// One URL to prefetch and the parts of it wanted (empty: the whole video), plus, for an MP4,
/// what its structure makes necessary (`mp4`: the moov wherever it is, or the first seconds).
public struct PrefetchItem: Equatable, Sendable {
    public var url: String
    public var requests: [RangeRequest]
    public var mp4: MP4Goal?
    /// An HLS stream member: how its bytes are checked before they are stored (`HLSMemberCheck`:
    /// a segment's first bytes, an AES-128 key's or segment's length), never an error page
    /// answered with 200. Nil for anything else, and for a member nothing can be checked of.
    public var checkSegment: HLSMemberCheck?
    /// The spans asked for are a playlist's byte ranges (EXT-X-BYTERANGE, RFC 8216 §4.3.2.2):
    /// each must lie inside the resource. One that runs past its end is an error, never a span
    /// clamped to the length (which no later run could ever fill).
    public var rangesMustFit = false
    /// Digests the whole video must have (`--checksum`, a list line's `ALGO=VALUE`): checked when
    /// the entry completes, in this run or a later one (they are stored with the entry).
    public var expected: [ExpectedDigest] = []
    /// A DASH SegmentBase file whose `sidx` this item fetches: once it is held, the run adds the
    /// subsegments it names (`Prefetcher+DASH.swift`).
    public var dashIndex: DASHIndexFollowUp?
    /// The bytes its entry holds were all written by this run (the subsegments of a SegmentBase
    /// file whose init and sidx this run fetched): under no strong validator they are one version
    /// with the ones it adds, as within one job (`PrefetchOptions.heldBytesAreThisRuns`).
    public var heldBytesAreThisRuns = false
    /// A stream's segment, init section or key: the only hosts it may be fetched from, redirects
    /// included (its stream's own hosts and `--allow-host`). Nil: any.
    public var memberOrigins: AllowedOrigins?
    /// A DASH member under several sibling BaseURLs: the same resource under each, and which
    /// one it is fetched from now (`mirror`). `url` stays its key whichever answers.
    public var mirrors: DASHMirrors?
    public var mirror = 0

    /// Where its bytes are asked: `url`, or the same path under the BaseURL the run uses now.
    public var fetchURL: String {
        guard let mirrors, mirror > 0, mirror < mirrors.bases.count else { return url }
        return mirrors.url(at: mirror)
    }

    public init(url: String, requests: [RangeRequest] = [], mp4: MP4Goal? = nil, checkSegment: HLSMemberCheck? = nil) {
        self.url = url
        self.requests = requests
        self.mp4 = mp4
        self.checkSegment = checkSegment == .unchecked ? nil : checkSegment
    }

    /// `--seconds N`: the first 64 KiB (which holds `ftyp`, often the `moov`, and the first
    /// samples), then whatever the MP4's structure says the first N seconds need.
    public static func seconds(_ url: String, _ seconds: Double, also requests: [RangeRequest] = []) -> PrefetchItem {
        PrefetchItem(url: url, requests: [.head(64 << 10)] + requests, mp4: .seconds(seconds))
    }
}

/// The `sidx` of a SegmentBase Representation (Docs/dash.md), and which of its subsegments to fetch.
public struct DASHIndexFollowUp: Equatable, Sendable {
    public var indexRange: MPD.ByteSpan
    /// Seconds from the Period's start: subsegments that start before it; nil for all.
    public var until: Double?
    public var presentationTimeOffset: Int64
    public var timescale: Int64
}

extension PrefetchItem {
    /// Why the item cannot be fetched as asked once the resource is known to be `length` bytes:
    /// a playlist's byte range that ends past it (`rangesMustFit`). Nil: every span fits.
    public func rangeOverrun(length: Int64) -> PrefetchError? {
        guard rangesMustFit else { return nil }
        for case .span(let first, let last?) in requests where last >= length {
            return .rangeOverrun(first: first, last: last, length: length, dash: checkSegment == .dashSegment)
        }
        return nil
    }
}

extension MP4Goal {
    /// Two wants for one entry: the first seconds include the moov; the longer span wins.
    static func merged(_ a: MP4Goal?, _ b: MP4Goal?) -> MP4Goal? {
        switch (a, b) {
        case (nil, let x), (let x, nil): x
        case (.seconds(let x), .seconds(let y)): .seconds(max(x, y))
        case (.seconds(let x), _), (_, .seconds(let x)): .seconds(x)
        default: .moov
        }
    }
}

extension PrefetchItem {
    /// Why `url` cannot be prefetched (not an absolute http or https URL), or nil when it can.
    public static func urlProblem(_ url: String) -> String? {
        if let why = OriginTarget.controlProblem(url) { return "the URL \(why); percent-encode it (a space is %20)" }
        let u = URL(string: url)
        if let scheme = u?.scheme?.lowercased(), scheme != "http" && scheme != "https" {
            return "scheme '\(scheme)' is not supported; only http and https"
        }
        guard u?.scheme != nil, u?.host?.isEmpty == false else {
            return "not a valid URL; give an absolute http:// or https:// URL"
        }
        guard let target = OriginTarget.of(url), target.port > 0 else {
            return "not a URL libcurl accepts (check the host name and the port, 1 to 65535)"
        }
        return nil
    }
}

public struct PrefetchOptions: Sendable {
    public var request = RequestOptions()
    public var keyRules = CacheKeyRules()
    /// Further attempts after a retryable failure (connection errors, timeouts, 5xx, 408, 429).
    public var retries = 3
    /// First backoff delay in seconds; doubles each attempt, with jitter.
    public var retryDelay = 0.5
    /// Wait for another process writing the same entry (true), or skip it (false).
    public var waitForLock = true
    /// Checkpoint (fsync `data`, commit ranges) after this many new bytes...
    public var checkpointBytes: Int64 = 4 << 20
    /// ...or after this many seconds, whichever comes first.
    public var checkpointInterval = 1.0
    /// Received bytes are written in aligned blocks of this size (StagedWrite.swift). 64 KiB: on
    /// Linux 6.x a larger write makes the page cache take larger folios, and 256 KiB writes cost
    /// ext4 2.5-3.7x the CPU of 64 KiB ones for the same bytes (Docs/performance.md, 500 heads).
    public var stageBytes = 64 << 10
    /// Gaps closer than this are fetched in one request.
    public var coalesceGap: Int64 = 64 << 10
    /// Downloads running at once.
    public var concurrency = 4
    /// Connections one entry's missing bytes may be fetched over at once (`--connections`): only
    /// under a strong validator, in pieces of at least `ConnectionSplit.minimumPiece`. 1: one.
    public var connections = 1
    /// No run opens more transfers than this through `-j` times `--connections`.
    public static let maxTotalConnections = 64

    /// Descriptors a run keeps for itself (the catalog and its journal, locks, libcurl's own,
    /// stdio), and for each download (its `data`, its lock, its first connection, slack), before
    /// any goes to a download's further connections.
    public static let descriptorsReservedForRun = 32
    public static let descriptorsReservedPerJob = 4

    /// The downloads at once a run may have when `asked` for, with `descriptors` open files
    /// allowed (the soft `ulimit -n`): each takes up to `descriptorsReservedPerJob` beyond the
    /// `descriptorsReservedForRun`, and never more, since a process that runs out of descriptors
    /// is ended by libdispatch (its thread-pool monitor cannot open `/proc/<tid>/stat`: SIGILL),
    /// and each download failing with EMFILE was a failed item anyway. At least 1.
    /// The fewest descriptors prefetch starts with: one download and what the run opens (at 16
    /// a download met EMFILE; at 6 to 9 libdispatch ended the run).
    public static let minimumDescriptors = 24

    public static func jobs(_ asked: Int, descriptors: Int) -> Int {
        max(1, min(asked, (descriptors - descriptorsReservedForRun) / descriptorsReservedPerJob))
    }

    /// The connections per entry a run of `jobs` downloads at once may use when `asked` for:
    /// lowered so that `jobs` times it stays within `maxTotalConnections`, and so that the further
    /// connections take only descriptors (`descriptors`: the soft `ulimit -n`) no download's own
    /// transfer needs: under a low limit they would leave other videos unable to open a socket
    /// and fail them, where one connection each fetches them all. At least 1.
    public static func connectionsPerEntry(_ asked: Int, jobs: Int, descriptors: Int = .max) -> Int {
        let jobs = min(max(1, jobs), 1 << 20)
        let reserved = descriptorsReservedForRun + descriptorsReservedPerJob * jobs
        let spare = descriptors <= reserved ? 0 : (descriptors - reserved) / jobs
        return max(1, min(asked, maxTotalConnections / jobs, 1 + spare))
    }
    /// Total download rate across all downloads, bytes per second (nil: unlimited).
    public var maxRate: Int64?
    /// Seconds the whole run may take; at the deadline it checkpoints and stops.
    public var maxTime: Double?
    /// Keep the cache at most this big (real disk use): least recently used entries other than
    /// this run's are evicted as the run goes and at its end.
    public var maxSize: Int64?
    /// HLS: which variant of a master playlist, and which audio language (Docs/hls.md).
    public var hlsVariant: HLSPlan.VariantChoice = .best
    public var hlsAudio: String?
    /// HLS: hosts a stream's members may come from besides its playlists' own (`--allow-host`).
    /// A member on any other host is refused, never fetched (Docs/hls.md).
    public var memberHosts = AllowedOrigins()
    /// A playlist's stream joins the run (prefetch); serve's own jobs fetch only what is read.
    public var expandStreams = true
    /// Keep at least this much free on the cache's file system (nginx's `min_free`): least
    /// recently used entries go, under the cap's rules, before the disk fills.
    public var minFree: Int64?
    /// Told of every span written to an entry's `data` as it is written (before its checkpoint),
    /// with the identity of the file it went into: `serve` hands those bytes to the players
    /// reading that same file. Called on the fetch loop.
    public var onWrite: (@Sendable (_ file: FileID, _ range: ByteRange) -> Void)?
    /// Told, on the fetch loop, that the job is about to drop the version it wrote into `file`
    /// (catalog rows, then a new `data`): serve stops trusting what the job wrote there before
    /// the catalog names another version and before that file can go (a new `data` may then get
    /// its inode number, and with it the old file's record).
    public var onDrop: (@Sendable (_ file: FileID) -> Void)?
    /// The bytes the entry holds were all written by this same run (serve, which wrote them
    /// itself, says so): parts under a weak validator may then be combined (Docs/cache-format.md,
    /// "Versions"), as within one prefetch run.
    public var heldBytesAreThisRuns = false
    /// Gives back bytes the job wrote into `file` and could never claim: called with them and a
    /// function that punches one range out of the job's descriptor. serve first stops its readers
    /// from trusting those bytes, then punches (nil: the job punches them itself).
    public var onGiveBack: (@Sendable (_ file: FileID, _ ranges: RangeSet, _ punch: (ByteRange) -> Void) -> Void)?
    /// The version readers of this entry's `data` were promised (serve): a response of any other
    /// version is never written into that file, even when it holds no byte yet; the job gives
    /// the entry a new `data` for it instead, which those readers never read.
    public var expectedVersion: Validators?
    /// The entry's writer lock, already held by the caller and shared with other jobs on the same
    /// entry (`serve`); the job neither takes nor releases a lock of its own.
    public var sharedLock: (any SharedEntryLock)?
    /// Where the job must stop writing, read as it goes (`serve` moves it when another job takes
    /// over the rest of the span); nil: no such limit.
    public var stopAt: (@Sendable () -> Int64)?
    /// Emit `.trace` events: request and response heads, and the decisions taken on them.
    public var verbose = false

    public init() {}
}

public enum PrefetchError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidURL(String)
    case http(status: Int, reason: String)
    case transport(TransportError)
    case badContentRange(asked: String, got: String)
    case missingLength
    /// The body cannot be the video: encoded (Content-Encoding), an HTML page for a media URL, or
    /// an MP4 URL whose first bytes are not a box. Nothing of it is kept.
    case notTheVideo(String)
    /// The origin's version changed again and again within one run (two backends behind a
    /// balancer with different ETags, a length that differs per response): given up.
    case unstableVersion(changes: Int, reason: String)
    case noProgress
    /// A body ended by the connection's close (no Content-Length, not chunked) whose bytes show
    /// it was cut (`CloseDelimitedBody`): nothing of it was kept; retried like any cut body.
    case cutBody(received: Int64, why: String)
    /// A body ended by the connection's close whose bytes cannot show that they are whole (not
    /// an MP4): kept as a partial entry of unknown length, never called complete.
    case unprovenEnd(received: Int64, why: String)
    /// A playlist's byte range (`first`-`last`, inclusive) of a resource that is only `length`
    /// bytes (`PrefetchItem.rangesMustFit`): the playlist is wrong, and no fetch can fill it.
    /// `dash`: the range came from an MPD (SegmentBase, SegmentURL@mediaRange, a sidx), not a playlist.
    case rangeOverrun(first: Int64, last: Int64, length: Int64, dash: Bool = false)
    case disk(SystemError)
    case catalog(String)
    /// Another process held the catalog past the busy timeout.
    case catalogBusy(String)
    case lockBusy
    /// The MP4 could not be walked or mapped (`--seconds`).
    case mp4(MP4Error)
    case interrupted
    case deadline
    case notStarted
    /// An HLS stream that cannot be fetched as asked (a playlist that does not parse, no such
    /// variant, `--bytes` on a stream).
    case stream(String)
    /// `--max-size` cannot hold what this run asks for: with every other entry evicted, the run's
    /// own videos still exceed it. The run stopped storing; what did not fit was given back.
    /// `minFree`: set when the disk's kept free space (`min-free`), not `--max-size`, was the limit.
    /// `needs`: set when the item (a stream with all it names) was found, before anything was
    /// evicted for it, to need more than the limit even in an empty cache: nothing was.
    case noRoom(cap: Int64, minFree: Int64? = nil, needs: Int64? = nil)
    /// The video became whole again, but its bytes do not hash to the SHA-256 its version had
    /// when first completed (kept when `verify --fix` dropped damaged chunks): damaged since, or
    /// an origin that changed its bytes under the same validators. Every claim was dropped.
    case notAsCompleted
    /// An HLS member on a host that is none of its stream's (the hosts its playlists came from,
    /// and `--allow-host`): refused, never fetched. `own`: the stream's hosts.
    /// `redirected`: the member's own URL was on an allowed host, and the origin redirected it there.
    /// `more`: further members of the same stream refused for their host, said on this one line.
    /// `mpd`: named by a DASH MPD, not an HLS playlist (the words of the message).
    case refusedHost(host: String, own: [String], redirected: Bool = false, more: Int = 0, mpd: Bool = false)
    /// The whole video does not have a digest it is expected to have (`--checksum`, a list line,
    /// the origin's header): its bytes were dropped, never called complete.
    case checksumMismatch(ChecksumMismatch)
    /// A stream member asked for by byte ranges (an MPD's SegmentBase or mediaRange, a sidx's
    /// subsegments, a playlist's EXT-X-BYTERANGE) changed on the origin during the run: those
    /// ranges were planned from the old version, so none is cut from the new one. Its cached
    /// bytes were dropped; the next run plans from the new version.
    case changedUnderRanges(String)
    /// A static manifest asked for again at the end of a run that fetched members of its stream
    /// (`Prefetcher.changedDuringRun`) had changed: those members may be the new version under
    /// the old manifest, so the `dropped` entries this run fetched went (`busy`: in use, kept;
    /// the stream stays partial, so the next run asks for the manifest again). `differing`: the
    /// query parameters of member URLs the key rules keep, when they were all that differed
    /// (a signed-URL origin's token the key rules do not strip, or a cache-busting `?v=`);
    /// `stripped`: the parameters the key rules strip now (the config value names them too).
    case manifestChangedDuringRun(dropped: Int, busy: Int, differing: [String] = [], stripped: Set<String> = [])
    /// A partly cached stream's manifest could not be asked for again before the run completed
    /// the stream (`why`: the origin's answer); nothing of the stream was fetched, since the
    /// cached copy may name another version than the origin serves. `remedy`: the answer's.
    /// `newChoice`: the stream was complete for other choices than this run's.
    case staleManifest(why: String, remedy: Remedy, newChoice: Bool = false)
    /// A stream another process holds (completing it: `--no-wait`), or whose old members could
    /// not be dropped (in use): nothing of it was fetched, nothing mixed; `why` says which.
    case streamBusy(String)

    /// Wraps an error met while prefetching: file-system errors stay typed, the rest is the catalog's.
    init(_ error: any Error) {
        switch error {
        case let e as PrefetchError: self = e
        case let e as SystemError: self = .disk(e)
        case let e as TransportError: self = .transport(e)
        case let e as DatabaseError where e.isBusy: self = .catalogBusy(e.description)
        // The catalog's disk is full: the same as `data`'s (room can be made, and the message
        // says so), not a damaged catalog.
        case let e as DatabaseError where e.isDiskFull: self = .disk(SystemError("commit to", path: "the catalog", errno: ENOSPC))
        default: self = .catalog("\(error)")
        }
    }

    /// What a failure asks of whoever runs vcache from cron (the exit code is chosen by it).
    public enum Remedy: Int, Comparable, Sendable {
        /// Nothing to fix: the network, a busy origin, a busy lock, or the deadline; a later run resumes.
        case tryLater = 3
        /// Something else failed for this item.
        case other = 1
        /// The origin refused or answered wrongly (4xx, a wrong Content-Range, a file that is not MP4).
        case fixOrigin = 4
        /// This machine: the disk (full, read-only, I/O errors) or the catalog.
        case fixLocal = 5

        /// Which code a run with several failures exits with: what needs fixing wins over what passes.
        var severity: Int {
            switch self {
            case .tryLater: 0
            case .other: 1
            case .fixOrigin: 2
            case .fixLocal: 3
            }
        }
        public static func < (a: Remedy, b: Remedy) -> Bool { a.severity < b.severity }
    }

    public var remedy: Remedy {
        switch self {
        case .transport(let t): [.refusedScheme, .tooManyRedirects, .redirectRefused].contains(t.kind) ? .fixOrigin : .tryLater
        case .http(let status, _): Self.passing(status) ? .tryLater : .fixOrigin
        case .badContentRange, .missingLength, .notTheVideo, .unstableVersion, .noProgress, .mp4, .invalidURL: .fixOrigin
        case .cutBody: .tryLater
        case .unprovenEnd, .rangeOverrun: .fixOrigin
        // A file past the largest this file system holds: the origin's length or offsets are
        // absurd (2^63), unless this process has a file size limit (`ulimit -f`).
        case .disk(let e): e.isPastFileLimit && !Self.hasFileSizeLimit ? .fixOrigin : .fixLocal
        case .catalog: .fixLocal
        case .catalogBusy: .tryLater
        case .lockBusy, .interrupted, .deadline, .notStarted: .tryLater
        case .noRoom: .fixLocal
        case .stream: .fixOrigin
        case .notAsCompleted: .tryLater
        case .refusedHost: .fixOrigin
        case .checksumMismatch: .fixOrigin
        case .changedUnderRanges, .manifestChangedDuringRun: .tryLater
        case .staleManifest(_, let remedy, _): remedy
        case .streamBusy: .tryLater
        }
    }

    /// This process may not write files past some size (`ulimit -f`, RLIMIT_FSIZE): EFBIG is then
    /// that limit, not the file system's.
    public static var hasFileSizeLimit: Bool {
        var limit = rlimit()
        #if canImport(Glibc)
        guard getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0 else { return false }
        return limit.rlim_cur != rlim_t.max  // RLIM_INFINITY, all ones (a macro Swift does not import)
        #else
        guard getrlimit(RLIMIT_FSIZE, &limit) == 0 else { return false }
        return limit.rlim_cur != RLIM_INFINITY
        #endif
    }

    /// An HTTP status that may pass: 5xx but 508 (a loop of proxies, which no wait undoes),
    /// 408 and 429.
    static func passing(_ status: Int) -> Bool { (status >= 500 && status != 508) || status == 408 || status == 429 }

    /// Worth another attempt: connection-level failures, statuses that may pass (`passing`).
    public var isRetryable: Bool {
        switch self {
        case .transport(let t): t.isRetryable
        case .http(let status, _): Self.passing(status)
        case .cutBody: true
        default: false
        }
    }

    public var description: String {
        switch self {
        case .invalidURL(let why): why
        case .http(let status, let reason): "origin answered \(status) \(reason)".trimming(.whitespaces)
        case .transport(let t): t.description
        case .badContentRange(let asked, let got): "origin answered Content-Range '\(got)' to a request for bytes=\(asked); nothing from that response was kept"
        case .missingLength: "origin did not say the video's length (no Content-Range total or Content-Length)"
        case .notTheVideo(let why): "\(why); nothing of it was kept"
        case .unstableVersion(let n, let reason): "the origin's version changed \(n) times in one run (last: \(reason)); given up: does it answer from backends that disagree?"
        case .noProgress: "origin sent no new bytes for the requested range"
        case .cutBody(let n, let why): "origin closed the connection after \(n) bytes with no Content-Length and no chunked end, and they are not whole (\(why)): the body was cut; nothing of it was kept"
        case .rangeOverrun(let first, let last, let length, true):
            "its MPD's byte range (SegmentBase indexRange or Initialization range, SegmentURL mediaRange, or a subsegment its sidx gives) asks for bytes \(first)-\(last), which overruns the resource (\(length) bytes): no fetch can fill that range; fix the MPD or the file's sidx"
        case .rangeOverrun(let first, let last, let length, false):
            "its playlist's EXT-X-BYTERANGE asks for bytes \(first)-\(last), which overruns the resource (\(length) bytes): no fetch can fill that range; fix the playlist"
        case .unprovenEnd(let n, let why): "origin closed the connection after \(n) bytes with no Content-Length and no chunked end, and nothing shows they are whole (\(why)): kept as a partial entry, never called complete; an origin that sends Content-Length or chunked bodies fixes it"
        case .notAsCompleted: "its bytes, whole again, do not hash to the SHA-256 this version had when first completed (damaged since, or the origin changed its bytes without changing its ETag or Last-Modified); every cached byte of it was dropped: run again to fetch it whole"
        case .disk(let e) where e.isNoSpace: "\(e.description); free space or lower the cache size with 'vcache evict'"
        case .disk(let e) where e.isPastFileLimit:
            Self.hasFileSizeLimit ? "\(e.description): this process's file size limit (ulimit -f) is below the video's bytes; raise it"
                : "\(e.description): the origin's length or range runs past the largest file this file system holds; nothing past it was kept"
        case .disk(let e): e.description
        case .catalog(let message), .catalogBusy(let message): message
        case .lockBusy: "another vcache process is writing this entry; skipped (--no-wait)"
        case .mp4(let e): "cannot map its MP4 for --seconds: \(e.description)"
        case .interrupted: "interrupted; what arrived is saved and a rerun resumes"
        case .deadline: "stopped at the --max-time deadline; what arrived is saved and a rerun resumes"
        case .stream(let why): why
        case .noRoom(_, let minFree?, let needs?): "needs about \(Units.formatSize(needs)) and does not fit while keeping min-free \(Units.formatSize(minFree)) free on the cache's disk even in an empty cache; nothing was evicted for it: free space on the disk, or lower min-free"
        case .noRoom(let cap, nil, let needs?): "needs about \(Units.formatSize(needs)), more than --max-size \(Units.formatSize(cap)) holds even in an empty cache; nothing was evicted for it: raise the cap, or ask for less (--seconds N)"
        case .noRoom(_, let minFree?, nil): "does not fit while keeping min-free \(Units.formatSize(minFree)) free on the cache's disk (every other entry is evicted already); free space on the disk, or lower min-free"
        case .noRoom(let cap, nil, nil): "does not fit under --max-size \(Units.formatSize(cap)) with the rest of this run's videos (every other entry is evicted already); raise the cap or shorten the list"
        case .notStarted: "not started before the run stopped"
        case .checksumMismatch(let m): m.description
        case .staleManifest(let why, _, true): "its stream is cached for other choices than this run's and its manifest could not be asked for again (\(why)): nothing was fetched, so this choice is not fetched under a cached copy the origin may have changed; run again once the origin answers"
        case .staleManifest(let why, _, false): "its stream is partly cached and its manifest could not be asked for again (\(why)): nothing more was fetched, so the stream is not completed from a cached copy the origin may have changed; run again once the origin answers"
        case .streamBusy(let why): why
        case .manifestChangedDuringRun(let n, let busy, let differing, let stripped):
            "its manifest changed on the origin during this run: the \(n) \(n == 1 ? "entry" : "entries") this run fetched of its stream may be of the new version, not the one the manifest it read names, so \(n == 1 ? "it was" : "they were") dropped"
                + (busy > 0 ? " (\(busy) more in use by another vcache process stayed; the stream is partial, so the next run asks for its manifest again)" : "")
                + (differing.isEmpty ? ": run the prefetch again" : ": " + Self.onlyParametersDiffer(differing, stripped: stripped) + "; if it re-encoded, run the prefetch again")
        case .changedUnderRanges(let why): "changed on the origin during this run (\(why)): the byte ranges planned for it came from the old version, so none was cut from the new one; its cached bytes were dropped: run the prefetch again"
        case .refusedHost(let host, let own, let redirected, let more, let mpd):
            "refused: \(redirected ? "the origin redirected it to" : mpd ? "its MPD names it on" : "its playlist names it on") \(host), not on the stream's own \(own.count == 1 ? "host" : "hosts") (\(own.joined(separator: ", "))); --allow-host \(host) allows it"
                + (more > 0 ? " (and \(more) more \(more == 1 ? "member" : "members") of this stream refused for \(more == 1 ? "its host" : "their hosts"), not said one by one)" : "")
        }
    }
}

extension PrefetchResult {
    /// Stopped by the run's --max-time deadline (or not started before it): planned, not failed.
    public var stoppedByDeadline: Bool { error == .deadline || error == .notStarted }

    /// Why it failed, as said to the user: a stopped refetch of a live manifest resumes nothing.
    public var errorText: String? {
        guard let error else { return nil }
        if newCopyDropped && (error == .interrupted || error == .deadline) {
            return (error == .deadline ? "stopped at the --max-time deadline" : "interrupted")
                + "; the new copy being fetched was dropped and the cached copy kept: the next run fetches it again"
        }
        return error.description
    }
}

public struct PrefetchResult: Equatable, Sendable {
    public var url: String
    public var key: CacheKey
    public var length: Int64?
    /// Bytes this run downloaded and stored in the catalog (a byte that arrived but could not be
    /// committed, or a cached byte fetched again as part of a coalesced request, is not counted).
    public var fetchedBytes: Int64
    /// Requested bytes that were already cached when the entry was first locked.
    public var alreadyCachedBytes: Int64
    /// Bytes asked for, once the length was known.
    public var requestedBytes: Int64?
    /// The whole video is cached (and its SHA-256 stored).
    public var complete: Bool
    public var elapsed: Double
    public var error: PrefetchError?
    /// The URL that answered last, after redirects.
    public var finalURL: String? = nil
    /// The entry is an HLS playlist: the run went on to the stream it names.
    public var isPlaylist = false
    /// Members of its stream refused for their host (`PrefetchError.refusedHost`), never fetched.
    public var refusedMembers = 0
    /// Further URLs given in the run for this same entry (the same URL again, or one the key rules
    /// map to it): folded into this one result, not fetched or counted again.
    public var mergedURLs: [String] = []
    /// A stream's: the member whose failure `error` is (nil: the root's own).
    public var failedMember: String? = nil
    /// A live manifest's refetch stopped (a signal, --max-time): what arrived of the new copy
    /// was dropped, the cached copy kept; nothing resumes from it.
    public var newCopyDropped = false

    public var succeeded: Bool { error == nil }
}

/// What a prefetch tells its caller while it runs; delivered on the fetch loop's thread.
public enum PrefetchEvent: Sendable {
    case started(url: String, key: CacheKey, length: Int64?, alreadyCached: Int64, toFetch: Int64?)
    case waitingForLock(url: String)
    case progress(url: String, fetched: Int64, toFetch: Int64?)
    /// The cached bytes were dropped and the entry begun again: `changed` when the origin showed
    /// another version, false when they could not be combined with new ones (`reason` says why).
    case videoChanged(url: String, reason: String, changed: Bool = true)
    /// Something the user should know about what was fetched and why (e.g. the moov fetched too).
    case note(url: String, message: String)
    /// With `PrefetchOptions.verbose`: each request and response head, and each decision.
    case trace(url: String, message: String)
    case retrying(url: String, attempt: Int, delay: Double, reason: String)
    /// Entries removed to stay under `maxSize`; `overCap` when this run's own entries exceed it.
    case evicted(urls: [String], freedBytes: Int64, usage: Int64, overCap: Bool)
    case finished(PrefetchResult)
}

extension PrefetchError {
    /// What `manifestChangedDuringRun`'s words, and the note of a manifest found changed as a
    /// run begins, add when only the query parameters `differing` of its member URLs differ:
    /// the key rule that would key them as one (with those the key rules strip now,
    /// `stripped`: `config set` replaces the value).
    static func onlyParametersDiffer(_ differing: [String], stripped: Set<String>) -> String {
        let names = differing.count == 1 ? "parameter \(differing[0])"
            : "parameters " + differing.dropLast().joined(separator: ", ") + " and " + differing[differing.count - 1]
        let value = (stripped.sorted() + differing.filter { !stripped.contains($0) }).joined(separator: ",")
        return "only the query \(names) of its member URLs \(differing.count == 1 ? "differs" : "differ"): if the origin signs URLs anew on each answer, "
            + "'vcache config set key-strip-param \(value)' keys them as one"
    }
}
