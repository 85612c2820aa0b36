#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Runs prefetch jobs on one fetch loop, at most `options.concurrency` at a time (ExoPlayer's
/// `CacheWriter`, for many URLs). The core never prints: it reports through `events`, on the
/// loop's thread, and returns one result per item in input order.
public final class Prefetcher {
    public let store: CacheStore
    public let options: PrefetchOptions
    /// Internal, not private: `Prefetcher+DASH.swift` notes on it too.
    let events: (PrefetchEvent) -> Void
    private let fetcher: Fetcher
    public init(store: CacheStore, options: PrefetchOptions, stopFlag: Fetcher.StopFlag = .init(),
                events: @escaping (PrefetchEvent) -> Void = { _ in }) {
        self.store = store
        self.options = options
        self.events = events
        self.fetcher = Fetcher(stopFlag: stopFlag, maxRate: options.maxRate)
    }

    /// The stop reason used when `options.maxTime` runs out (signals use their number).
    public static let deadlineReason: Int32 = -1
    /// The stop reason used when the run's own videos alone exceed `options.maxSize`.
    public static let overCapReason: Int32 = -2

    /// Stops the run from another thread: jobs checkpoint what arrived and end as interrupted.
    public func stop(reason: Int32) { fetcher.stop(reason: reason) }

    /// Prefetches `items`; one result per entry, in the order of the URLs that first named them.
    /// Items whose URLs map to the same key are one entry, fetched and counted once with their
    /// requests combined: its result lists the other URLs given for it in `mergedURLs`.
    public func run(_ items: [PrefetchItem]) -> [PrefetchResult] {
        let entries = distinct(items)
        var results = runUnique(entries.map(\.item))
        for i in results.indices { results[i].mergedURLs = entries[i].merged }
        return results
    }

    /// `items` with those of one key folded into the first (requests combined: a whole video
    /// wins), and the URLs folded into each.
    public func distinct(_ items: [PrefetchItem]) -> [(item: PrefetchItem, merged: [String])] {
        var unique: [(item: PrefetchItem, merged: [String])] = []
        var indexByKey: [CacheKey: Int] = [:]
        for item in items {
            let key = options.keyRules.key(for: item.url)
            if let i = indexByKey[key] {
                let merged = unique[i].item.requests.isEmpty || item.requests.isEmpty ? [] : unique[i].item.requests + item.requests
                unique[i].item.requests = merged
                unique[i].item.mp4 = MP4Goal.merged(unique[i].item.mp4, item.mp4)
                // Expected digests: the first given for an algorithm stands.
                for e in item.expected where !unique[i].item.expected.contains(where: { $0.algorithm == e.algorithm }) {
                    unique[i].item.expected.append(e)
                }
                unique[i].merged.append(item.url)
            } else {
                indexByKey[key] = unique.count
                unique.append((item, []))
            }
        }
        return unique
    }

    /// With `maxSize`: evict least recently used entries outside this run until the cache fits.
    /// When the run's own entries alone exceed the cap, the run stops storing (the promise is
    /// the cap: Docs/cron.md). Returns the cache's usage after (nil: no cap, or not measured).
    /// `allowance`: bytes of this run's items not decided yet (`ItemFit`) that may stand over the
    /// cap meanwhile: nothing is evicted for them before it is known they can fit.
    @discardableResult
    private func keepUnderCap(protecting keys: Set<CacheKey>, final: Bool = false, allowance: Int64 = 0) -> Int64? {
        guard let limit = limit() else { return nil }
        let cap = SpaceBudget.evictionCap(limit: limit, allowance: allowance)
        var c = Evictor.Criteria()
        c.maxSize = cap
        c.protected = keys
        guard let out = try? Evictor(store: store).evict(c, dryRun: false) else { return nil }
        if !out.evicted.isEmpty {
            events(.evicted(urls: out.evicted.map(\.latestURL), freedBytes: out.freedBytes, usage: out.usageAfter, overCap: false))
        }
        if SpaceBudget.runStops(usageAfter: out.usageAfter, cap: cap, final: final,
                                onlyRunEntriesStayed: out.skipped.allSatisfy({ keys.contains($0.entry.key) })) {
            fetcher.stop(reason: Self.overCapReason)
        }
        return out.usageAfter
    }

    /// The error for a run that cannot fit under `limit`: the cap's, or min-free's when it was
    /// min-free that made the limit lower than the cap.
    private func noRoom(_ limit: Int64, needs: Int64? = nil) -> PrefetchError {
        if let minFree = options.minFree, budget.isMinFrees(limit: limit) { return .noRoom(cap: limit, minFree: minFree, needs: needs) }
        return .noRoom(cap: limit, needs: needs)
    }

    /// The size the cache must get down to now: the cap, or less when the disk's free space is
    /// under `minFree` (what is missing of it comes off the cache). Nil: neither is set.
    private func limit() -> Int64? {
        let free = budget.measuresFree ? FileSystem.space(store.directory)?.free : nil
        let usage = budget.measuresUsage(free: free)
            ? (try? store.catalog.allEntries()).map { Evictor(store: store).footprint(exact: false).total($0) } : nil
        return budget.limit(free: free, usage: usage)
    }

    /// The cap and min-free of this run, with prefetch's min-free rule (`SpaceBudget`).
    private var budget: SpaceBudget {
        SpaceBudget(maxSize: options.maxSize, minFree: options.minFree, minFreeRule: .shortfall)
    }

    /// The disk filled during an item: least recently used entries outside the run go to free
    /// room for it (an eighth of the file system, at most 64 MiB; the item runs again and may
    /// ask again). True when something was freed.
    private func makeRoom(protecting keys: Set<CacheKey>) -> Bool {
        guard let entries = try? store.catalog.allEntries() else { return false }
        let evictor = Evictor(store: store)
        let chunk = SpaceBudget.fullDiskChunk(fileSystemSize: FileSystem.space(store.directory)?.size)
        var c = Evictor.Criteria()
        c.maxSize = SpaceBudget.fullDiskTarget(usage: evictor.footprint(exact: false).total(entries), freeing: chunk)
        c.protected = keys
        guard let out = try? evictor.evict(c, dryRun: false), out.freedBytes > 0 else { return false }
        events(.evicted(urls: out.evicted.map(\.latestURL), freedBytes: out.freedBytes, usage: out.usageAfter, overCap: false))
        return true
    }

