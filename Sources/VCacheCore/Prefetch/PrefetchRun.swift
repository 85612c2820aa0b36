/// What one prefetch run knows of its items, as one value: no I/O, no thread, no job object
/// (issue 34, swift-nio's shape). `Prefetcher.runUnique` is its shell: it starts the jobs, runs
/// the effects a transition asks for (make room, read a playlist, evict) and feeds each outcome
/// back as the next event.
///
/// The items form a tree: the items given come first; a stream (an HLS playlist, a DASH MPD, a
/// SegmentBase file's index) adds the items it names as they are read, each tied to the item it
/// came from, so every item knows its root, the item given (`root(of:)`).
struct PrefetchRun {
    /// The items given, then those their streams named, in the order they joined.
    private(set) var items: [PrefetchItem]
    /// How many items were given (the roots); the rest joined from streams.
    let given: Int
    /// Each item's result once its end is known (or decided without a request).
    private(set) var results: [PrefetchResult?]
    /// Each joined item's parent.
    private var parent: [Int: Int] = [:]
    /// The item of each key (its first); a stream naming a key already in the run adds itself to
    /// that item's `alsoNamedBy`, so the item's end counts for that stream too (`outcome`).
    private var itemOfKey: [CacheKey: Int] = [:]
    /// Per item: the other items whose streams name it (a segment two playlists share, a media
    /// playlist given and also named by a master).
    private var alsoNamedBy: [Int: Set<Int>] = [:]
    /// The next item not started yet, in order.
    private var next = 0
    /// Items to run again first (a full disk after room was made; a checksum mismatch).
    private var again: [Int] = []
    /// Runs again after a full disk, per item (at most `maxSpaceRetries`).
    private var spaceRetries: [Int: Int] = [:]
    /// Per item run again after a full disk, or whole after a narrower request: the bytes its
    /// ended attempts fetched, and what it held before the first (the later attempts find the
    /// earlier ones' bytes held: this run's, not cached before it). `pendingRoom`: the attempt
    /// that ended on a full disk just now.
    private var spaceAttempts: [Int: (fetched: Int64, heldBefore: Int64)] = [:]
    private var pendingRoom: [Int: (fetched: Int64, held: Int64)] = [:]
    /// Running items a stream named whole after they started with less (a list line's `10K`, a
    /// variant given with `10s`): run again whole when they end (`widen`).
    private var widening = Set<Int>()
    /// Items whose complete bytes did not have an expected digest, fetched whole once more: the
    /// bytes the first attempt fetched (they count in the result too).
    private var refetched: [Int: Int64] = [:]
    /// A job's "finished" is held until its item's end is known: a full disk may run it again
    /// (then that failure is never said), a stream may fail it.
    private var heldFinish: [Int: PrefetchEvent] = [:]
    /// Times room was made for a full disk; an item whose disk filled after room was made for
    /// another (in parallel) runs again without asking for more.
    private var roomMade = 0
    private var roomMadeAtStart: [Int: Int] = [:]
    /// What each item holds or will hold, as its response said (`ItemFit`).
    private var sizes: [Int: Int64] = [:]
    /// Roots found too big for the limit even alone: their parts are neither fetched nor said.
    private(set) var refused = Set<Int>()
    /// Bytes downloaded by jobs that have ended.
    private(set) var finishedBytes: Int64 = 0
    /// The keys of every item of the run (each URL of a stream joins once).
    private(set) var keys: Set<CacheKey>
    /// Per root of a stream: the hosts its playlists came from.
    private var streamHosts: [Int: Set<String>] = [:]
    /// Per root: members refused for their host, the first and how many; said once each, at the
    /// end (a cron log gets one line per stream, not one per member).
    private var refusedHosts: [Int: (first: Int, count: Int)] = [:]
    /// DASH BaseURLs (folders) that did not answer a member: the members under them not started
    /// yet are fetched from the next of their BaseURLs at once (`DASHMirrors`).
    private var deadBases = Set<String>()
    private let keyRules: CacheKeyRules

    static let maxSpaceRetries = 3

    init(_ given: [PrefetchItem], keyRules: CacheKeyRules) {
        items = given
        self.given = given.count
        results = Array(repeating: nil, count: given.count)
        self.keyRules = keyRules
        keys = Set(given.map { keyRules.key(for: $0.url) })
        for i in given.indices.reversed() { itemOfKey[keyRules.key(for: given[i].url)] = i }
    }

    func key(of i: Int) -> CacheKey { keyRules.key(for: items[i].url) }

