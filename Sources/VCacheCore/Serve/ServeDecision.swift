/// What `serve` does next for one response, as pure values (the way `ResponseJudge` is for origin
/// responses): table-tested in `ServeDecisionTests` without an origin or a process.
///
/// The one rule behind both: a reader may send from the cache only bytes justified by the very
/// file it holds open (`data`, by device and inode): the catalog's claims read while that file
/// was still the entry's `data`, or bytes this process wrote into that same file. Another process
/// may evict, drop, replace or complete the entry at any moment; a claim about another file is
/// never a claim about this one.
public enum ServeDecision {
    /// How far ahead of a storing job's write position a reader waits for it rather than
    /// fetching the bytes some other way.
    public static let waitWindow: Int64 = 1 << 20
    /// Storing jobs one response may start before it streams the rest unstored.
    public static let jobsPerResponse = 3

    /// A storing job of this process on the reader's entry, as the reader sees it.
    public struct Job: Equatable, Sendable {
        public var start: Int64
        /// Where it stops (exclusive): its span's end, or where a later job took over.
        public var end: Int64
        /// How far it has written.
        public var position: Int64
        /// It writes into the reader's file (not a newer `data` after a drop).
        public var writesReadersFile: Bool

        public init(start: Int64, end: Int64, position: Int64, writesReadersFile: Bool) {
            self.start = start
            self.end = end
            self.position = position
            self.writesReadersFile = writesReadersFile
        }
    }

    /// The next step of a response at `position` (what `RangeReader.read` does).
    public enum Step: Equatable, Sendable {
        /// Bytes `[position, upTo)` are justified for the reader's file: read them.
        case read(upTo: Int64)
        /// Ask the catalog what it claims now (another process may have committed more).
        case refresh
        /// A job of this process writes these bytes into the reader's file soon: wait for it.
        case wait
        /// Start a storing job for this span.
        case startJob(ByteRange)
        /// Fetch this span from the origin without storing it.
        case stream(ByteRange)
    }

    public struct Read: Equatable, Sendable {
        public var position: Int64
        public var end: Int64
        /// Bytes justified for the reader's file (claims checked against its inode, and this
        /// process's writes into it while it holds the entry).
        public var justified: RangeSet
        /// The catalog was read since the reader last reached this gap.
        public var refreshed: Bool
        /// The reader holds a file (no file: the entry has no `data`, or it cannot be opened).
        public var hasFile: Bool
        public var jobs: [Job]
        public var jobsStarted: Int
        /// Storing is allowed for this response (not when bytes of another run under a weak
        /// validator went out already, nor when the file cannot be opened).
        public var mayStore: Bool

        public init(position: Int64, end: Int64, justified: RangeSet, refreshed: Bool, hasFile: Bool, jobs: [Job],
                    jobsStarted: Int, mayStore: Bool) {
            self.position = position
            self.end = end
            self.justified = justified
            self.refreshed = refreshed
            self.hasFile = hasFile
            self.jobs = jobs
            self.jobsStarted = jobsStarted
            self.mayStore = mayStore
        }

        public var step: Step {
            let p = position
            let available = justified.contiguousEnd(from: p)
            if available > p && hasFile { return .read(upTo: min(available, end)) }
            if hasFile && !refreshed { return .refresh }
            if hasFile, jobs.contains(where: { $0.writesReadersFile && $0.start <= p && p < $0.end && p - $0.position <= waitWindow }) {
                return .wait
            }
            if mayStore && jobsStarted < jobsPerResponse { return .startJob(ByteRange(p, end)) }
            return .stream(ByteRange(p, end))
        }
    }

    /// How a response begins, decided once its span is known.
    public enum Start: Equatable, Sendable {
        /// Read through the cache: cached bytes from the file, the rest by storing jobs (or
        /// streamed). `weakPartsCombine`: the file's bytes are this process's own (or none), so
        /// parts under a weak validator may be combined.
        case readThrough(weakPartsCombine: Bool)
        /// The file's bytes have no strong validator and came from another run, and the span
        /// needs more: give the entry a new, empty `data` first (what prefetch does too), then
        /// read through.
        case startOver
        /// As `startOver`, but the entry cannot be taken now (another process writes it): the
        /// whole span streamed from one origin response, none of the cached bytes.
        case streamWhole
    }

