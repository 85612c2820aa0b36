#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Synchronization

/// Any byte range of a video, read through the cache: cached spans straight from `data`, missing
/// spans fetched from the origin and handed over as they arrive. What is fetched is stored by a
/// prefetch job (the same writer lock, checkpoints and `ResponseJudge` rules as `prefetch`; no
/// second copy of them). A reader that needs bytes a job is about to write waits for them instead
/// of fetching them again (ExoPlayer's hole locking, across readers); a reader far from every
/// job gets a job of its own, on a span no other job fetches (`startJob`). A reader whose
/// entry another process is writing streams its span from the origin without storing it
/// (`DirectStream`), so playback never waits behind a cron batch.
///
/// What a reader sends from the cache is justified by the file it holds open (`ServeDecision`):
/// claims are trusted only while that file is still the entry's `data` and of the promised
/// version, and this process's own writes only into that same file. Boards are per entry and
/// forgotten when no reader or job uses them (a web page requesting endless URLs cannot grow them).
///
/// Memory stays bounded whatever the range: bytes go from the origin to `data` to the player.
public final class ReadThrough: Sendable {
    public let store: CacheStore
    let options: PrefetchOptions
    /// The key rules it keys URLs by (as started: SIGHUP does not change them).
    public var keyRules: CacheKeyRules { options.keyRules }
    /// The size cap and the free space kept on the disk; `options.maxSize` and `options.minFree`
    /// at start, changed by `setLimits` (serve's SIGHUP).
    private let limits: Locked<(cap: Int64?, minFree: Int64?)>
    private let boards = Locked<[CacheKey: EntryBoard]>([:])
    /// Entries read from the catalog a moment ago, for the files they were read for (`KnownEntries`).
    let known = KnownEntries()
    private let touched = Locked<[CacheKey: ContinuousClock.Instant]>([:])
    private let touchQueue = DispatchQueue(label: "vcache.serve.touch")
    /// Idle boards kept (what this process wrote stays known for a while: a weak-ETag video it
    /// stored itself can be resumed); beyond this the least recently used are forgotten.
    static let idleBoards = 256

    /// Serving is use: the entry's last use is set, off the request's path and at most every 30 s
    /// per entry (a durable catalog write per request would cost a millisecond of latency each).
    public func markUsed(_ key: CacheKey) {
        let now = ContinuousClock.now
        let due = touched.withLock { t -> Bool in
            if let last = t[key], now - last < .seconds(30) { return false }
            if t.count >= 1024 { t = t.filter { now - $0.value < .seconds(30) } }
            t[key] = now
            return true
        }
        guard due else { return }
        let catalog = store.catalog
        touchQueue.async { try? catalog.touch(key: key) }
    }

    /// The cap storing keeps the cache under, and the free space it keeps on the disk, from now
    /// on (nil: none); the next room made uses them.
    public func setLimits(cap: Int64?, minFree: Int64?) { limits.withLock { $0 = (cap, minFree) } }
    public var currentCap: Int64? { limits.withLock { $0.cap } }

    /// Waits for the last-use updates handed to the background (before the server exits).
    public func flushUse() { touchQueue.sync {} }

    /// Stops every storing job and releases every waiting reader (the server is shutting down),
    /// then waits, at most `timeout` seconds, for the jobs to end: each checkpoints what it wrote
    /// (and completes a video it holds whole), so a clean stop loses no byte a player was sent.
    /// Boards made from now on are closed at once (no job starts any more).
    public func shutdown(timeout: Double = 30) {
        let all = boards.withLock { b -> [EntryBoard] in
            stopping.store(true, ordering: .relaxed)
            return Array(b.values)
        }
        for board in all { board.close() }
        testPause("serve-shutdown-waiting", store.directory)
        _ = jobThreads.waitForNone(within: timeout)
    }

    /// Storing jobs not yet ended, from their start's effects to the end of their thread
    /// (`shutdown` waits for them).
    private let jobThreads = Counter()
    /// The server is stopping (set under `boards`' lock): a new board is closed at once.
    private let stopping = Atomic<Bool>(false)