    /// The item given that item `i` came from (a stream's root; `i` itself for an item given).
    func root(of i: Int) -> Int {
        var t = i
        while let p = parent[t] { t = p }
        return t
    }

    /// Items not started yet, or to run again.
    var hasWaiting: Bool { !again.isEmpty || next < items.count }

    // MARK: Events

    /// The next item to start (runs again first, then the list in order); nil when none is left.
    /// Items decided without a request and parts of a refused root are passed over.
    mutating func nextToStart() -> Int? {
        while hasWaiting {
            let index: Int
            if again.isEmpty {
                index = next
                next += 1
                if results[index] != nil { continue }  // decided without a request (a refused member)
            } else {
                index = again.removeFirst()
            }
            if refused.contains(root(of: index)) { continue }
            skipDeadBases(index)
            roomMadeAtStart[index] = roomMade
            return index
        }
        return nil
    }

    /// Whether an item of the stream given as item `t` is still to start, or to run again.
    func waits(root t: Int) -> Bool {
        again.contains { root(of: $0) == t } || (next..<items.count).contains { results[$0] == nil && root(of: $0) == t }
    }

    /// A running job said it finished: held until its item's end is known (`settle`).
    mutating func hold(_ finished: PrefetchEvent, of i: Int) { heldFinish[i] = finished }

    /// What the end of a job asks for.
    enum JobEnd: Equatable {
        /// The item runs again (it waits in `again`); its failure is never said.
        case again
        /// The disk filled and no room was made since the job started: make room, then
        /// `roomAsked`.
        case makeRoom
        /// Its end is known: `settle`.
        case settle
    }

    /// Item `i`'s job ended (`fetched`: the bytes it downloaded; `result`: nil when it never
    /// got that far). A full disk runs it again once room was made (at most 3 times); a
    /// checksum mismatch runs it again whole, once, unless the run is stopping.
    mutating func jobEnded(_ i: Int, fetched: Int64, result: PrefetchResult?, stopping: Bool) -> JobEnd {
        finishedBytes += fetched
        if let r = result { sizes[i] = r.alreadyCachedBytes + r.fetchedBytes }
        if widening.remove(i) != nil, !stopping, let r = result, r.error == nil {
            // A stream named it whole meanwhile: the rest now, its end said once.
            attempted(i, r)
            heldFinish[i] = nil
            again.append(i)
            return .again
        }
        if case .disk(let e)? = result?.error, e.isNoSpace, spaceRetries[i, default: 0] < Self.maxSpaceRetries {
            pendingRoom[i] = (result?.fetchedBytes ?? 0, result?.alreadyCachedBytes ?? 0)
            if roomMade > roomMadeAtStart[i, default: 0] {
                runAgainForRoom(i)
                return .again
            }
            return .makeRoom
        }
        if case .checksumMismatch? = result?.error, refetched[i] == nil, !stopping {
            // Not the file expected (its bytes are dropped): the whole, once more.
            refetched[i] = result?.fetchedBytes ?? 0
            items[i].requests = []
            heldFinish[i] = nil
            again.append(i)
            return .again
        }
        return .settle
    }

    /// The shell asked for room after item `i`'s full disk: `made` when something was freed.
    mutating func roomAsked(for i: Int, made: Bool) -> JobEnd {
        guard made else { return .settle }
        roomMade += 1
        runAgainForRoom(i)
        return .again
    }

    private mutating func runAgainForRoom(_ i: Int) {
        spaceRetries[i, default: 0] += 1
        if let p = pendingRoom.removeValue(forKey: i) {
            let before = spaceAttempts[i]
            spaceAttempts[i] = ((before?.fetched ?? 0) + p.fetched, before?.heldBefore ?? p.held)
        }
        heldFinish[i] = nil
        again.append(i)
    }

    /// Item `i` is about to start: past the BaseURLs found dead (its last is tried whatever).
    private mutating func skipDeadBases(_ i: Int) {
        guard let m = items[i].mirrors else { return }
        while items[i].mirror + 1 < m.bases.count, deadBases.contains(m.bases[items[i].mirror]) { items[i].mirror += 1 }
    }

    /// Item `i`'s job ended with `result`, its end not said yet: when it is a DASH member that
    /// its BaseURL did not answer (no connection, 404, 410 or a 5xx once its retries are spent)
    /// and another BaseURL names it, that base is dead for the rest of the run and the item
    /// runs again from the next (`again`). Returns what to say the first time a base dies (the
    /// next one said with it), "" when it died before, nil when the item's end stands.
    mutating func nextBase(for i: Int, after result: PrefetchResult?) -> String? {
        guard let m = items[i].mirrors, let error = result?.error, Self.baseDidNotAnswer(error) else { return nil }
        let dead = m.bases[items[i].mirror]
        let first = deadBases.insert(dead).inserted
        skipDeadBases(i)
        guard !deadBases.contains(m.bases[items[i].mirror]) else { return nil }
        if let r = result { attempted(i, r) }
        heldFinish[i] = nil
        again.append(i)
        return first ? "its BaseURL \(dead) did not answer (\(error)): the next, \(m.bases[items[i].mirror]), is used for the rest of the stream" : ""
    }

