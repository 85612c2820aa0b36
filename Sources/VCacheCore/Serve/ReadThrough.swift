import Foundation
import Synchronization

/// Any byte range of a video, read through the cache: cached spans straight from `data`, missing
/// spans fetched from the origin and handed over as they arrive. What is fetched is stored by a
/// prefetch job (the same writer lock, checkpoints and `ResponseJudge` rules as `prefetch`; no
/// second copy of them). A reader that needs bytes a job is about to write waits for them instead
/// of fetching them again (ExoPlayer's hole locking, across readers); a reader far from every
/// job gets a job of its own, on a span no other job fetches (`startWriter`). A reader whose
/// entry another process is writing streams its span from the origin without storing it
/// (`DirectStream`), so playback never waits behind a cron batch.
///
/// Memory stays bounded whatever the range: bytes go from the origin to `data` to the player.
public final class ReadThrough: Sendable {
    public let store: CacheStore
    let options: PrefetchOptions
    private let boards = Mutex<[String: EntryBoard]>([:])
    private let touched = Mutex<[String: ContinuousClock.Instant]>([:])
    private let touchQueue = DispatchQueue(label: "vcache.serve.touch")

    /// How far ahead of a storing job's write position a reader waits for it rather than
    /// streaming its span itself.
    static let waitWindow: Int64 = 1 << 20

    /// Serving is use: the entry's last use is set, off the request's path and at most every 30 s
    /// per entry (a durable catalog write per request would cost a millisecond of latency each).
    public func markUsed(_ key: String) {
        let now = ContinuousClock.now
        let due = touched.withLock { t -> Bool in
            if let last = t[key], now - last < .seconds(30) { return false }
            t[key] = now
            return true
        }
        guard due else { return }
        let catalog = store.catalog
        touchQueue.async { try? catalog.touch(key: key) }
    }

    /// Waits for the last-use updates handed to the background (before the server exits).
    public func flushUse() { touchQueue.sync {} }

    /// Stops every storing job and releases every waiting reader (the server is shutting down).
    public func shutdown() {
        let all = boards.withLock { Array($0.values) }
        for board in all {
            board.cond.lock()
            board.closing = true
            let stops = board.writers.map(\.stop)
            board.cond.broadcast()
            board.cond.unlock()
            for stop in stops { stop() }
        }
    }

    public init(store: CacheStore, options: PrefetchOptions) {
        self.store = store
        self.options = options
    }

    public struct Video: Sendable, Equatable {
        public var key: String
        public var url: String
        public var length: Int64
        public var validators: Validators
        public var contentType: String?
        /// Known from the catalog: no origin round trip was needed.
        public var fromCatalog: Bool
        /// The ranges the catalog claimed when the video was opened (what its readers start from).
        public var cached = RangeSet()
    }

    public enum OpenError: Error, Equatable, CustomStringConvertible {
        /// The origin answered this status (passed on to the player as it is).
        case origin(status: Int, reason: String)
        /// The origin could not be reached or said something unusable: 502.
        case unreachable(String)

        public var description: String {
            switch self {
            case .origin(let s, let r): "origin answered \(s) \(r)"
            case .unreachable(let why): why
            }
        }
    }

    /// What is known of `url`: from the catalog when its length is there (a cached video plays
    /// with no origin round trip, and offline), else by caching its first 64 KiB.
    public func open(_ url: String) throws(OpenError) -> Video {
        let key = URL(string: url).map { options.keyRules.key(for: $0) } ?? SHA256Digest.hash(url)
        // Players opening the same new video at once: one fetches its head, the others wait for it
        // here rather than asking the origin themselves.
        let board = self.board(key)
        board.opening.lock()
        defer { board.opening.unlock() }
        if let e = (try? store.catalog.entry(key: key)) ?? nil, let length = e.length {
            return Video(key: key, url: url, length: length, validators: e.validators, contentType: e.contentType, fromCatalog: true,
                         cached: e.ranges)
        }
        var o = options
        o.onWrite = nil
        o.retries = 1
        o.waitForLock = false
        let result = Prefetcher(store: store, options: o).run([PrefetchItem(url: url, requests: [.head(64 << 10)])])[0]
        if result.error == .lockBusy {
            // Another process is writing it and has not recorded the length yet: ask the origin
            // for one byte rather than wait behind it.
            switch OriginProbe.probe([url], known: [Validators(length: nil, etag: nil, lastModified: nil)], options: o.request)[0] {
            case .validators(let v) where v.length != nil:
                return Video(key: key, url: url, length: v.length!, validators: v, contentType: nil, fromCatalog: false)
            case .failed(let why): throw .unreachable(why)
            default: throw .unreachable("the origin did not say the video's length")
            }
        }
        if let error = result.error {
            switch error {
            case .http(let status, let reason): throw .origin(status: status, reason: reason)
            default: throw .unreachable(error.description)
            }
        }
        guard let e = (try? store.catalog.entry(key: key)) ?? nil, let length = e.length else {
            throw .unreachable("the origin did not say the video's length")
        }
        return Video(key: key, url: url, length: length, validators: e.validators, contentType: e.contentType, fromCatalog: false,
                     cached: e.ranges)
    }

    func board(_ key: String) -> EntryBoard {
        boards.withLock { b in
            if let x = b[key] { return x }
            let x = EntryBoard()
            b[key] = x
            return x
        }
    }