    /// A live playlist (no EXT-X-ENDLIST) or dynamic MPD cached whole (`cachedManifest`) is
    /// fetched again by the next run, which then fetches the segments added since. Its cached
    /// entry and stream stay as they are meanwhile: the new copy is fetched into an entry of its
    /// own (`LiveRefetch`) and replaces the old one only once it is whole and the manifest it must be.
    private func liveRefetch(_ m: CachedManifest) -> LiveRefetch {
        let live = LiveRefetch(key: m.key, mpd: m.mpd)
        // What a run killed during its refetch left of the new copy goes first.
        discardStaging(live)
        return live
    }

    /// Removes the staging entry of a live manifest's refetch (`LiveRefetch.staging`).
    private func discardStaging(_ live: LiveRefetch) {
        guard ((try? store.catalog.entry(key: live.staging)) ?? nil) != nil else { return }
        var c = Evictor.Criteria()
        c.keys = [live.staging]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
    }

    /// A run killed inside `storeWhole` of a live manifest's new copy (between its two commits:
    /// the old claims gone, the new ones not yet made) left the entry holding no bytes and the new
    /// copy whole in its staging entry. That copy becomes the entry's version now, before anything
    /// reads the entry, so the stream is whole again without asking the origin (which may no
    /// longer answer). One catalog read for the URLs given; a staging copy is promoted only when
    /// the entry is not complete and the copy is whole and a manifest. `verify --fix` does the same.
    private func restoreStagedManifests(_ urls: [String]) {
        let keys = urls.map { options.keyRules.key(for: $0) }
        let stagings = keys.map { CacheStore.stagingKey(of: $0) }
        guard let whole = try? store.catalog.completeKeys(among: stagings), !whole.isEmpty else { return }
        for (i, key) in keys.enumerated() where whole.contains(stagings[i]) {
            if store.restoreStagedManifest(key: key, staging: stagings[i], url: urls[i]) {
                events(.note(url: urls[i], message: Self.restoredMessage))
            }
        }
    }

    static let restoredMessage = "its copy fetched by a run that was killed while keeping it is restored"

    /// The end of a live manifest's refetch: a new copy fetched whole that is the manifest it must
    /// be (an MPD for an MPD, a playlist for a playlist, whatever its Content-Type) replaces the
    /// cached one, and the result is the entry's; otherwise the cached copy and its stream stay as
    /// they were, and a line says so. Returns the result, and the old copy's bytes when it was
    /// replaced (put back if the stream the new one names is refused: `putBack`).
    private func settleRefetch(_ live: LiveRefetch, _ result: PrefetchResult?, url: String) -> (PrefetchResult?, CachedCopy?) {
        defer { discardStaging(live) }
        var out = result
        out?.key = live.key
        if var r = out, r.complete {
            do {
                let old = try promote(live, url: url)
                return (r, old)
            } catch let e as PrefetchError {
                r.complete = false
                r.error = e
                out = r
            } catch {
                r.complete = false
                r.error = PrefetchError(error)
                out = r
            }
        }
        if ((try? store.catalog.entry(key: live.key)) ?? nil)?.isComplete == true {
            events(.note(url: url, message: Self.keptMessage))
        }
        if out?.error == .interrupted || out?.error == .deadline { out?.newCopyDropped = true }
        return (out, nil)
    }

    static let keptMessage = "it could not be fetched again: its cached copy is kept, and its stream as it was"

    /// The new copy of a live manifest, whole in its staging entry, becomes the entry's one
    /// version (`CacheStore.storeWhole`); throws `.notTheVideo` when it is not the manifest the
    /// entry was. Returns the old copy's bytes.
    private func promote(_ live: LiveRefetch, url: String) throws -> CachedCopy? {
        guard let e = try store.catalog.entry(key: live.staging), e.isComplete, let bytes = e.length == 0 ? [] : store.cachedBytes(of: e),
              e.length == Int64(bytes.count) else {
            throw PrefetchError.catalog("the new copy of \(url) cannot be read back from the cache")
        }
        if let why = PrefetchJob.notTheManifest(url: url, mpd: live.mpd, bytes) { throw PrefetchError.notTheVideo(why) }
        guard let lock = try store.tryLockWriter(key: live.key) else { throw PrefetchError.lockBusy }
        defer { lock.release() }
        let old = try store.catalog.entry(key: live.key).flatMap { o in store.cachedBytes(of: o).map { CachedCopy(bytes: $0, entry: o) } }
        try store.storeWhole(bytes, key: live.key, url: e.latestURL, validators: e.validators, contentType: e.contentType)
        if let final = try store.catalog.finalURL(of: live.staging) { try store.catalog.recordFinalURL(key: live.key, url: final) }
        return old
    }

    /// A live manifest replaced by a new copy whose stream was refused (not one vcache can read,
    /// a segment limit...): the old copy goes back, its stream rows having stayed.
    private func putBack(_ copy: CachedCopy, url: String) {
        let e = copy.entry
        guard let lock = (try? store.tryLockWriter(key: e.key)) ?? nil else { return }
        defer { lock.release() }
        guard (try? store.storeWhole(copy.bytes, key: e.key, url: e.latestURL, validators: e.validators, contentType: e.contentType)) != nil else { return }
        events(.note(url: url, message: Self.keptMessage))
    }