    public init(store: CacheStore, options: PrefetchOptions) {
        self.store = store
        var options = options
        options.expandStreams = false  // a player fetches what it plays, through the proxy
        self.options = options
        limits = Locked((options.maxSize, options.minFree))
    }

    /// Told of a storing job that failed for this machine's sake (the disk or the catalog: EIO, a
    /// full disk, a failed commit): the URL and the error. The players are served on from the
    /// origin, so without it a failing disk would leave no trace in serve's log.
    private let storeFailed = Locked<(@Sendable (String, PrefetchError) -> Void)?>(nil)
    public func onStoreFailure(_ report: @escaping @Sendable (String, PrefetchError) -> Void) { storeFailed.withLock { $0 = report } }

    /// Storing jobs running now (serve's metrics), from their start's effects (the flock, room
    /// made) until each has let go of its lock, its files and its connections to the origin (0
    /// means serve holds nothing for a job).
    public var storingJobs: Int { jobThreads.count }

    /// Boards held now (for tests: they must not grow with every URL ever asked for).
    public var boardCount: Int { boards.withLock { $0.count } }

    public struct Video: Sendable {
        public var key: CacheKey
        public var url: String
        public var length: Int64
        public var validators: Validators
        public var contentType: String?
        /// Known from the catalog: no origin round trip was needed.
        public var fromCatalog: Bool
        /// How its first bytes, when fetched, are checked (`HLSMemberCheck`); nil: not at all.
        var checkSegment: HLSMemberCheck?
        /// The entry's `data` as it was when the video was opened, with the claims justified for it.
        let snapshot: Snapshot
        /// The head `open` stored itself into that very file (claimed there, of this version):
        /// recorded as this process's own writes once a reader holds the file.
        var ownHead = RangeSet()
    }

    /// The entry's `data` held open (LOCK_SH) and what the catalog claims for that very file.
    struct Snapshot: Sendable {
        var file: RawFile?
        var fileID: FileID?
        var claims = RangeSet()
        var entry: CacheEntry?
        /// Why `data` could not be opened (not ENOENT): logged with the request.
        var problem: String?
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

    /// Opens `data` (if any) and reads the catalog, in that order, then checks that the path still
    /// names the opened file: the claims read are then about that file. Tried a few times when
    /// another process replaces `data` in between. `promised`: the version a response already
    /// promised; claims of any other version are not about its bytes, and are left out.
    func snapshot(_ key: CacheKey, promised: Validators? = nil) -> Snapshot {
        var s = Snapshot()
        let path = store.dataPath(key)
        /// The entry's claims, when it is of the version promised (if any).
        func justified(_ e: CacheEntry?) -> RangeSet {
            guard let e, promised.map({ $0.admits(e.validators) }) ?? true else { return RangeSet() }
            return e.ranges
        }
        for _ in 0..<4 {
            s.file?.close()
            s.file = nil
            s.fileID = nil
            s.problem = nil
            do {
                let f = try store.openDataForReading(key: key)
                s.file = f
                s.fileID = try f.identity()
            } catch let e as SystemError where e.errno == ENOENT {
            } catch {
                s.problem = "cannot open \(path): \((error as? SystemError).map { String(cString: strerror($0.errno)) } ?? "\(error)")"
            }
            // The file held is the one the catalog was read for a moment ago: no catalog read.
            if let id = s.fileID, let e = known.entry(key, file: id) {
                s.entry = e
                s.claims = justified(e)
                return s
            }
            let readAt = ContinuousClock.now
            s.entry = (try? store.catalog.entry(key: key)) ?? nil
            guard let id = s.fileID else {
                s.claims = RangeSet()
                return s
            }
            if FileSystem.identity(path) == id {
                // Only an entry whose claims cover it: no gap for which the catalog would be
                // read again, and no head for `open` to fetch into this file.
                if let e = s.entry, let length = e.length, e.ranges.contains(ByteRange(0, length)) {
                    known.record(key, entry: e, file: id, path: path, readAt: readAt)
                }
                s.claims = justified(s.entry)
                return s
            }
        }
        // Replaced again and again: read nothing from it.
        s.file?.close()
        s.file = nil
        s.fileID = nil
        s.claims = RangeSet()
        return s
    }

