import Foundation
import Synchronization

/// One response's bytes: a span of a video, produced in order as the player reads. Cached bytes
/// come from `data`; missing ones from a storing job (one about to write them is waited for,
/// otherwise one is started for them), or, when none can run (another process writes the entry,
/// or nothing more fits under the cap), from a `DirectStream` that is not stored. Runs on the
/// connection's thread and may block there (libmicrohttpd's thread-per-connection mode).
public final class RangeReader: HTTPServer.Producer, @unchecked Sendable {
    // @unchecked: used by one connection thread at a time; the board has its own lock, and the
    // counters are atomics read by the log line at the end.
    let owner: ReadThrough
    let board: EntryBoard
    public let video: ReadThrough.Video
    public let range: ByteRange
    let cached: RangeSet
    let data: RawFile?
    let generation: Int
    private var direct: DirectStream?
    private var writersStarted = 0
    /// Bytes sent from what was cached when the response began, and from the origin since.
    public let fromCache = Atomic<Int64>(0)
    public let fromOrigin = Atomic<Int64>(0)
    /// Why the response was cut short, if it was.
    public private(set) var failure: String?
    private let closed = Atomic<Bool>(false)

    init(owner: ReadThrough, board: EntryBoard, video: ReadThrough.Video, range: ByteRange, cached: RangeSet, data: RawFile?) {
        self.owner = owner
        self.board = board
        self.video = video
        self.range = range
        self.cached = cached
        self.data = data
        board.cond.lock()
        board.readers += 1
        generation = board.generation
        board.cond.unlock()
    }

    /// Every byte of the span is cached now: it can go out by sendfile.
    public var isCached: Bool { data != nil && cached.contains(range) }

    public func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let p = range.lowerBound + offset
        guard p < range.upperBound, !closed.load(ordering: .relaxed) else { return nil }
        let want = Int(min(Int64(buffer.count), range.upperBound - p))
        if let direct { return pass(direct.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]))) }
        while true {
            board.cond.lock()
            if board.closing {
                board.cond.unlock()
                failure = "the server is stopping"
                return nil
            }
            if board.generation != generation {
                board.cond.unlock()
                failure = "the video changed on the origin while it was served"
                return nil
            }
            let fromSnapshot = cached.contiguousEnd(from: p)
            let end = max(fromSnapshot, board.written.contiguousEnd(from: p))
            if end > p, let data {
                board.cond.unlock()
                let n = Int(min(Int64(want), end - p))
                guard (try? data.readExactly(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), fromAbsoluteOffset: p)) != nil else {
                    failure = "cannot read the cached bytes"
                    return nil
                }
                if fromSnapshot > p { fromCache.add(Int64(n), ordering: .relaxed) } else { fromOrigin.add(Int64(n), ordering: .relaxed) }
                return n
            }
            if data != nil, board.writers.contains(where: { !$0.finished && $0.start <= p && p < $0.effectiveEnd && p <= $0.position + ReadThrough.waitWindow }) {
                // A storing job will write these bytes soon: wait for them, not fetch them twice.
                _ = board.cond.wait(until: Date().addingTimeInterval(1))
                board.cond.unlock()
                if closed.load(ordering: .relaxed) { return nil }
                continue
            }
            // Otherwise a job of its own for the bytes from here (one that covers them but is far
            // behind hands them over), or, when none can start, the origin unstored.
            if data == nil || writersStarted >= 3 {
                board.cond.unlock()
                return startDirect(at: p, into: buffer, want: want)
            }
            writersStarted += 1
            guard owner.startWriter(board, video: video, span: ByteRange(p, range.upperBound)) else {
                // Another process writes the entry, or nothing more fits under the cap: the rest
                // plays, streamed, not stored.
                board.cond.unlock()
                return startDirect(at: p, into: buffer, want: want)
            }
            board.cond.unlock()
        }
    }

    /// Streams the rest of the span straight from the origin, not stored.
    private func startDirect(at p: Int64, into buffer: UnsafeMutableRawBufferPointer, want: Int) -> Int? {
        let d = DirectStream(url: video.url, span: ByteRange(p, range.upperBound), validators: video.validators, options: owner.options.request)
        direct = d
        return pass(d.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])))
    }

    private func pass(_ n: Int?) -> Int? {
        guard let n, n > 0 else {
            failure = failure ?? direct?.error ?? "the origin stopped sending"
            return nil
        }
        fromOrigin.add(Int64(n), ordering: .relaxed)
        return n
    }

    public func finished(completed: Bool) {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        board.cond.lock()
        board.readers -= 1
        // The last reader left: what is still to fetch is not worth it for nobody (a player that
        // seeks away leaves no download behind). A job with at most 1 MiB left finishes: its last
        // checkpoint, and the digest when the entry is now complete.
        var stops: [() -> Void] = []
        if board.readers == 0 {
            for w in board.writers where w.position < w.effectiveEnd {
                var left = RangeSet([ByteRange(w.position, w.effectiveEnd)])
                for r in cached.ranges { left.remove(r) }
                for r in board.written.ranges { left.remove(r) }
                if left.count > ReadThrough.waitWindow { stops.append(w.stop) }
            }
        }
        board.cond.broadcast()
        board.cond.unlock()
        for s in stops { s() }
        data?.close()
    }
}