    /// The items an HLS playlist names (Docs/hls.md): for a master, its chosen media playlists;
    /// for a media playlist, the segments (the first `--seconds` of them, or all), their init
    /// sections and keys, byte ranges merged. Each carries the stream's `--seconds`.
    /// `root`: the key of the item the run was given (the stream's root manifest).
    func expand(_ r: PrefetchResult, item: PrefetchItem, root: CacheKey) -> (items: [PrefetchItem], error: PrefetchError?) {
        // Refused before its stream is recorded: the playlist is not kept as an entry of its own.
        func refuse(_ e: PrefetchError) -> (items: [PrefetchItem], error: PrefetchError?) {
            forgetRefusedPlaylist(key: r.key)
            return ([], e)
        }
        var seconds: Double?
        if case .seconds(let s)? = item.mp4 { seconds = s }
        // An MPD (by its first bytes or Content-Type, never its URL) names a DASH presentation.
        if let e = (try? store.catalog.entry(key: r.key)) ?? nil, let head = store.cachedBytes(of: e, count: 4096),
           MPD.looksLikeMPD(firstBytes: head, contentType: e.contentType) {
            if let length = r.length, length > Int64(MPD.maxBytes) {
                return refuse(.stream("\(r.url) is a DASH MPD of \(Units.formatSize(length)), larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one"))
            }
            guard let bytes = store.cachedBytes(of: e) else { return refuse(.stream("\(r.url): the MPD cannot be read back from the cache")) }
            return expandDASH(r, item: item, root: root, entry: e, bytes: bytes, seconds: seconds)
        }
        switch item.mp4 {
        case .seconds(let s)?: seconds = s
        case .moov?: return refuse(.stream("\(r.url) is an HLS playlist: --bytes does not apply to a stream; give --seconds N, or neither for the whole stream"))
        case nil:
            if item.requests.contains(where: { $0 != .whole }) {
                return refuse(.stream("\(r.url) is an HLS playlist: --range does not apply to a stream; give --seconds N, or neither for the whole stream"))
            }
        }
        if let length = r.length, length > Int64(HLSPlaylist.maxBytes) {
            return refuse(.stream("\(r.url) is an HLS playlist of \(Units.formatSize(length)), larger than the \(Units.formatSize(Int64(HLSPlaylist.maxBytes))) vcache reads as one"))
        }
        // Relative URIs resolve against the URL that answered it (after redirects): this run's,
        // kept for offline reads, else the one recorded when it was fetched.
        guard let e = (try? store.catalog.entry(key: r.key)) ?? nil,
              let cached = store.cachedPlaylist(e, keyRules: options.keyRules, complete: false, base: r.finalURL) else {
            return refuse(.stream("\(r.url): the playlist cannot be read back from the cache"))
        }
        let plan = HLSPlan(variant: options.hlsVariant, audio: options.hlsAudio, seconds: seconds)
        if let final = r.finalURL { try? store.catalog.recordFinalURL(key: r.key, url: final) }
        let playlist: HLSPlaylist
        do {
            playlist = try cached.parsed()
        } catch {
            return refuse(.stream("\(r.url): not a playlist vcache can read: \(error)"))
        }
        // The stream in the catalog: what this playlist names joins the stream of its root.
        do {
            let members = playlist.members.map { StreamRecord.Member(key: options.keyRules.key(for: $0.url), role: $0.role) }
            // Also into every other stream naming this playlist (a variant two masters share).
            try store.catalog.recordStream(root: root, format: "hls", members: members, via: r.key)
        } catch {
            events(.note(url: r.url, message: "its stream could not be recorded in the catalog (its entries stay, each on its own): \(error)"))
        }
        func carry(_ url: String) -> PrefetchItem {
            seconds.map { PrefetchItem.seconds(url, $0) } ?? PrefetchItem(url: url)
        }
        switch playlist {
        case .master:
            // A master names media playlists (§4.3.4.2): one reached as a variant or rendition
            // of another master, or naming itself, is refused, never followed round a loop.
            if r.key != root {
                return ([], .stream("\(r.url): a variant of a master playlist is itself a master playlist: not supported; give the media playlist's URL"))
            }
            do {
                let urls = try plan.playlists(for: playlist).urls
                if urls.contains(where: { options.keyRules.key(for: $0) == r.key }) {
                    return ([], .stream("\(r.url): a master playlist that names itself as a variant: not supported; give the media playlist's URL"))
                }
                return (urls.map(carry), nil)
            } catch {
                return ([], .stream("\(r.url): \(error)"))
            }
        case .media(let media):
            let fetch = plan.fetches(for: media)
            if fetch.isLive {
                events(.note(url: r.url, message: "a live playlist (no EXT-X-ENDLIST): the segments it lists now are fetched; the next run fetches the ones added since"))
            }
            if !fetch.unfetchableKeys.isEmpty {
                events(.note(url: r.url, message: "its segments are encrypted with keys vcache cannot fetch (\(fetch.unfetchableKeys.map(\.label).joined(separator: ", "))): cached as sent, they will not play offline"))
            }
            // Each URL once: a whole resource, or its byte ranges.
            var order: [String] = []
            var ranges: [String: [RangeRequest]] = [:]
            for q in fetch.requests {
                if ranges[q.url] == nil { order.append(q.url); ranges[q.url] = [] }
                if let b = q.range { ranges[q.url]?.append(.span(first: b.lowerBound, last: b.upperBound - 1)) }
            }
            if order.contains(where: { options.keyRules.key(for: $0) == r.key }) {
                return ([], .stream("\(r.url): a media playlist that names itself as a segment: refused; fix the playlist"))
            }
            // Each member checked as serve checks it (`HLSMemberCheck`), from the segments fetched.
            return (order.map { url in
                var item = PrefetchItem(url: url, requests: ranges[url] ?? [],
                                        checkSegment: HLSMediaPlaylist.memberCheck(in: fetch.segments, where: { $0 == url }))
                item.rangesMustFit = !(ranges[url] ?? []).isEmpty
                item.memberOrigins = AllowedOrigins()  // the stream's hosts: `runUnique` fills them in
                return item
            }, nil)
        }
    }

    /// Why a member of a stream whose playlists came from the hosts `own` is not fetched: its
    /// host is none of them, nor allowed by `--allow-host` (a playlist is the origin's data: it
    /// must not send a cron job to 169.254.169.254 or another host of the network). Redirects of
    /// the member itself are followed as curl -L does. Nil: fetch it.
    func refusal(_ url: String, own: Set<String>, mpd: Bool = false) -> PrefetchError? {
        guard let target = OriginTarget.of(url) else { return nil }  // the job says what is wrong with it
        if own.contains(target.host) || options.memberHosts.allows(target) { return nil }
        return .refusedHost(host: target.host.contains(":") ? "[\(target.host)]" : target.host, own: own.sorted(), mpd: mpd)
    }