    /// What is known of `url`: from the catalog when its length is there (a cached video plays
    /// with no origin round trip, and offline), else by caching its first 64 KiB.
    /// `memberCheck`: asked only when the first bytes are to be fetched; how an HLS stream member
    /// is checked before it is stored (`HLSMemberCheck`: an error page answered with 200 is not kept).
    /// `isMember`: asked only when the origin sends the first bytes with no length (chunked);
    /// true when `url` is an HLS stream's segment, init section or key, which is then fetched
    /// whole, up to `memberLimit`, so it is served by ranges like any other (a video of no
    /// stream is refused then: it could be endless).
    public func open(_ url: String, memberCheck: () -> HLSMemberCheck? = { nil }, isMember: () -> Bool = { false }) throws(OpenError) -> Video {
        let key = options.keyRules.key(for: url)
        // Players opening the same new video at once: one fetches its head, the others wait for it
        // here rather than asking the origin themselves.
        let board = self.board(key)
        defer { release(board) }
        return try board.whileOpening { () throws(OpenError) -> Video in try open(url, key: key, board: board, memberCheck: memberCheck, isMember: isMember) }
    }

    /// The most of a stream member sent with no length that `open` fetches whole.
    public static let memberLimit: Int64 = 256 << 20
    /// Seconds a new video's head fetch may take before the player is answered from what came.
    public static let headDeadline: Double = 5