    /// The bytes `range` of `video`, read as the player asks for them. Starts from the ranges
    /// `open` read (no second catalog read on the request's path).
    public func reader(_ video: Video, range: ByteRange) throws -> RangeReader {
        let board = self.board(video.key)
        let data = try? store.openDataForReading(key: video.key)
        return RangeReader(owner: self, board: board, video: video, range: range, cached: data == nil ? RangeSet() : video.cached, data: data)
    }

    /// How many more bytes may be stored under the cap (nil: no cap), after evicting least
    /// recently used entries other than `key` to make room for `wanted` of them (the video being
    /// played is the most recently used; an entry being served is never evicted: its readers hold
    /// `data` open).
    func room(for key: String, wanted: Int64) -> Int64? {
        guard let cap = options.maxSize else { return nil }
        var c = Evictor.Criteria()
        c.maxSize = max(0, cap - wanted)
        c.protected = [key]
        let usage = (try? Evictor(store: store).evict(c, dryRun: false))?.usageAfter ?? cap
        return cap - usage
    }

    /// Starts a storing job for the bytes from `wanted.lowerBound` on its own thread, limited to
    /// what fits under the cap; false when none can start (the reader then streams without
    /// storing). Jobs of one entry never fetch the same byte: a job whose span covers that point
    /// but is far behind it stops there and the new job takes over the rest of its span, and the
    /// new job stops where a later one began. They share the entry's writer lock (taken here if
    /// no job holds it; another process holding it means no job). The board's lock is held.
    func startWriter(_ board: EntryBoard, video: Video, span wanted: ByteRange) -> Bool {
        let p = wanted.lowerBound
        var end = wanted.upperBound
        let active = board.writers.filter { !$0.finished }
        let overtaken = active.filter { $0.start <= p && p < $0.effectiveEnd }
        for w in overtaken { end = max(end, w.effectiveEnd) }
        for w in active where w.start > p { end = min(end, w.start) }
        guard end > p else { return false }
        var span = ByteRange(p, end)
        if var room = room(for: video.key, wanted: span.count) {
            // What the running jobs are still to store is not in the catalog's usage yet: count
            // their whole spans (what they stored already is then counted twice: the cap errs
            // on the safe side).
            for w in active where !overtaken.contains(where: { $0 === w }) { room -= w.effectiveEnd - w.start }
            for w in overtaken { room -= p - w.start }
            guard room >= 64 << 10 else { return false }
            span = ByteRange(p, min(end, p + room))
        }
        let shared: SharedWriterLock
        if let s = board.shared, s.join() {
            shared = s
        } else {
            guard let lock = try? store.tryLockWriter(key: video.key) else { return false }
            shared = SharedWriterLock(lock)
            _ = shared.join()
            board.shared = shared
        }
        for w in overtaken { w.limit.store(p, ordering: .relaxed) }
        let writer = EntryBoard.Writer(start: span.lowerBound, end: span.upperBound)
        board.writers.append(writer)
        let generation = board.generation
        var o = options
        o.sharedLock = shared
        o.stopAt = { writer.limit.load(ordering: .relaxed) }
        o.maxSize = nil        // the room was made above; the job stores no more than fits
        o.onWrite = { [board] _, r in
            board.cond.lock()
            if board.generation == generation {
                board.written.insert(r)
                writer.position = max(writer.position, r.upperBound)
            }
            board.cond.broadcast()
            board.cond.unlock()
        }
        let flag = Fetcher.StopFlag()
        writer.stop = { flag.stop(reason: SIGTERM) }
        let item = PrefetchItem(url: video.url, requests: [.span(first: span.lowerBound, last: span.upperBound - 1)])
        let store = self.store, options = o
        Thread.detachNewThread {
            let prefetcher = Prefetcher(store: store, options: options, stopFlag: flag) { event in
                if case .videoChanged = event {
                    // The bytes readers were promised belong to the old version: they must stop.
                    board.cond.lock()
                    board.generation += 1
                    board.written = RangeSet()
                    board.cond.broadcast()
                    board.cond.unlock()
                }
            }
            let result = prefetcher.run([item])[0]
            board.cond.lock()
            writer.finished = true
            writer.error = result.error
            board.writers.removeAll { $0 === writer }
            board.cond.broadcast()
            board.cond.unlock()
            shared.leave()
            if result.error == nil { try? store.catalog.touch(key: video.key) }
        }
        return true
    }
}

/// What this process knows of one entry while it is served: bytes written since the readers
/// opened it, the storing job, and the version's generation (bumped when the origin changed it).
final class EntryBoard: @unchecked Sendable {
    // @unchecked: every field is read and written with `cond` locked.
    let cond = NSCondition()
    /// Held while a video's head is fetched to open it (one opener per entry).
    let opening = NSLock()
    var written = RangeSet()
    /// This process's storing jobs on the entry, on disjoint spans.
    var writers: [Writer] = []
    /// The entry's writer lock while any of them runs.
    var shared: SharedWriterLock?
    var generation = 0
    /// The server is stopping: readers give up.
    var closing = false
    /// Readers in this process using the entry (the writer is stopped when none is left).
    var readers = 0

    final class Writer: @unchecked Sendable {
        // @unchecked: guarded by the board's `cond`, like the board.
        let start: Int64
        let end: Int64
        /// Where it stops: `end`, or where a later job took over the rest (read by the job).
        let limit: Atomic<Int64>
        var position: Int64
        var finished = false
        var error: PrefetchError?
        var stop: () -> Void = {}
        var effectiveEnd: Int64 { min(end, limit.load(ordering: .relaxed)) }
        init(start: Int64, end: Int64) {
            self.start = start
            self.end = end
            limit = Atomic(end)
            position = start
        }
    }
}