    /// An origin that did not answer for a resource: no connection, gone, or failing.
    static func baseDidNotAnswer(_ error: PrefetchError) -> Bool {
        switch error {
        case .transport(let t): [.resolve, .connect, .timeout, .stalled, .receive].contains(t.kind)
        case .http(let status, _): status == 404 || status == 410 || status >= 500
        default: false
        }
    }

    /// What follows from an item whose end is known, with the result it follows from.
    enum FollowUp: Equatable {
        /// A SegmentBase file's index is cached: its subsegments join (`joinPart`), the same entry.
        case dashIndex(DASHIndexFollowUp, PrefetchResult)
        /// A playlist or MPD: the stream it names joins (`joinMember`).
        case stream(PrefetchResult)
    }

    /// Item `i`'s end is known: `result` stands (a refetch's first bytes counted in), and what
    /// follows from it is returned. Say it with `said(i)` once what follows has joined.
    mutating func settle(_ i: Int, _ result: PrefetchResult?, expandStreams: Bool) -> [FollowUp] {
        // A job that ended without a result leaves one decided meanwhile (`refuse`) standing.
        if let result { results[i] = result }
        // Run again after a full disk: every attempt's bytes are this run's (a refusal gives
        // them back), only what was held before the first was cached before.
        if result != nil, let s = spaceAttempts[i], var r = results[i] {
            r.fetchedBytes += s.fetched
            r.alreadyCachedBytes = min(r.alreadyCachedBytes, s.heldBefore)
            results[i] = r
        }
        // A member redirected to a host its stream may not reach: refused as one named there
        // would be, and counted with them.
        if items[i].memberOrigins != nil, case .transport(let t)? = result?.error, t.kind == .redirectRefused, let to = t.redirectedTo {
            let own = (streamHosts[root(of: i)] ?? []).sorted()
            results[i]?.error = .refusedHost(host: to.host.contains(":") ? "[\(to.host)]" : to.host, own: own, redirected: true)
            results[i]?.refusedMembers = 1
        }
        if let first = refetched[i] {
            results[i]?.fetchedBytes += first
            if case .checksumMismatch(var m)? = result?.error {
                m.refetched = true
                results[i]?.error = .checksumMismatch(m)
            }
        }
        guard let r = result, r.succeeded else { return [] }
        var follow: [FollowUp] = []
        if let index = items[i].dashIndex { follow.append(.dashIndex(index, r)) }
        if r.isPlaylist, expandStreams { follow.append(.stream(r)) }
        return follow
    }

    /// What followed from item `i` failed: its result carries the error.
    mutating func followFailed(_ i: Int, _ error: PrefetchError) { results[i]?.error = error }

    /// An item of the same entry as `i` joins (a SegmentBase file's subsegments): fetched, not
    /// said. Its init and sidx are asked again (held, they cost nothing; dropped with their
    /// version, they come back with the subsegments), and when this run wrote all `i` holds, it
    /// is one version with what it adds even under no strong validator.
    mutating func joinPart(_ found: PrefetchItem, of i: Int) {
        var more = found
        more.requests = items[i].requests + more.requests
        more.heldBytesAreThisRuns = results[i]?.alreadyCachedBytes == 0
        more.memberOrigins = items[i].memberOrigins
        more.mirrors = items[i].mirrors
        more.mirror = items[i].mirror
        join(more, of: i, result: nil)
    }

    /// The hosts a stream's playlists came from: its root's URL, every playlist's that answered
    /// (`answered`), as its members are checked against them.
    mutating func streamHosts(of i: Int, answered: String) -> Set<String> {
        let t = root(of: i)
        var own = streamHosts[t] ?? Set([items[t].url].compactMap { OriginTarget.of($0)?.host })
        if let host = OriginTarget.of(answered)?.host { own.insert(host) }
        streamHosts[t] = own
        return own
    }