    /// The run's own videos do not fit under the cap: the last of the list are given back first
    /// (the list's order is its priority), never a pinned one, until the cache fits. Returns
    /// the indexes of the items given back.
    private func giveBack(_ items: [PrefetchItem], cap: Int64, usage: Int64) -> Set<Int> {
        var usage = usage
        var given = Set<Int>()
        var urls: [String] = []
        var freed: Int64 = 0
        for i in items.indices.reversed() where usage > cap {
            let key = options.keyRules.key(for: items[i].url)
            guard let e = (try? store.catalog.entry(key: key)) ?? nil, !e.pinned else { continue }
            var c = Evictor.Criteria()
            c.keys = [key]
            c.keepPinned = true  // pinned meanwhile by another process
            guard let out = try? Evictor(store: store).evict(c, dryRun: false), !out.evicted.isEmpty else { continue }
            given.insert(i)
            urls.append(e.latestURL)
            freed += out.freedBytes
            usage = out.usageAfter
        }
        events(.evicted(urls: urls, freedBytes: freed, usage: usage, overCap: usage > cap))
        return given
    }

    /// The shell of one run (`PrefetchRun` decides): starts jobs, at most `options.concurrency`
    /// at a time, runs what each job's end asks for (room, a stream's members, the cap) and
    /// feeds it back to the run.
    private func runUnique(_ requested: [PrefetchItem]) -> [PrefetchResult] {
        var run = PrefetchRun(requested, keyRules: options.keyRules)
        var running: [ObjectIdentifier: (index: Int, job: PrefetchJob)] = [:]
        var refusing = false
        // The items given that were complete when the run began, read once: only those can be a
        // live manifest to fetch again (`liveRefetch`) or a static one to ask for again
        // (`staleManifest`) at their first start. One read for the run instead of one per item on
        // the loop, where each waited for the connection behind another entry's commit
        // (Docs/performance.md). Nil (unreadable): each item is read.
        if options.expandStreams { restoreStagedManifests((0..<run.given).map { run.items[$0].url }) }
        var completeAtStart = options.expandStreams ? try? store.catalog.completeKeys(among: run.keys) : nil
        // The live manifests this run fetches again, by item (`LiveRefetch`).
        var refetching: [Int: LiveRefetch] = [:]
        // The manifests being asked for again (`staleManifest`), each before its job starts.
        var revalidations: [ObjectIdentifier: ManifestRevalidation] = [:]
        // Each manifest whose stream joined the run is held in use (its `data` open, LOCK_SH) to
        // the run's end, so `evict` (--all, --lru, its URL) skips its whole stream instead of
        // taking the manifest mid-run and leaving the segments loose (Docs/cache-format.md).
        var heldManifests: [CacheKey: RawFile] = [:]
        defer { heldManifests.values.forEach { $0.close() } }
        // Each item given that is a stream's root holds its stream's lock from before its
        // manifest is read or asked for again to the end of its members
        // (`CacheStore.tryLockStream`): a second run of the stream waits for the first, then
        // revalidates what it left, instead of interleaving two manifest versions (Docs/dash.md).
        // An item that becomes a root in this run takes it before its members are recorded.
        let streamRoots = options.expandStreams ? ((try? store.catalog.streamRoots(among: run.keys)) ?? []) : []
        // A master's media playlist given by its own URL is a stream root for this run (asked for
        // again when partly cached, `staleManifest`), under the lock of each master's stream
        // naming it, so a run of the master and one of the playlist never interleave.
        let playlistOwners = options.expandStreams
            ? ((try? store.catalog.playlistOwners(among: (0..<run.given).map { run.key(of: $0) }.filter { !streamRoots.contains($0) })) ?? [:]) : [:]
        var streamLocks: [Int: [(root: CacheKey, lock: EntryLock)]] = [:]
        var waitingForStream: [Int] = []
        var pollingForStream = false
        var waitedForStream = Set<Int>()
        var deferredStreams: [DeferredStream] = []
        // Items stopped while their stream's manifest was asked for again: not complete, even
        // when the manifest's cached copy is (the stream was not read).
        var stoppedUnread = Set<Int>()
        // Media playlists asked for again with their master (`askingMediaPlaylists`): not twice.
        var askedWithMaster = Set<CacheKey>()
        defer { for held in streamLocks.values { for (root, lock) in held { store.releaseStreamLock(lock, root: root) } } }

        /// Takes the stream lock item `t` needs (its own key's; a master's media playlist given
        /// by its own URL, each master's), all or none; one this run holds already (for another
        /// item) is not taken twice. False when another process holds one.
        func lockStream(_ t: Int) throws -> Bool {
            var held: [(root: CacheKey, lock: EntryLock)] = []
            for root in playlistOwners[run.key(of: t)] ?? [run.key(of: t)] where !streamLocks.values.contains(where: { $0.contains { $0.root == root } }) {
                let lock: EntryLock?
                do { lock = try store.tryLockStream(root: root) } catch {
                    for h in held { store.releaseStreamLock(h.lock, root: h.root) }
                    throw error
                }
                guard let lock else {
                    for h in held { store.releaseStreamLock(h.lock, root: h.root) }
                    return false
                }
                held.append((root, lock))
            }
            streamLocks[t] = held
            return true
        }

        // Streams whose root manifest is being asked for again at their end (`endCheck`), and
        // those asked already (once per run).
        var endChecks: [Int: [ManifestRevalidation]] = [:]
        var endChecked = Set<Int>()
        // Roots this run marked unconfirmed (`StreamRole.manifestUnconfirmed`) before their first
        // member was stored; the mark goes only when their end check finds the manifest unchanged.
        var unconfirmed = Set<Int>()
        // Roots decided not to mark (a live stream, no stream recorded): not read again.
        var notToMark = Set<Int>()
        // Roots whose end check a stop kept from judging what the run fetched: stopped, not done.
        var stoppedUnchecked = Set<Int>()
        // Roots given whose streams name members another root's end check dropped (two MPDs
        // naming the same segment URLs), and that root's URL: not done either (h9b F8).
        var droppedWith: [Int: (error: PrefetchError, by: Int)] = [:]

        /// Decides, before evicting anything, which items cannot fit under the limit even in an
        /// empty cache (refused), then keeps the cache under the cap as the run goes.
        @discardableResult
        func fitUnderCap(final: Bool = false) -> Int64? {
            guard !refusing else { return nil }
            // What undecided items hold now may stand over the cap until they are decided.
            var allowance: Int64 = 0
            if let cap = limit() {
                let footprint = Evictor(store: store).footprint(exact: false)
                for (_, r) in running { if let bytes = r.job.expectedBytes { run.expects(bytes, of: r.index) } }
                for (t, verdict) in run.verdicts(fixed: footprint.fixed, perPart: footprint.perEntry, limit: cap) {
                    switch verdict {
                    case .neverFits(let needs): refuse(t, error: noRoom(cap, needs: needs))
                    case .undecided(let holds) where !final: allowance = Checked.saturatingAdd(allowance, holds)
                    case .undecided, .fits: break
                    }
                }
            }
            return keepUnderCap(protecting: run.keys, final: final, allowance: allowance)
        }

        /// Item `t` and all it named are not fetched further; what this run stored of them is
        /// given back (what was cached before stays), and one line says why.
        func refuse(_ t: Int, error: PrefetchError) {
            refusing = true
            run.refusing(t)  // before the aborts: the parts' ends are not said
            for (_, r) in running where run.root(of: r.index) == t { r.job.abort(error) }
            let (keys, said) = run.refuse(t, error: error)
            for key in keys { heldManifests.removeValue(forKey: key)?.close() }  // given back: no longer held
            refusing = false
            var c = Evictor.Criteria()
            c.keys = keys
            c.keepPinned = true
            c.alone = true
            if !keys.isEmpty { _ = try? Evictor(store: store).evict(c, dryRun: false) }
            events(said)
        }

        /// The stream item `index` names (its manifest's result `r`) joins the run, each URL of it
        /// once, under its stream's lock (`replaced`: a live manifest's old copy, put back when
        /// the new one's stream is refused).
        func followStream(_ index: Int, _ r: PrefetchResult, replaced: CachedCopy?) {
            // The stream it names joins the run (each URL of it once).
            let (members, error) = expand(r, item: run.items[index], root: run.key(of: run.root(of: index)))
            if let error {
                run.followFailed(index, error)
                if let replaced { putBack(replaced, url: run.items[index].url) }
            }
            if error == nil, heldManifests[r.key] == nil, let held = try? store.openDataForReading(key: r.key) { heldManifests[r.key] = held }
            // The hosts its playlists came from: the URL given, and where each was redirected
            // (this run, or as the catalog recorded it when it is cached already).
            let answered = r.finalURL ?? ((try? store.catalog.finalURL(of: r.key)) ?? nil) ?? r.url
            let own = run.streamHosts(of: index, answered: answered)
            for var m in members {
                if m.memberOrigins != nil {
                    // A segment, init or key: its stream's hosts only, redirects included.
                    var only = options.memberHosts
                    for host in own { only.add(host: host, port: nil) }
                    m.memberOrigins = only
                    // Its other BaseURLs only when on hosts the stream may reach.
                    if let mirrors = m.mirrors {
                        m.mirrors?.bases = mirrors.bases.enumerated().filter { $0.offset == 0 || self.refusal($0.element, own: own) == nil }.map { $0.element }
                        if m.mirrors?.bases.count == 1 { m.mirrors = nil }
                    }
                }
                run.joinMember(m, of: index, refusal: refusal(m.url, own: own, mpd: m.checkSegment == .dashSegment))
            }
        }

        /// Streams first read in this run whose lock another run took meanwhile: each follows once
        /// that run lets the lock go (it reads what that run left), polled from a timer as items
        /// waiting to start are; stopped, each fails with the stop's reason.
        func pollDeferredStreams() {
            deferredStreams.removeAll { d in
                guard run.results[d.index]?.error == nil else {
                    if let said = run.said(d.index) { events(said) }
                    return true
                }
                guard (try? lockStream(d.index)) == true else { return false }
                followStream(d.index, d.result, replaced: d.replaced)
                if let said = run.said(d.index) { events(said) }  // held till now (`settle`)
                releaseStreamLock(of: d.index)
                return true
            }
            if !deferredStreams.isEmpty { pollStreamLocks() }
        }

        /// `launch` again in 50 ms (once, however many wait): a stream's lock another run holds
        /// is polled, for an item waiting to start and for a stream waiting to be followed.
        func pollStreamLocks() {
            guard !pollingForStream, !fetcher.isStopped else { return }
            pollingForStream = true
            fetcher.after(0.05) {
                pollingForStream = false
                launch()
            }
        }

        /// Why the run stopped: its deadline, the cap, or a signal.
        func stopped() -> PrefetchError {
            switch fetcher.stopReason {
            case Self.deadlineReason: .deadline
            case Self.overCapReason: noRoom(limit() ?? options.maxSize ?? 0)
            default: .interrupted
            }
        }

        /// Item `index`'s end is known: what follows from it joins the run, then it is said.
        func settle(_ index: Int, _ done: PrefetchJob) {
            var result = done.result
            // Stopped with its completion already on the checkpoint queue: the job's end waited
            // for that commit, so the catalog says whether the video completed. Complete, it is
            // done (before: said stopped, counted unfinished, exit 3, though complete).
            if fetcher.isStopped, !stoppedUnread.contains(index), var r = result, !r.complete, r.error == .deadline || r.error == .interrupted,
               ((try? store.catalog.entry(key: r.key)) ?? nil)?.isComplete == true {
                r.error = nil
                r.complete = true
                result = r
            }
            // A live manifest fetched again: its new copy replaces the cached one only when whole
            // and accepted; the old copy comes back if the stream the new one names is refused.
            var replaced: CachedCopy?
            if let live = refetching.removeValue(forKey: index) {
                (result, replaced) = settleRefetch(live, result, url: run.items[index].url)
            } else if done.entry.refusedManifest {
                // A manifest stopped past its size limit is not kept as an entry (as one refused whole).
                forgetRefusedPlaylist(key: done.key)
            } else if let r = result, r.complete, let why = notTheManifest(r, item: run.items[index]) {
                forgetRefusedPlaylist(key: r.key)
                result?.complete = false
                result?.error = .notTheVideo(why)
            }
            for follow in run.settle(index, result, expandStreams: options.expandStreams) {
                switch follow {
                case .dashIndex(let sidx, let r):
                    // A DASH SegmentBase file's sidx is held: its subsegments join the run, the same entry.
                    let (more, error) = followDASHIndex(r, sidx)
                    if let error { run.followFailed(index, error) }
                    if let more { run.joinPart(more, of: index) }
                case .stream(let r):
                    // A stream first read in this run: its lock, before its members are recorded
                    // (a run started since found no stream to wait for). Held by another run,
                    // which began it meanwhile: this one waits for that one (polled, to the
                    // deadline), then follows what it left; with --no-wait it fails.
                    if index < run.given, streamLocks[index] == nil {
                        let locked: Bool
                        do { locked = try lockStream(index) } catch {
                            run.followFailed(index, PrefetchError(error))
                            if let replaced { putBack(replaced, url: run.items[index].url) }
                            continue
                        }
                        guard locked else {
                            guard options.waitForLock else {
                                run.followFailed(index, .streamBusy("another vcache process began completing this stream during this run; skipped (--no-wait)"))
                                if let replaced { putBack(replaced, url: run.items[index].url) }
                                continue
                            }
                            events(.waitingForLock(url: run.items[index].url))
                            deferredStreams.append(DeferredStream(index: index, result: r, replaced: replaced))
                            pollDeferredStreams()
                            continue
                        }
                    }
                    followStream(index, r, replaced: replaced)
                }
            }
            // A stream waiting for another run's lock is said once it follows (`pollDeferredStreams`).
            if !deferredStreams.contains(where: { $0.index == index }), let said = run.said(index) { events(said) }
        }

        /// Whether item `index` may start: an item given that needs its stream's lock holds it.
        /// Busy, the item waits (polled, to the deadline) or, with --no-wait, fails.
        func streamLocked(_ index: Int) -> Bool {
            guard options.expandStreams, index < run.given, streamLocks[index] == nil else { return true }
            let key = run.key(of: index)
            guard streamRoots.contains(key) || playlistOwners[key] != nil else { return true }  // (one that becomes a root locks then: `settle`)
            do {
                if try lockStream(index) { return true }
            } catch {
                failUnstarted(index, PrefetchError(error))
                return false
            }
            guard options.waitForLock else {
                failUnstarted(index, .streamBusy("another vcache process is completing this stream; skipped (--no-wait)"))
                return false
            }
            if waitedForStream.insert(index).inserted {
                waitingForStream.append(index)
                events(.waitingForLock(url: run.items[index].url))
                testPause("stream-lock-busy", key)
            }
            pollStreamLocks()
            return false
        }

        /// Item `index` ends before a job was made for it.
        func failUnstarted(_ index: Int, _ error: PrefetchError) {
            let r = PrefetchResult(url: run.items[index].url, key: run.key(of: index), length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                   requestedBytes: nil, complete: false, elapsed: 0, error: error)
            _ = run.settle(index, r, expandStreams: false)
            if let said = run.said(index) { events(said) }
            releaseStreamLock(of: index)
        }

        /// The stream of item `index` has no item running or waiting any more: its static root
        /// manifest is asked for again when this run fetched members of it (`endCheck`), then
        /// its lock goes.
        func releaseStreamLock(of index: Int) {
            let t = run.root(of: index)
            guard streamLocks[t] != nil, !running.values.contains(where: { run.root(of: $0.index) == t }), !run.waits(root: t),
                  endChecks[t] == nil else { return }
            if endChecked.insert(t).inserted, endCheck(t) { return }
            for (root, lock) in streamLocks.removeValue(forKey: t) ?? [] { store.releaseStreamLock(lock, root: root) }
        }

        /// A `-v` line about the end check of `url`.
        func trace(_ url: String, _ message: @autoclosure () -> String) {
            if options.verbose { events(.trace(url: url, message: message())) }
        }

        /// Member `index` is about to fetch bytes (`toFetch` not 0, or not known yet): the static
        /// stream it is a member of is unconfirmed until its end check passes, marked (one write
        /// for the stream) before its first member is stored (h9b F1). A run that fetches
        /// nothing marks nothing.
        func markUnconfirmed(before index: Int, toFetch: Int64?) {
            let t = run.root(of: index)
            guard options.expandStreams, toFetch != 0, index != t, t < run.given, !unconfirmed.contains(t), !notToMark.contains(t) else { return }
            guard self.readManifest(run.items[t].url) != nil, (try? store.catalog.markRootUnconfirmed(run.key(of: t), true)) != nil else {
                notToMark.insert(t)
                return
            }
            unconfirmed.insert(t)
        }

        /// Asks for root `t`'s static manifests again (its root; an HLS master's media playlists
        /// too, each that members were fetched under) when this run fetched members of its
        /// stream (`changedDuringRun`, Prefetcher+EndCheck.swift); false when there is nothing
        /// to ask (nothing fetched, a live stream). Its stream's mark (`unconfirmed`) goes when
        /// every answer is the manifest the run read, or when it fetched nothing; it stays when
        /// the item failed, the run stopped, or the origin gave no answer to judge by.
        func endCheck(_ t: Int) -> Bool {
            guard options.expandStreams, t < run.given, run.results[t]?.error == nil else { return false }
            let fetched = run.fetchedMembers(of: t)
            func confirm() {
                if unconfirmed.remove(t) != nil { try? store.catalog.markRootUnconfirmed(run.key(of: t), false) }
            }
            guard !fetcher.isStopped else {
                if !fetched.isEmpty { stoppedUnchecked.insert(t) }
                return false
            }
            guard !fetched.isEmpty, let root = self.readManifest(run.items[t].url) else {
                confirm()
                return false
            }
            var read = [root]
            if !root.mpd {
                for p in run.playlistsNamed(by: t) {
                    guard let c = self.cachedManifest(run.items[p].url) else { continue }
                    if c.live {  // a live playlist changes by design
                        confirm()
                        return false
                    }
                    if !run.fetchedMembers(of: t, under: p).isEmpty, let m = self.readManifest(run.items[p].url) { read.append(m) }
                }
            }
            testPause("end-check", run.key(of: t))
            var left = read.count
            var failure: PrefetchError?
            var unanswered: [String] = []
            func ask(_ m: ReadManifest) {
                let asked = m.validators.conditionalHeader ?? "no validators: the bytes are compared"
                trace(m.url, "end check: > GET \(asked)")
                // Asked again after a backoff as any request (--retries); still no answer: the
                // run stands, its stream left unconfirmed for the next run to ask.
                let ask = ManifestRevalidation.start(url: m.url, cached: m.bytes, cachedBase: m.base, validators: m.validators, mpd: m.mpd,
                                                     options: options.request, policy: RetryPolicy(options), fetcher: fetcher) { outcome in
                    trace(m.url, "end check: " + self.endCheckSaid(m, outcome))
                    if self.fetcher.isStopped {
                        stoppedUnchecked.insert(t)
                    } else if case .failed(let why, _) = outcome {
                        unanswered.append(m.url == run.items[t].url ? why : "\(m.url): \(why)")
                    } else if failure == nil, self.changedDuringRun(m, outcome) {
                        for key in fetched { heldManifests.removeValue(forKey: key)?.close() }  // this run's own hold
                        let others = (try? self.store.catalog.otherRoots(naming: fetched, besides: run.key(of: t))) ?? []
                        let e = self.dropFetched(fetched, differing: self.keptQueryParameters(m, outcome))
                        failure = e
                        for u in 0..<run.given where u != t && others.contains(run.key(of: u)) && droppedWith[u] == nil { droppedWith[u] = (e, t) }
                    }
                    left -= 1
                    guard left == 0 else { return }
                    endChecks.removeValue(forKey: t)
                    if let failure {
                        run.changedDuringRun(t, failure)
                        if let r = run.results[t] { self.events(.finished(r)) }
                    } else if !stoppedUnchecked.contains(t) {
                        if unanswered.isEmpty {
                            confirm()
                        } else {
                            self.events(.note(url: run.items[t].url, message: "its manifest could not be asked for again at the end of this run (\(unanswered.joined(separator: "; "))): what this run fetched stays, unconfirmed, so the stream reads partial until its next run finds the manifest unchanged"))
                        }
                    }
                    releaseStreamLock(of: t)
                }
                if let ask { endChecks[t, default: []].append(ask) } else { left -= 1 }
            }
            for m in read { ask(m) }
            guard endChecks[t] != nil else { return false }
            return true
        }

        /// The next item to start: one that waited for its stream's lock, when it is free now;
        /// else the next of the run.
        func nextToStart() -> Int? {
            if let k = waitingForStream.firstIndex(where: { streamLocked($0) }) { return waitingForStream.remove(at: k) }
            waitingForStream.removeAll { run.results[$0] != nil }  // failed meanwhile
            while let index = run.nextToStart() {
                if streamLocked(index) { return index }
            }
            return nil
        }

        func launch() {
            if !deferredStreams.isEmpty, !fetcher.isStopped { pollDeferredStreams() }
            while running.count < max(1, options.concurrency), !fetcher.isStopped, let index = nextToStart() {
                let events = self.events
                let key = run.key(of: index)
                let emit: (PrefetchEvent) -> Void = { event in
                    switch event {
                    case .finished: run.hold(event, of: index)
                    // A refetch's job writes its staging entry: it is said as the entry's.
                    case .started(let url, _, let length, let cached, let toFetch):
                        markUnconfirmed(before: index, toFetch: toFetch)
                        events(.started(url: url, key: key, length: length, alreadyCached: cached, toFetch: toFetch))
                    default: events(event)
                    }
                }
                var stale: StaleManifest?
                if options.expandStreams {
                    // A later start (an item run again), or an item a stream named, is read now:
                    // a live manifest is fetched again, a static one asked for again when its
                    // stream is partly cached (a segment, init or key is no manifest).
                    // (An item that waited for its stream's lock reads what the other run left.)
                    let reads = index >= run.given || completeAtStart?.contains(key) != false || waitedForStream.contains(index)
                    // A root whose manifest is gone while its members stay: they go first.
                    if streamLocks[index] != nil, streamRoots.contains(key), let e = self.dropMembersOfLostManifest(root: key, url: run.items[index].url) {
                        failUnstarted(index, e)
                        continue
                    }
                    let found = reads ? self.cachedManifest(run.items[index].url) : nil
                    refetching[index] = found.flatMap { $0.live ? self.liveRefetch($0) : nil }
                    if let found, !found.live, run.items[index].memberOrigins == nil, !askedWithMaster.contains(key) {
                        stale = self.staleManifest(found, root: run.key(of: run.root(of: index)), item: run.items[index], owners: index < run.given ? playlistOwners[key] ?? [] : [])
                    }
                    if index < run.given { completeAtStart?.insert(key) }
                }
                let job = PrefetchJob(item: run.items[index], store: store, options: options, fetcher: fetcher, storeKey: refetching[index]?.staging, emit: emit) { done in
                    var end = run.jobEnded(index, fetched: done.fetched, result: done.result, stopping: self.fetcher.isStopped)
                    // ENOSPC is a reason to make room under the cap's rules before failing: room
                    // made now, or freed meanwhile (another item's retry), and the item runs again.
                    if end == .makeRoom { end = run.roomAsked(for: index, made: self.makeRoom(protecting: run.keys)) }
                    // A DASH member its BaseURL did not answer: from the next BaseURL, when there is one.
                    if end == .settle, let said = run.nextBase(for: index, after: done.result) {
                        if !said.isEmpty { events(.note(url: run.items[run.root(of: index)].url, message: said)) }
                        end = .again
                    }
                    if end == .settle { settle(index, done) }
                    running.removeValue(forKey: ObjectIdentifier(done))
                    if end == .settle { releaseStreamLock(of: index) }
                    fitUnderCap()
                    // Start the next one from a timer, not from inside this job's callback.
                    self.fetcher.after(0) { launch() }
                }
                running[ObjectIdentifier(job)] = (index, job)
                // A partly cached stream's static manifest is asked for again before it is read.
                if let stale {
                    let id = ObjectIdentifier(job)
                    revalidations[id] = ManifestRevalidation.start(
                        url: stale.url, cached: stale.bytes, cachedBase: stale.base, validators: stale.validators, mpd: stale.mpd,
                        options: options.request, policy: RetryPolicy(options), fetcher: fetcher) { answer in
                            revalidations.removeValue(forKey: id)
                            // The end check's rule: the same encode in other bytes is no change.
                            let outcome = ManifestRevalidation.judged(answer, cached: stale.bytes, cachedBase: stale.base, mpd: stale.mpd, rules: self.options.keyRules)
                            // Stopped while it was asked: the stream was not completed, whatever the
                            // root's cached copy says (it read "ok ... complete", exit 0, a stream 4/8).
                            if self.fetcher.isStopped {
                                stoppedUnread.insert(index)
                                return job.abort(stopped())
                            }
                            self.keepingUnchangedVariants(stale, outcome, on: self.fetcher) { stale in
                                askedWithMaster.formUnion(stale.asked)
                                if self.fetcher.isStopped {
                                    stoppedUnread.insert(index)
                                    return job.abort(stopped())
                                }
                                if let e = self.revalidated(stale, outcome) { return job.abort(e) }
                                job.start()
                            }
                        }
                    if revalidations[id] != nil { continue }
                }
                job.start()
            }
        }

        if let maxTime = options.maxTime {
            fetcher.setDeadline(.now + .milliseconds(Checked.int64(maxTime * 1000, clampedTo: 0...Fetcher.longestWaitMilliseconds) ?? 0), reason: Self.deadlineReason)
        }
        launch()
        // With a cap, evict during long downloads too, not only between them: every cap/8
        // (1 MiB to 64 MiB) of new bytes, while the checkpoints keep disk use in the catalog current.
        let evictEvery = (options.maxSize ?? options.minFree).map { max(1 << 20, min(64 << 20, $0 / 8)) }
        var lastEvictionAt: Int64 = 0
        fetcher.run(tick: {
            var downloaded = run.finishedBytes
            for (_, r) in running {
                r.job.tick()
                downloaded += r.job.fetched
            }
            if let every = evictEvery, downloaded - lastEvictionAt >= every {
                lastEvictionAt = downloaded
                fitUnderCap()
            }
        })
        // Stopped: every job still running checkpoints and reports; the rest never started.
        let why = stopped()
        for (id, r) in running.sorted(by: { $0.value.index < $1.value.index }) {
            // One still asking for its stream's manifest again read nothing of its stream.
            if revalidations[id] != nil { stoppedUnread.insert(r.index) }
            r.job.abort(why)
        }
        // A stream that waited for another run's lock and never got it: not followed.
        for d in deferredStreams {
            if run.results[d.index]?.error == nil { run.followFailed(d.index, why) }
            if let said = run.said(d.index) { events(said) }
        }
        let usage = fitUnderCap(final: true)
        let never = run.neverStarted(why)
        if let cap = limit(), let usage, usage > cap {
            for i in giveBack(run.items, cap: cap, usage: usage).sorted() {
                run.givenBack(i, noRoom(cap))
                // It may have been reported done already: say that it was given back, and why.
                events(.note(url: run.items[i].url, message: "given back, not kept: \(noRoom(cap))"))
            }
        }
        if case .noRoom = why {
            // Stopped for room, an item that stayed and is complete is done, whatever stopped it.
            for i in run.results.indices {
                guard case .noRoom? = run.results[i]?.error else { continue }
                if ((try? store.catalog.entry(key: run.key(of: i))) ?? nil)?.isComplete == true { run.stayedComplete(i) }
            }
        }
        // Items given that never started are said too (each unfinished URL is named). A stream's
        // members that never started are one line for the stream, with all it fetched: a VOD of
        // thousands of segments stopped at the deadline is a line in a cron log, not thousands.
        var streamsStopped: [Int] = []
        for i in never {
            if i < run.given {
                if let r = run.results[i] { events(.finished(r)) }
            } else if !streamsStopped.contains(run.root(of: i)) {
                streamsStopped.append(run.root(of: i))
            }
        }
        if !streamsStopped.isEmpty {
            let out = run.outcome()
            for t in streamsStopped.sorted() {
                var r = out[t]
                r.error = why
                r.complete = false
                events(.finished(r))
            }
        }
        // Stopped while (or before) a stream's manifest was asked for again at its end: what
        // the run fetched was not judged, so the stream stays unconfirmed and the item is
        // stopped, never done (Docs/dash.md, "Changed during a run").
        stoppedUnchecked.formUnion(endChecks.keys)
        let unchecked = stoppedUnchecked.sorted().filter { run.results[$0]?.error == nil }
        for t in unchecked { run.changedDuringRun(t, why) }
        if !unchecked.isEmpty {
            let out = run.outcome()  // said with all its stream fetched
            for t in unchecked { events(.finished(out[t])) }
        }
        // A stream of the run that lost members to another's end check is not done (h9b F8).
        for (u, d) in droppedWith.sorted(by: { $0.key < $1.key }) where run.results[u] != nil && run.results[u]?.error == nil {
            events(.note(url: run.items[u].url, message: "members of its stream were fetched for \(run.items[d.by].url), whose manifest changed on the origin during this run, and were dropped with what that run fetched"))
            run.changedDuringRun(u, d.error)
            if let r = run.results[u] { events(.finished(r)) }
        }
        for said in run.refusedHostsSaid() { events(said) }
        // A refetch whose job never settled leaves the cached copy as it was, and no new one.
        for live in refetching.values { discardStaging(live) }
        // The jobs ended after the loop did (stopped) left timers and results no loop will run.
        fetcher.discardPending()
        revalidations.removeAll()
        endChecks.removeAll()
        return run.outcome()
    }
}

/// A stream first read by a run while another run took its lock (`Prefetcher.run`): it follows
/// once that lock is free.
struct DeferredStream {
    let index: Int
    let result: PrefetchResult
    let replaced: CachedCopy?
}

/// A live manifest (`Prefetcher.liveRefetch`) fetched again: the new copy goes into an entry of
/// its own, `staging`, until it is whole and accepted, so the cached one and its stream survive a
/// run killed during the refetch (what such a run leaves in `staging` is removed by the next
/// refetch of the URL; a whole copy left by a kill inside `storeWhole` is restored by the next run
/// and by `verify --fix`: `restoreStagedManifests`). vcache's own: `ls` does not list it.
struct LiveRefetch {
    let key: CacheKey
    /// The cached copy is an MPD (else an HLS media playlist).
    let mpd: Bool
    var staging: CacheKey { CacheStore.stagingKey(of: key) }
}

/// A cached manifest's bytes and the entry they were, kept while its new copy is read.
struct CachedCopy {
    let bytes: [UInt8]
    let entry: CacheEntry
}