    public struct Open: Equatable, Sendable {
        /// The promised version (from the catalog).
        public var validators: Validators
        public var span: ByteRange
        /// Claims justified for the reader's file.
        public var claims: RangeSet
        /// Every claimed byte of the file was written by this process.
        public var claimsAreOwn: Bool
        /// This process can take the entry's writer lock (no other process holds it).
        public var canTakeEntry: Bool

        public init(validators: Validators, span: ByteRange, claims: RangeSet, claimsAreOwn: Bool, canTakeEntry: Bool) {
            self.validators = validators
            self.span = span
            self.claims = claims
            self.claimsAreOwn = claimsAreOwn
            self.canTakeEntry = canTakeEntry
        }

        public var start: Start {
            if validators.hasStrongValidator { return .readThrough(weakPartsCombine: false) }
            // No validator at all: this process's own storing jobs are separate origin responses,
            // which nothing proves one version either (the origin may change its bytes, same
            // length, between them). Cached bytes go out only on their own, anything else is one
            // origin response streamed whole, and serve stores none of it.
            if validators.hasNoValidator {
                return span.isEmpty || claims.contains(span) ? .readThrough(weakPartsCombine: false) : .streamWhole
            }
            if claims.isEmpty || claimsAreOwn { return .readThrough(weakPartsCombine: true) }
            // Bytes of another run under a weak validator: usable on their own, never combined.
            if span.isEmpty || claims.contains(span) { return .readThrough(weakPartsCombine: false) }
            return canTakeEntry ? .startOver : .streamWhole
        }
    }

    /// Where a new storing job for the bytes from `wanted.lowerBound` runs, against the jobs of
    /// the entry running now: jobs of one entry never fetch the same byte. A running job whose
    /// span covers that point (it is far behind it) is overtaken: it stops there, and the new job
    /// takes over the rest of its span; the new job stops where a later one begins.
    public struct NewJob: Equatable, Sendable {
        public var wanted: ByteRange
        /// The running jobs' spans, from their start to where they stop now.
        public var running: [ByteRange]
        /// The least room worth a job (less: the reader streams without storing).
        public static let minimumRoom: Int64 = 64 << 10

        public init(wanted: ByteRange, running: [ByteRange]) {
            self.wanted = wanted
            self.running = running
        }

        /// Indices in `running` of the jobs the new one overtakes.
        public var overtaken: [Int] {
            let p = wanted.lowerBound
            return running.indices.filter { running[$0].lowerBound <= p && p < running[$0].upperBound }
        }

        /// The new job's span before any room is counted; nil: no byte is left to it.
        public var span: ByteRange? {
            let p = wanted.lowerBound
            var end = wanted.upperBound
            for i in overtaken { end = max(end, running[i].upperBound) }
            for r in running where r.lowerBound > p { end = min(end, r.lowerBound) }
            return end > p ? ByteRange(p, end) : nil
        }

        /// The span cut to what fits when `room` more bytes may be stored (nil: no limit). What
        /// the running jobs are still to store is not in the catalog's usage yet: their whole
        /// spans count against the room (what they stored already then counts twice: the cap
        /// errs on the safe side). Nil when less than `minimumRoom` is left.
        public func fitted(room: Int64?) -> ByteRange? {
            guard let span else { return nil }
            guard var room else { return span }
            let p = wanted.lowerBound
            let over = Set(overtaken)
            for (i, r) in running.enumerated() { room = Checked.saturatingSubtract(room, over.contains(i) ? p - r.lowerBound : r.count) }
            guard room >= Self.minimumRoom else { return nil }
            return ByteRange(p, min(span.upperBound, Checked.saturatingAdd(p, room)))  // p near 2^63 (an origin's length)
        }
    }

    /// The last reader of an entry left: whether a job at `position` that stops at `end` is
    /// stopped. One with at most `waitWindow` left to fetch (less what `have` holds: claimed, or
    /// written by this process) finishes: its last checkpoint, and the digest when the entry is
    /// then complete, are worth it.
    public static func stopsWithoutReaders(from position: Int64, to end: Int64, have: RangeSet) -> Bool {
        guard position < end else { return false }
        var left = RangeSet([ByteRange(position, end)])
        for r in have.ranges { left.remove(r) }
        return left.count > waitWindow
    }
}
