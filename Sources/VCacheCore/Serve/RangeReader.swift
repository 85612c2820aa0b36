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
import Synchronization

/// One response's bytes: a span of a video, produced in order as the player reads. What it sends
/// from the cache is justified by the file it holds (`ServeDecision`): the catalog's claims read
/// while that file was the entry's `data` and of the promised version, or bytes this process
/// wrote into that same file. Missing bytes come from a storing job (one about to write them is
/// waited for, otherwise one is started), or, when none can run (another process writes the
/// entry, nothing more fits under the cap, the file was evicted or replaced), from a
/// `DirectStream` that is not stored. Runs on the connection's thread and may block there
/// (libmicrohttpd's thread-per-connection mode).
public final class RangeReader: HTTPServer.Producer, @unchecked Sendable {
    // @unchecked: used by one connection thread at a time (a job start's effects run on that
    // same thread, outside the board's lock); the board has its own lock,
    // and the counters are atomics read by the log line at the end.
    let owner: ReadThrough
    let board: EntryBoard
    public let video: ReadThrough.Video
    public let range: ByteRange
    /// The file this response reads, and what is known of it.
    private struct Source {
        var file: RawFile?
        var id: FileID?
        /// Claims justified for `file` (they only grow: a claim about a file stays true of it).
        var claims: RangeSet
        /// Where the reader last read the catalog at a gap (nil: not at this gap yet).
        var refreshedAt: Int64?
    }
    private var source: Source
    private var file: RawFile? { source.file }
    var fileID: FileID? { source.id }
    private var claims: RangeSet { source.claims }
    /// What was claimed when the response began (bytes counted as from the cache).
    private let claimedAtStart: RangeSet
    /// Parts under a weak validator may be combined: every cached byte of the file is this
    /// process's own (Docs/cache-format.md, "Versions").
    let weakPartsCombine: Bool
    /// Bytes of another run under a weak validator may go out: then nothing else may follow.
    private let foreignWeak: Bool
    /// The whole span comes from one origin response (`ServeDecision.Start.streamWhole`).
    private let streamWhole: Bool
    /// Whether this response may store what it fetches, and the storing jobs it asked for and started.
    private var storing: (allowed: Bool, asked: Int, started: [EntryState.JobID])
    private var direct: DirectStream?
    /// The first bytes: being read before the response head goes out (`prepare`), then kept
    /// until sent (with their offset).
    private var head = Head.none
    private enum Head {
        case none
        case preparing
        case primed(bytes: [UInt8], at: Int64)
    }
    private var preparing: Bool { if case .preparing = head { true } else { false } }
    /// Bytes sent from what was cached when the response began, and from the origin since.
    public let fromCache = Atomic<Int64>(0)
    public let fromOrigin = Atomic<Int64>(0)
    /// Why the response was cut short, and the origin's HTTP status when that is why it could
    /// not begin.
    private var cut: (why: String, status: Int?)?
    /// Why the response was cut short, if it was.
    public var failure: String? { cut?.why }
    /// The origin's HTTP status when that is why the response could not begin.
    public var failureStatus: Int? { cut?.status }
    /// Why `data` could not be opened (logged with the request), if it could not.
    public let fileProblem: String?
    private let closed = Atomic<Bool>(false)

    /// `ownHead`: the head `open` stored into the snapshot's file, recorded once this reader holds it.
    init(owner: ReadThrough, board: EntryBoard, video: ReadThrough.Video, range: ByteRange, snapshot: ReadThrough.Snapshot,
         weakPartsCombine: Bool, streamWhole: Bool = false, ownHead: RangeSet = RangeSet()) {
        self.owner = owner
        self.board = board
        self.video = video
        self.range = range
        // The claims were read just now, at the span's start.
        source = Source(file: snapshot.file, id: snapshot.fileID, claims: snapshot.claims, refreshedAt: range.lowerBound)
        claimedAtStart = snapshot.claims
        fileProblem = snapshot.problem
        self.weakPartsCombine = weakPartsCombine
        self.streamWhole = streamWhole
        foreignWeak = !video.validators.hasStrongValidator && !weakPartsCombine
        storing = (snapshot.problem == nil && !foreignWeak && !streamWhole, 0, [])
        board.readerArrived(holding: fileID, ownHead: ownHead, version: video.validators)
    }

    /// Every byte of the span is cached in the reader's file: it can go out by sendfile.
    public var isCached: Bool { file != nil && !streamWhole && claims.contains(range) }

