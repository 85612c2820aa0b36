/// The job's phase, and what it knows of its entry: the types `PrefetchJob` keeps its state in.
extension PrefetchJob {
    /// Where the job is. Every change goes through `PrefetchJob.enter(_:)`, which checks it.
    enum Phase {
        /// Made, not started.
        case created
        /// Another writer holds the entry: polling for its lock (reported once, on entering).
        case waitingForLock
        /// The entry's lock, `data` and catalog row are being taken off the loop; `waited`: after
        /// waiting for another writer.
        case opening(EntryOpening, waited: Bool)
        /// The entry is locked and no transfer is in flight: planning, asking the MP4 planner, or
        /// waiting out a retry's backoff.
        case idle
        /// One transfer in flight.
        case fetching(Exchange)
        /// The old version is being dropped off the loop: the exchange it interrupted (its
        /// transfer held, or ended meanwhile), and what follows once `data` is new.
        case droppingVersion(Exchange?, then: AfterDrop)
        /// Every wanted byte is written: the last commit (and the digest) run off the loop.
        case completing
        case finished(PrefetchResult)

        /// Whether going from this phase to `next` can happen; anything else is a bug.
        func mayBecome(_ next: Phase) -> Bool {
            switch (self, next) {
            case (.finished, _): false
            case (_, .finished): true
            case (.created, .idle), (.created, .opening), (.waitingForLock, .opening): true
            case (.opening, .waitingForLock), (.opening, .idle): true
            case (.idle, .fetching), (.idle, .droppingVersion), (.idle, .completing): true
            case (.fetching, .idle), (.fetching, .droppingVersion): true
            case (.droppingVersion, .idle), (.droppingVersion, .fetching): true
            default: false
            }
        }
    }

    /// What follows a drop, once the new `data` is in place.
    enum AfterDrop {
        /// Plan and send the next request (the drop came before any).
        case nextRequest
        /// Let the held body in, written from `offset` up to `limit`.
        case write(offset: Int64, limit: Int64?)
        /// Nothing: the transfer stops, and how it ended decides.
        case awaitEnd
    }

    /// One transfer and what became of it so far.
    struct Exchange {
        let transfer: CurlTransfer
        let asked: ResponseJudge.Asked
        /// The response's status (0 until its head arrives).
        var status = 0
        /// Where the next body byte goes.
        var offset: Int64 = 0
        /// Where the body must stop (nil: wherever it ends).
        var limit: Int64?
        /// Body bytes were refused because they lay past `limit` or the stop point.
        var stoppedAtLimit = false
        /// Why this transfer failed, as judged or written here (not libcurl's error).
        var failure: PrefetchError?
        /// Body bytes it delivered.
        var bytes: Int64 = 0
        /// Bytes held when it was sent, and by which writer: what it added is what counts as
        /// progress (an origin that ignores Range resends bytes already held, forever).
        let heldAtStart: Int64
        let writerAtStart: ObjectIdentifier?
        /// Its body ends only where the origin closes the connection, and the length is unknown:
        /// its bytes are claimed only once they are judged (`CloseDelimitedBody`), a cut
        /// indistinguishable from the end until then.
        var closeDelimited = false
        /// The origin's Retry-After, in seconds.
        var retryAfter: Double?
        /// Its body while it may be a manifest (`manifestOverCap`).
        var manifest = ManifestWatch()
        /// It ended while a drop held it; carried out once the drop is done.
        var ended: Ending?
        /// A whole answer to a range-planned file under other validators, being compared with
        /// what is held before anything of it is written (`SameBytesCheck`).
        var sameBytes: SameBytesCheck?

        struct Ending { var error: TransportError? }

        init(_ transfer: CurlTransfer, asked: ResponseJudge.Asked, writer: EntryWriter?) {
            self.transfer = transfer
            self.asked = asked
            heldAtStart = writer?.held.count ?? 0
            writerAtStart = writer.map(ObjectIdentifier.init)
        }

        /// Bytes this transfer added to what `writer` holds (all it delivered when a version drop
        /// replaced the writer meanwhile: those are all new).
        func newBytes(_ writer: EntryWriter?) -> Int64 {
            guard let writer, writerAtStart == ObjectIdentifier(writer) else { return bytes }
            return max(0, writer.held.count - heldAtStart)
        }
    }

    /// What the job knows of its entry and the version it holds.
    struct EntryFacts {
        var validators = Validators(length: nil, etag: nil, lastModified: nil)
        var contentType: String?
        /// The entry had files or a row before this job: a failure must not remove what it did not
        /// create (a complete entry's `data` that could not be opened, say for EMFILE).
        var existedBefore = false
        /// The whole video is cached and its SHA-256 stored.
        var wasComplete = false
        /// Every byte held was fetched by this run (so weak-validator parts may be combined).
        var heldFromThisRunOnly = true
        /// Wanted bytes already cached when the length was first known (nil until then).
        var alreadyCached: Int64?
        /// The URL that answered, after redirects (what a playlist's URIs resolve against).
        var finalURL: String?
        /// The entry is an HLS playlist (by its Content-Type or first bytes): fetched whole, no
        /// MP4 goal; the run then fetches the stream it names.
        var isPlaylist = false
        /// The body was a manifest over its size limit, stopped mid-transfer: the run forgets the entry.
        var refusedManifest = false
        /// The digests the whole video is expected to have (given, and the origin's for this
        /// version), with what a check of the complete entry found.
        var checks: [DigestCheck] = []
        /// The origin's digests for a version being dropped to: this version's once it is in place.
        var nextOriginDigests: [ExpectedDigest] = []

        /// Some expectation is not known to hold for the bytes held: a complete entry is checked.
        var needsCheck: Bool { checks.contains { $0.matched != true } }

        /// The algorithms to compute at completion besides SHA-256.
        var checkedAlgorithms: Set<DigestAlgorithm> { Set(checks.map(\.expected.algorithm)) }
    }
}

extension PrefetchJob.EntryFacts {
    /// What the entry's row says (`found`; nil: no row). `heldBytesAreThisRuns`: serve vouches
    /// that every held byte came from its own run (it wrote them itself).
    init(found: CacheEntry?, existedBefore: Bool, heldBytesAreThisRuns: Bool) {
        validators = found?.validators ?? Validators(length: nil, etag: nil, lastModified: nil)
        contentType = found?.contentType
        self.existedBefore = existedBefore
        wasComplete = found?.isComplete ?? false
        heldFromThisRunOnly = heldBytesAreThisRuns || (found?.ranges.isEmpty ?? true)
    }
}