    /// `open`, as the entry's only opener.
    private func open(_ url: String, key: CacheKey, board: EntryBoard, memberCheck: () -> HLSMemberCheck?, isMember: () -> Bool) throws(OpenError) -> Video {
        var snap = snapshot(key)
        if let e = snap.entry, let length = e.length {
            var video = Video(key: key, url: url, length: length, validators: e.validators, contentType: e.contentType, fromCatalog: true, snapshot: snap)
            // Only a job writing the first bytes checks them: asked only when they are missing.
            video.checkSegment = length > 0 && !snap.claims.contains(ByteRange(0, 1)) ? memberCheck() : nil
            return video
        }
        let checkSegment = memberCheck()
        snap.file?.close()
        var o = options
        (o.maxSize, o.minFree) = limits.withLock { $0 }  // those in force (SIGHUP may have changed them), not the start's
        defer { board.headDone() }
        o.onWrite = { [board, path = store.dataPath(key)] file, range in board.headWrote(range, in: file, path: path) }
        o.retries = 1
        o.waitForLock = false
        // The head runs on the player's connection, before its response head: an origin that
        // drips must not hold the player (nor the origin, once the player gave up) for minutes.
        // Past the deadline what arrived is kept, and the video opens when its length is known
        // (an origin slower than that to answer at all is waited for as before).
        o.maxTime = Self.headDeadline
        func fetchHead(_ limit: Int64) -> PrefetchResult {
            Prefetcher(store: store, options: o).run([PrefetchItem(url: url, requests: [.head(limit)], checkSegment: checkSegment)])[0]
        }
        var result = fetchHead(64 << 10)
        if result.error == .deadline {
            let known = snapshot(key)
            known.file?.close()
            if known.entry?.length != nil {
                result.error = nil
            } else {
                // No response head yet (a cold CDN edge may take longer than the deadline to
                // answer): wait for it as before, bounded by --timeout between bytes.
                o.maxTime = nil
                result = fetchHead(64 << 10)
            }
        }
        if result.error == nil, result.length == nil, isMember() {
            // A segment sent chunked (a packager, some CDNs): read whole, its length is what came.
            o.maxTime = nil  // read whole: the head's deadline is not this one's
            result = fetchHead(Self.memberLimit)
        }
        let noRoom: Bool = if case .noRoom? = result.error { true } else { false }
        if result.error == .lockBusy || noRoom {
            // Another process is writing it and has not recorded the length yet, or nothing more
            // fits under the cap or min-free (the video still plays, streamed, not stored): ask the
            // origin for one byte rather than wait behind it.
            // Its Content-Type kept: an MPD nothing of which can be stored is still known by it.
            let probed = OriginProbe.probeWithTypes([url], known: [Validators(length: nil, etag: nil, lastModified: nil)], options: o.request)[0]
            switch probed.answer {
            case .validators(let v) where v.length != nil:
                return Video(key: key, url: url, length: v.length!, validators: v, contentType: probed.contentType, fromCatalog: false, snapshot: Snapshot())
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
        // A manifest the head read whole is answered from these bytes (one origin request, not a
        // second fetch): its relative URLs resolve against the URL that answered it.
        if result.isPlaylist, let final = result.finalURL { try? store.catalog.recordFinalURL(key: key, url: final) }
        snap = snapshot(key)
        guard let e = snap.entry, let length = e.length else {
            snap.file?.close()
            throw .unreachable("the origin did not say the video's length")
        }
        var video = Video(key: key, url: url, length: length, validators: e.validators, contentType: e.contentType, fromCatalog: false, snapshot: snap)
        video.checkSegment = checkSegment
        if let id = snap.fileID, let mine = board.headRanges(id), snap.claims.contains(mine) {
            // The head this process just stored, in the very file the reader holds (the head
            // job's file was held open until now, so an inode number given out again cannot pass
            // for it; its claims cover it): its own run's bytes. Recorded on the board only once
            // a reader holds the file (a record must not outlive its file).
            video.ownHead = mine
        }
        return video
    }

    /// Stores the first `limit` bytes of `url` (all of a playlist), as `open` stores a head:
    /// under the limits in force, one attempt, never waiting behind another writer. Best effort.
    func store(_ url: String, upTo limit: Int64) {
        var o = options
        (o.maxSize, o.minFree) = limits.withLock { $0 }
        o.retries = 1
        o.waitForLock = false
        _ = Prefetcher(store: store, options: o).run([PrefetchItem(url: url, requests: [.head(limit)])])
    }

    /// Stores `body`, a whole answer the origin just gave for `url` (an MPD serve answers), as the
    /// entry's one version: the bytes served are the bytes kept, with no second request. Under
    /// the entry's writer lock (never waiting behind another writer), after making room under the
    /// limits in force as any store does; the old version is dropped first (rows, then a new
    /// `data`: a reader holding the old file keeps its view), the bytes written and fsynced before
    /// the one commit that claims them whole with their SHA-256 (invariant 1). Returns whether it
    /// stored them (best effort: nothing when the entry is gone, busy, or does not fit).
    @discardableResult
    func keepWhole(_ body: [UInt8], url: String, validators: Validators, contentType: String?) -> Bool {
        let key = options.keyRules.key(for: url), n = Int64(body.count)
        guard n > 0, ((try? store.catalog.entry(key: key)) ?? nil) != nil else { return false }
        if let room = room(for: key, wanted: n), room < n { return false }
        return alone(key) { () -> Bool in
            do {
                try store.storeWhole(body, key: key, url: url, validators: validators, contentType: contentType)
                return true
            } catch {
                return false
            }
        } ?? false
    }

    /// Runs `body` with the entry's writer lock held alone by this process (`EntryBoard.alone`):
    /// no job of this process runs or starts meanwhile, and the flock keeps other processes out.
    /// Nil when the entry is busy here or elsewhere.
    private func alone<T>(_ key: CacheKey, board given: EntryBoard? = nil, _ body: () -> T) -> T? {
        let board = given ?? self.board(key)
        defer { if given == nil { release(board) } }
        return board.alone(take: { (try? store.tryLockWriter(key: key)) ?? nil }, body)
    }

    /// Drops an entry's cached bytes (its version is gone from the origin): rows first, then a
    /// new `data`, under the entry's writer lock; nothing when another writer holds it now.
    /// Returns whether it dropped them.
    @discardableResult
    func dropCachedBytes(key: CacheKey) -> Bool {
        guard ((try? store.catalog.entry(key: key)) ?? nil) != nil else { return false }
        return alone(key) { () -> Bool in
            do {
                try store.dropVersion(key: key, validators: Validators(length: nil, etag: nil, lastModified: nil)).close()
                return true
            } catch { return false }
        } ?? false
    }

    /// The entry's board, made when missing (and counted in use until `release`).
    func board(_ key: CacheKey) -> EntryBoard {
        boards.withLock { b in
            if let x = b[key] {
                x.retain()
                return x
            }
            if b.count >= 2 * Self.idleBoards { prune(&b) }
            let x = EntryBoard()
            if stopping.load(ordering: .relaxed) { x.close() }
            x.retain()
            b[key] = x
            return x
        }
    }

    /// One holder of the board is done with it.
    func release(_ board: EntryBoard) { board.release() }

    /// Forgets idle boards (no reader, opener or job), least recently used first, down to `idleBoards`.
    private func prune(_ b: inout [CacheKey: EntryBoard]) {
        var idle: [(CacheKey, ContinuousClock.Instant)] = []
        for (key, board) in b {
            if let since = board.idleSince { idle.append((key, since)) }
        }
        let excess = b.count - Self.idleBoards
        guard excess > 0 else { return }
        for (key, _) in idle.sorted(by: { $0.1 < $1.1 }).prefix(excess) { b[key] = nil }
    }

    /// The bytes `range` of `video`, read as the player asks for them, from the file `open` holds.
    public func reader(_ video: Video, range: ByteRange) -> RangeReader {
        let board = self.board(video.key)
        let snap = video.snapshot
        // Every claimed byte of the file is this process's own, of the promised version; jobs
        // of this process writing the entry: it cannot be started over under them.
        let (own, busy) = board.ownership(of: snap.claims, in: snap.fileID, promised: video.validators, ownHead: video.ownHead)
        let decision = ServeDecision.Open(validators: video.validators, span: range, claims: snap.claims, claimsAreOwn: own,
                                          canTakeEntry: !busy)
        switch decision.start {
        case .readThrough(let combine):
            return RangeReader(owner: self, board: board, video: video, range: range, snapshot: snap, weakPartsCombine: combine, ownHead: video.ownHead)
        case .startOver:
            if startOver(video, board) {
                testPause("serve-start-over-after-drop", video.key)
                snap.file?.close()
                // The entry as it is now: another writer may have come in since the start-over.
                // Claims of another version are not about the promised bytes (that writer, finding
                // no byte, took whatever the origin sent into the new file); claims of this version
                // came from that writer's run, and are never combined with this one's.
                let fresh = snapshot(video.key, promised: video.validators)
                if fresh.claims.isEmpty {
                    return RangeReader(owner: self, board: board, video: video, range: range, snapshot: fresh, weakPartsCombine: true)
                }
                let whole = !fresh.claims.contains(range)
                return RangeReader(owner: self, board: board, video: video, range: range, snapshot: fresh, weakPartsCombine: false, streamWhole: whole)
            }
            return RangeReader(owner: self, board: board, video: video, range: range, snapshot: snap, weakPartsCombine: false, streamWhole: true)
        case .streamWhole:
            return RangeReader(owner: self, board: board, video: video, range: range, snapshot: snap, weakPartsCombine: false, streamWhole: true)
        }
    }

    /// A video without a strong validator whose cached bytes came from another run: those bytes
    /// are never combined with new ones, so the entry gets a new, empty `data` (the catalog keeps
    /// its validators, the promised version) before this process stores anything in it. False
    /// when the entry cannot be taken now (another process writes it).
    private func startOver(_ video: Video, _ board: EntryBoard) -> Bool {
        alone(video.key, board: board) { () -> Bool in
            guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, video.validators.admits(e.validators) else { return false }
            do {
                try store.dropVersion(key: video.key, validators: video.validators).close()
                return true
            } catch {
                return false
            }
        } ?? false
    }

    /// How many more bytes may be stored under the cap and above the disk's kept free space
    /// (nil: neither is set), after evicting least recently used entries other than `key` to make
    /// room for `wanted` of them (the video being played is the most recently used; an entry
    /// being served is never evicted: its readers hold `data` open).
    func room(for key: CacheKey, wanted: Int64) -> Int64? {
        let (maxSize, minFree) = limits.withLock { $0 }
        let evictor = Evictor(store: store)
        // min-free: the cache may grow only by what the disk has beyond it (what is missing
        // of it comes off the cache); serve's rule, not prefetch's (`SpaceBudget.MinFreeRule`).
        let budget = SpaceBudget(maxSize: maxSize, minFree: minFree, minFreeRule: .headroom)
        let free = budget.measuresFree ? FileSystem.space(store.directory)?.free : nil
        let usage = budget.measuresUsage(free: free)
            ? (try? store.catalog.allEntries()).map { evictor.footprint(exact: false).total($0) } : nil
        guard let cap = budget.limit(free: free, usage: usage) else { return nil }
        // Storing adds more than its bytes: the entry's folders and the catalog's journal.
        // (`wanted` may be an origin's length near 2^63: saturating, it means "all of the cap".)
        let growth = evictor.footprint(exact: false).growthAllowance
        var c = Evictor.Criteria()
        c.maxSize = SpaceBudget.evictionTarget(limit: cap, wanted: wanted, growth: growth)
        c.protected = [key]
        return SpaceBudget.room(limit: cap, usageAfter: (try? evictor.evict(c, dryRun: false))?.usageAfter, growth: growth)
    }

    /// The disk filled while storing: least recently used entries other than `key` (never one in
    /// use) are evicted to free `wanted` bytes, the cap's rules without a cap. True when some
    /// space was freed (a new job may then try again).
    func makeRoom(for key: CacheKey, wanted: Int64) -> Bool {
        // A span larger than the whole file system never fits: evicting for it would only lose videos.
        guard SpaceBudget.fullDiskMayFit(wanted: wanted, fileSystemSize: FileSystem.space(store.directory)?.size) else { return false }
        let evictor = Evictor(store: store)
        guard let entries = try? store.catalog.allEntries() else { return false }
        var c = Evictor.Criteria()
        c.maxSize = SpaceBudget.fullDiskTarget(usage: evictor.footprint(exact: false).total(entries), freeing: wanted)
        c.protected = [key]
        return ((try? evictor.evict(c, dryRun: false))?.freedBytes ?? 0) > 0
    }

    /// Runs the effects of a job start the board decided for `reader` (`EntryState.JobStart`),
    /// outside the board's lock: room made under the cap, the entry's writer lock taken if no job
    /// of this process holds it (another process holding it means no job), the reader's file
    /// adopted, then the job admitted on the board (its plan taken again if the jobs changed
    /// meanwhile) and run on its own thread, limited to what fits. Nil when none can start (the
    /// reader then streams without storing). The job writes into the reader's file: the entry's
    /// `data` must still be that file, and the catalog's version the promised one (checked under
    /// the writer lock); a reader without a file gets the one the job creates. Jobs of one entry
    /// never fetch the same byte: a job whose span covers the new job's start but is far behind it
    /// stops there and the new job takes over the rest of its span, and the new job stops where a
    /// later one began.
    func startJob(_ start: EntryState.JobStart, board: EntryBoard, reader: RangeReader) -> EntryBoard.StartOutcome {
        let video = reader.video
        // Counted from now, not from the thread's spawn: `shutdown` waits for the start's effects
        // (the flock, eviction, `data`) and for the job admitted at their end. Counted only at the
        // spawn, a start admitted just before `close` stopped it was not waited for: `shutdown`
        // returned with the flock held and the job's thread still to come.
        jobThreads.add()
        // Room first: the flock is taken on the entry's folder, made for it if missing; an entry
        // nothing fits for must not be left an empty folder with no row.
        let room: Int64? = if let whole = start.plan.span { self.room(for: video.key, wanted: whole.count) } else { nil }
        guard start.plan.fitted(room: room) != nil else {
            if start.takesLock { _ = board.takeLock(for: start, { nil }) } else { board.abandon(start) }
            jobThreads.remove()
            return .none
        }
        guard board.takeLock(for: start, { (try? store.tryLockWriter(key: video.key)) ?? nil }) else {
            jobThreads.remove()
            return .none
        }
        testPause("serve-job-start-effects", video.key)
        // Under the writer lock nobody else replaces `data` or changes the version.
        guard let fileID = reader.adoptFileForJob() else {
            board.abandon(start)
            jobThreads.remove()
            return .none
        }
        let flag = Fetcher.StopFlag()
        let (admission, again) = board.admit(start, room: room, file: fileID, stop: { flag.stop(reason: SIGTERM) })
        guard let admitted = admission else {
            jobThreads.remove()
            return again ? .again : .none
        }
        let job = admitted.job, span = admitted.span
        testPause("serve-start-admitted", video.key)
        var o = options
        o.sharedLock = board.jobLock()
        o.stopAt = { [board] in board.limit(of: job) }
        o.maxSize = nil        // the room was made above (cap and min-free); the job stores no more than fits
        o.minFree = nil
        o.onWrite = { [board, version = video.validators] file, range in board.recordWrite(range, in: file, by: job, version: version) }
        // Before the catalog names another version and before the file can go: no reader trusts
        // what this job wrote into it from now on, and none waits for this job.
        o.onDrop = { [board] _ in board.writerDropping(job) }
        o.onGiveBack = { [board] file, ranges, punch in board.giveBack(ranges, in: file, by: job, punch: punch) }
        o.expectedVersion = video.validators
        o.heldBytesAreThisRuns = reader.weakPartsCombine
        let item = PrefetchItem(url: video.url, requests: [.span(first: span.lowerBound, last: span.upperBound - 1)], checkSegment: video.checkSegment)
        let options = o
        board.retain()  // the job's; released when it ends
        DetachedThread.start { [self] in
            // Counted until all is let go: its lock, its `data`, and its fetch loop's handles
            // and connections (the prefetcher, released with this function's scope).
            defer { jobThreads.remove() }
            runJob(item, options: options, flag: flag, board: board, job: job, key: video.key, span: span)
        }
        return .started(job)
    }

    /// A storing job, on its own thread (`startJob`).
    private func runJob(_ item: PrefetchItem, options: PrefetchOptions, flag: Fetcher.StopFlag, board: EntryBoard, job: EntryState.JobID,
                        key: CacheKey, span: ByteRange) {
        let result: PrefetchResult
        do {
            let prefetcher = Prefetcher(store: store, options: options, stopFlag: flag) { event in
                switch event {
                // `.videoChanged`: it writes into a new `data` now (`onDrop` let go of the old one).
                case .retrying(_, _, _, let reason): board.writerRetrying(job, reason: reason)
                default: break
                }
            }
            result = prefetcher.run([item])[0]
        }
        if case .disk(let e) = result.error, e.isNoSpace {
            _ = makeRoom(for: key, wanted: span.count)
        }
        // The cap is no fault (the rest streams by design); the disk or the catalog failing is.
        let noRoom: Bool = if case .noRoom? = result.error { true } else { false }
        if let e = result.error, e.remedy == .fixLocal, !noRoom, let report = storeFailed.withLock({ $0 }) {
            report(item.url, e)
        }
        board.writerEnded(job, error: result.error)
        testPause("serve-job-before-leave", key)
        // The drop another job handed over (a completion that did not hash as the first), run
        // now that this job is the last: its failure is a disk fault like the job's own.
        if let e = board.jobLeft(), let report = storeFailed.withLock({ $0 }) {
            report(item.url, PrefetchError(e))
        }
        if result.error == nil { try? store.catalog.touch(key: key) }
        release(board)
    }
}

/// A count that can be waited down to zero (storing jobs still running).
final class Counter: @unchecked Sendable {
    // @unchecked: `value` is read and written with `cond` locked.
    private let cond = MonotonicCondition()
    private var value = 0
    func add() {
        cond.lock()
        value += 1
        cond.unlock()
    }
    func remove() {
        cond.lock()
        value -= 1
        cond.broadcast()
        cond.unlock()
    }
    var count: Int {
        cond.lock()
        defer { cond.unlock() }
        return value
    }
    /// Waits until the count is zero or `seconds` (monotonic) pass; true when it is zero.
    func waitForNone(within seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        cond.lock()
        defer { cond.unlock() }
        while value > 0 {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero || !cond.wait(seconds: left.inSeconds) { return value == 0 }
        }
        return true
    }
}