    /// What the cache held of the span when the response began (the `X-Cache` header).
    public var cacheStatus: CacheStatus {
        CacheStatus(cached: file == nil || streamWhole ? 0 : claimedAtStart.coverage(of: range), of: range.count)
    }

    /// The file to send from when `isCached`.
    public var cachedFile: RawFile? { isCached ? file : nil }

    /// Makes the first bytes ready before the response head goes out, so a response that cannot
    /// begin gets a status (the origin's, or 502) rather than a 200 cut at once. Nil when ready.
    public func prepare() -> (status: Int, reason: String)? {
        guard !range.isEmpty, !isCached else { return nil }
        head = .preparing
        defer { if preparing { head = .none } }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let n = buffer.withUnsafeMutableBytes { read(at: 0, into: $0) }
        guard let n, n > 0 else {
            var why = failure ?? "the origin sent nothing"
            if let fileProblem { why = "\(fileProblem); \(why)" }
            return (failureStatus ?? 502, why)
        }
        head = .primed(bytes: Array(buffer[0..<n]), at: 0)
        return nil
    }

    public func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard !closed.load(ordering: .relaxed) else { return nil }
        if case .primed(var bytes, let at) = head, offset == at {
            let n = min(buffer.count, bytes.count)
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            bytes.removeFirst(n)
            head = bytes.isEmpty ? .none : .primed(bytes: bytes, at: at + Int64(n))
            return n
        }
        let p = range.lowerBound + offset
        guard p < range.upperBound else { return nil }
        let want = Int(min(Int64(buffer.count), range.upperBound - p))
        let out = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
        if let direct { return pass(direct.read(into: out)) }
        // The common case first: claimed bytes of the reader's own file.
        if file != nil, !streamWhole {
            let end = claims.contiguousEnd(from: p)
            if end > p { return readFile(p, upTo: end, into: out) }
        }
        while true {
            let at = EntryState.ReaderAt(position: p, end: range.upperBound, claims: claims, file: fileID, promised: video.validators, hasFile: file != nil && !streamWhole,
                                         refreshed: source.refreshedAt == p, mayStore: storing.allowed, preparing: preparing,
                                         jobsAsked: storing.asked, started: storing.started)
            switch board.step(at, start: { owner.startJob($0, board: board, reader: self) }) {
            case .closing:
                cut = ("the server is stopping", nil)
                return nil
            case .read(let upTo, let fromWrites):
                let n = readFile(p, upTo: upTo, into: out)
                if fromWrites { board.doneReadingWrites() }
                return n
            case .refresh:
                refresh(at: p)
            case .jobInTrouble(let trouble):
                // About to answer: a job retrying the origin means the origin is not there now.
                cut = (trouble, nil)
                return nil
            case .waited(let signalled):
                if closed.load(ordering: .relaxed) { return nil }
                if !signalled { source.refreshedAt = nil }
            case .failedHere(let failed):
                // A job of this response failed here already: the origin's answer stands (a 404
                // is not asked for three times), and a response not yet begun gets it.
                if preparing {
                    noteFailure(failed)
                    return nil
                }
                storing.allowed = false
            case .again:
                source.refreshedAt = nil
            case .asked(let started):
                storing.asked += 1
                if let started {
                    storing.started.append(started)
                    source.refreshedAt = nil
                } else {
                    // Another process writes the entry, nothing more fits under the cap, or the
                    // file is not the entry's any more: the rest plays, streamed, not stored.
                    storing.allowed = false
                }
            case .stream(let span, let failed):
                if let failed, preparing {
                    // A job of this response failed where it begins: that is the answer.
                    noteFailure(failed)
                    return nil
                }
                if foreignWeak && p > range.lowerBound {
                    // Bytes of another run under a weak validator went out: nothing proves the
                    // origin's are the same version, so they are not joined.
                    cut = ("the cached bytes have no strong validator and cannot be joined with the origin's", nil)
                    return nil
                }
                return startDirect(span, into: out)
            }
        }
    }

    /// Why the cached file cannot be read from `offset` on (at most 8 MiB of it is read), or nil:
    /// for a body sent by sendfile that stopped while the client stayed (the server saw a read fail).
    public func readProblem(from offset: Int64) -> String? {
        guard let file, offset >= range.lowerBound else { return nil }
        let end = min(range.upperBound, Checked.saturatingAdd(offset, 8 << 20))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var at = offset
        while at < end {
            let n = Int(min(Int64(buffer.count), end - at))
            do {
                try file.readExactly(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), fromAbsoluteOffset: at)
            } catch {
                return "cannot read the cached bytes: \(error)"
            }
            at += Int64(n)
        }
        return nil
    }

    private func readFile(_ p: Int64, upTo end: Int64, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard let file else { return nil }
        let n = Int(min(Int64(out.count), end - p))
        do {
            try file.readExactly(into: UnsafeMutableRawBufferPointer(rebasing: out[0..<n]), fromAbsoluteOffset: p)
        } catch {
            cut = ("cannot read the cached bytes: \(error)", nil)
            return nil
        }
        if claimedAtStart.contains(ByteRange(p, p + Int64(n))) { fromCache.add(Int64(n), ordering: .relaxed) } else { fromOrigin.add(Int64(n), ordering: .relaxed) }
        return n
    }

    /// Reads what the catalog claims now; the claims count for the reader's file only while the
    /// path still names it and the catalog's version is the promised one. A reader combining parts
    /// under a weak validator takes only claims of bytes this process wrote (another process,
    /// finding the file without a claim, may have stored another run's bytes in it).
    private func refresh(at p: Int64) {
        source.refreshedAt = p
        guard let fileID else { return }
        guard let entry = (try? owner.store.catalog.entry(key: video.key)) ?? nil else { return }
        guard FileSystem.identity(owner.store.dataPath(video.key)) == fileID, video.validators.admits(entry.validators) else { return }
        var claims = entry.ranges
        if combinesWeakParts {
            claims = Self.common(claims, board.ownWrites(fileID, promised: video.validators))
        }
        source.claims.formUnion(claims)
    }

    /// Parts under a weak validator (or none) are combined by this response: only this run's may be.
    private var combinesWeakParts: Bool { weakPartsCombine && !video.validators.hasStrongValidator }

    /// The bytes in both sets.
    static func common(_ a: RangeSet, _ b: RangeSet) -> RangeSet {
        var outside = a
        for r in b.ranges { outside.remove(r) }
        var both = a
        for r in outside.ranges { both.remove(r) }
        return both
    }

    /// For a storing job about to start (the writer lock held, not the board's): the file it
    /// will write into, which must be the reader's. A reader without a file gets the one the job
    /// will use (created now, under the lock). Nil when the job would write elsewhere, or combine
    /// weak parts with bytes another process stored (claims not this process's), or: the entry's
    /// `data` is another file now, or the catalog holds another version.
    func adoptFileForJob() -> FileID? {
        let store = owner.store
        let entry = (try? store.catalog.entry(key: video.key)) ?? nil
        if let entry, !video.validators.admits(entry.validators) { return nil }
        // A job combining weak parts goes only into a file whose every claim is this process's.
        func foreign(_ id: FileID) -> Bool {
            guard combinesWeakParts, let entry else { return false }
            return !board.ownWrites(id, promised: video.validators).contains(entry.ranges)
        }
        if let fileID {
            return FileSystem.identity(store.dataPath(video.key)) == fileID && !foreign(fileID) ? fileID : nil
        }
        guard fileProblem == nil else { return nil }
        do {
            try store.openDataForWriting(key: video.key).close()
            let f = try store.openDataForReading(key: video.key)
            let id = try f.identity()
            guard !foreign(id) else {
                f.close()
                return nil
            }
            source.file = f
            source.id = id
            board.adopt(id)
            if let entry { source.claims.formUnion(entry.ranges) }
            return id
        } catch {
            return nil
        }
    }

    /// Streams a span straight from the origin, not stored.
    private func startDirect(_ span: ByteRange, into out: UnsafeMutableRawBufferPointer) -> Int? {
        let d = DirectStream(url: video.url, span: span, validators: video.validators, options: owner.options.request)
        direct = d
        return pass(d.read(into: out))
    }

    private func pass(_ n: Int?) -> Int? {
        guard let n, n > 0 else {
            cut = (cut?.why ?? direct?.error ?? "the origin stopped sending", cut?.status ?? direct?.status)
            return nil
        }
        fromOrigin.add(Int64(n), ordering: .relaxed)
        return n
    }

    private func noteFailure(_ e: PrefetchError) {
        if case .http(let status, _) = e { cut = (e.description, status) } else { cut = (e.description, cut?.status) }
    }

    public func finished(completed: Bool) {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        board.readerLeft(holding: fileID, claims: claims, promised: video.validators, started: storing.started)
        file?.close()
        owner.release(board)
    }
}