    /// A member named by item `i`'s stream joins the run, once per key: refused (`refusal`, for
    /// its host) it is decided at once, its result returned and said with the stream's other
    /// refused members (`refusedHostsSaid`); else it waits to be started. Nil: joined to be
    /// fetched, or already in the run.
    @discardableResult
    mutating func joinMember(_ item: PrefetchItem, of i: Int, refusal: PrefetchError?) -> PrefetchResult? {
        let key = keyRules.key(for: item.url)
        guard !keys.contains(key) else {
            // Already in the run: fetched once, but this stream is not whole without it either.
            if let j = itemOfKey[key], j != i {
                alsoNamedBy[j, default: []].insert(i)
                if item.requests.isEmpty && item.mp4 == nil { widen(j) }
            }
            return nil
        }
        keys.insert(key)
        itemOfKey[key] = items.count
        guard let refusal else {
            join(item, of: i, result: nil)
            return nil
        }
        // Never asked: a result of its own, said as it is decided.
        var failed = PrefetchResult(url: item.url, key: key, length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                    requestedBytes: nil, complete: false, elapsed: 0, error: refusal)
        failed.refusedMembers = 1
        join(item, of: i, result: failed)
        noteRefusedHost(items.count - 1)
        return failed
    }

    /// A stream names item `j` whole: an item asked with less (`--bytes`, a list line's size or
    /// seconds) is fetched whole: as it starts when it has not; once its job ends when it runs;
    /// at once, again, when it ended (then it is said twice). One that failed or was refused
    /// stays as it is (its failure is the stream's too).
    private mutating func widen(_ j: Int) {
        guard !items[j].requests.isEmpty || items[j].mp4 != nil, !refused.contains(root(of: j)), results[j]?.error == nil else { return }
        items[j].requests = []
        items[j].mp4 = nil
        guard j < next, !again.contains(j) else { return }  // starts whole
        if let r = results[j] {
            attempted(j, r)
            results[j] = nil
            again.append(j)
        } else {
            widening.insert(j)
        }
    }

    /// Item `j` runs again after an attempt that ended with `r`: its bytes are this run's.
    private mutating func attempted(_ j: Int, _ r: PrefetchResult) {
        let before = spaceAttempts[j]
        spaceAttempts[j] = ((before?.fetched ?? 0) + r.fetchedBytes, before?.heldBefore ?? r.alreadyCachedBytes)
    }

    private mutating func join(_ item: PrefetchItem, of i: Int, result: PrefetchResult?) {
        parent[items.count] = i
        items.append(item)
        results.append(result)
    }

    /// What to say of settled item `i`: its result, or the finish its job said; nothing for a
    /// part of a refused root (`refuse` said it once), nor for a member refused for its host
    /// (`refusedHostsSaid`).
    mutating func said(_ i: Int) -> PrefetchEvent? {
        let held = heldFinish.removeValue(forKey: i)
        if case .refusedHost? = results[i]?.error {
            noteRefusedHost(i)
            return nil
        }
        guard !refused.contains(root(of: i)) else { return nil }
        if let r = results[i] { return .finished(r) }
        return held
    }

    private mutating func noteRefusedHost(_ i: Int) {
        let t = root(of: i)
        refusedHosts[t] = (refusedHosts[t]?.first ?? i, (refusedHosts[t]?.count ?? 0) + 1)
    }

    /// One line per stream for its members refused for their host: the first, and how many more.
    func refusedHostsSaid() -> [PrefetchEvent] {
        refusedHosts.sorted(by: { $0.key < $1.key }).compactMap { _, r in
            guard var said = results[r.first], case .refusedHost(let host, let own, let redirected, _, let mpd)? = said.error else { return nil }
            said.error = .refusedHost(host: host, own: own, redirected: redirected, more: r.count - 1, mpd: mpd)
            return .finished(said)
        }
    }

    // MARK: The cap

    /// A running job's response said what its item will hold.
    mutating func expects(_ bytes: Int64, of i: Int) { sizes[i] = bytes }

    /// Each root not refused yet, with its verdict under `limit` (`ItemFit`): the sizes of its
    /// parts, those not known yet as nil (an item ended without a response holds nothing).
    func verdicts(fixed: Int64, perPart: Int64, limit: Int64) -> [(root: Int, verdict: ItemFit.Verdict)] {
        var parts: [Int: [Int64?]] = [:]
        for i in items.indices { parts[root(of: i), default: []].append(sizes[i] ?? (results[i] != nil ? 0 : nil)) }
        return (0..<given).filter { !refused.contains($0) }.map {
            ($0, ItemFit.verdict(parts[$0] ?? [], fixed: fixed, perPart: perPart, limit: limit))
        }
    }

    /// Root `t` will not fit: from now on none of its parts starts or is said. The shell then
    /// stops its running parts (their ends are not said) and calls `refuse`.
    mutating func refusing(_ t: Int) { refused.insert(t) }

    /// Root `t` and all it named are not fetched further: every part without a result gets
    /// `error`, as does every part's result. Returns the keys this run stored that are given
    /// back (what was cached before stays) and the one event that says why.
    mutating func refuse(_ t: Int, error: PrefetchError) -> (giveBack: Set<CacheKey>, said: PrefetchEvent) {
        refused.insert(t)
        let parts = items.indices.filter { root(of: $0) == t }
        for i in parts where results[i] == nil {
            results[i] = PrefetchResult(url: items[i].url, key: key(of: i), length: nil, fetchedBytes: 0,
                                        alreadyCachedBytes: 0, requestedBytes: nil, complete: false, elapsed: 0, error: error)
        }
        for i in parts { results[i]?.error = error }
        let giveBack = Set(parts.compactMap { i in results[i].flatMap { $0.fetchedBytes > 0 && $0.alreadyCachedBytes == 0 ? $0.key : nil } })
        let said = PrefetchResult(url: items[t].url, key: results[t]?.key ?? key(of: t), length: nil, fetchedBytes: 0,
                                  alreadyCachedBytes: 0, requestedBytes: nil, complete: false, elapsed: 0, error: error)
        return (giveBack, .finished(said))
    }

    // MARK: The end

    /// The run stopped: every item without a result gets `why` (`.notStarted` for a plain stop);
    /// returns them, to be said.
    mutating func neverStarted(_ why: PrefetchError) -> [Int] {
        var never: [Int] = []
        for i in results.indices where results[i] == nil {
            results[i] = PrefetchResult(url: items[i].url, key: key(of: i), length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                        requestedBytes: nil, complete: false, elapsed: 0,
                                        error: why == .interrupted ? .notStarted : why)
            never.append(i)
        }
        return never
    }

    /// Item `i` was given back at the end for the cap: not complete, `error` says why.
    mutating func givenBack(_ i: Int, _ error: PrefetchError) {
        results[i]?.error = error
        results[i]?.complete = false
    }

    /// The members of root `t`'s stream this run stored bytes of (`under`: only those item `p` named).
    func fetchedMembers(of t: Int, under p: Int? = nil) -> [CacheKey] {
        items.indices.filter { $0 != t && root(of: $0) == t && (p == nil || parent[$0] == p) && (results[$0]?.fetchedBytes ?? 0) > 0 }.map { key(of: $0) }
    }

    /// The items item `i` named that named items in turn (a master's media playlists), in one pass.
    func playlistsNamed(by i: Int) -> [Int] {
        let parents = Set(parent.values)
        return items.indices.filter { parent[$0] == i && parents.contains($0) }
    }

    /// Root `t`'s manifest changed during the run (`Prefetcher.changedDuringRun`): it fails.
    mutating func changedDuringRun(_ t: Int, _ error: PrefetchError) {
        results[t]?.error = error
        results[t]?.complete = false
    }

    /// Item `i`, stopped for room, stayed and is complete: it is done after all.
    mutating func stayedComplete(_ i: Int) {
        results[i]?.error = nil
        results[i]?.complete = true
    }

    /// The items given whose streams hold item `i`: its root, and the roots of every stream
    /// that also named it (or named an item above it).
    func roots(of i: Int) -> Set<Int> {
        var seen: Set<Int> = [], todo = [i], out: Set<Int> = []
        while let t = todo.popLast() {
            guard seen.insert(t).inserted else { continue }
            if let p = parent[t] { todo.append(p) } else { out.insert(t) }
            todo.append(contentsOf: alsoNamedBy[t] ?? [])
        }
        return out
    }

    /// One result per item given: a stream is one item to whoever asked, its members' bytes
    /// count for it, and the first member that failed is its failure. A member two streams name
    /// (fetched once, its bytes counted once, for its root) fails or leaves incomplete each.
    /// Call once every item has a result (`neverStarted`).
    func outcome() -> [PrefetchResult] {
        var out = results.prefix(given).map { $0! }
        for i in stride(from: items.count - 1, through: 0, by: -1) {
            guard let r = results[i] else { continue }
            let t = root(of: i)
            if i >= given {
                out[t].fetchedBytes += r.fetchedBytes
                out[t].alreadyCachedBytes += r.alreadyCachedBytes
                out[t].refusedMembers += r.refusedMembers
            }
            for u in roots(of: i) where u != i {
                if let e = r.error {
                    out[u].error = e
                    out[u].failedMember = r.url
                }
                if !r.complete { out[u].complete = false }
            }
        }
        return out
    }
}
