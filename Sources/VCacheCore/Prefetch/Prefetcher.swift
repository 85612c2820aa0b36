import Foundation

/// Runs prefetch jobs on one fetch loop, at most `options.concurrency` at a time (ExoPlayer's
/// `CacheWriter`, for many URLs). The core never prints: it reports through `events`, on the
/// loop's thread, and returns one result per item in input order.
public final class Prefetcher {
    public let store: CacheStore
    public let options: PrefetchOptions
    /// Internal, not private: `Prefetcher+DASH.swift` notes on it too.
    let events: (PrefetchEvent) -> Void
    private let fetcher: Fetcher
    /// Streams of live playlists let go before their run fetched them again, by root key; used
    /// on the loop's thread only.
    private var letGoStreams: [String: StreamRecord] = [:]

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
        var indexByKey: [String: Int] = [:]
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
    private func keepUnderCap(protecting keys: Set<String>, final: Bool = false, allowance: Int64 = 0) -> Int64? {
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
    private func makeRoom(protecting keys: Set<String>) -> Bool {
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

    /// A live playlist (no EXT-X-ENDLIST) or dynamic MPD cached whole is fetched again by the
    /// next run, which then fetches the segments added since: its cached copy is let go first.
    private func forgetLivePlaylist(_ url: String) {
        let key = options.keyRules.key(for: url)
        // Every item of a run comes here: its first bytes decide before the whole is read.
        guard let e = (try? store.catalog.entry(key: key)) ?? nil, e.isComplete, let length = e.length else { return }
        let head = store.cachedBytes(of: e, count: 4096) ?? []
        if length <= Int64(HLSPlaylist.maxBytes), HLSPlaylist.looksLikePlaylist(firstBytes: head.prefix(16), contentType: e.contentType) {
            guard case .media(let media)? = store.cachedPlaylist(e, keyRules: options.keyRules, base: e.latestURL)?.playlist, media.isLive else { return }
        } else if length <= Int64(MPD.maxBytes), MPD.looksLikeMPD(firstBytes: head, contentType: e.contentType) {
            // A dynamic MPD, the same (Docs/dash.md).
            guard let mpd = store.cachedMPD(e)?.mpd, mpd.isDynamic else { return }
        } else {
            return
        }
        // Its stream is kept (only the playlist goes): its rows go with the root, so they are
        // written again once the playlist is back (a stream is recorded only for a root the
        // catalog holds), with what the playlist names now (`expand`).
        let stream = (try? store.catalog.stream(root: key)) ?? nil
        var c = Evictor.Criteria()
        c.keys = [key]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
        if let stream { letGoStreams[key] = stream }
    }

    /// The items an HLS playlist names (Docs/hls.md): for a master, its chosen media playlists;
    /// for a media playlist, the segments (the first `--seconds` of them, or all), their init
    /// sections and keys, byte ranges merged. Each carries the stream's `--seconds`.
    /// `root`: the key of the item the run was given (the stream's root manifest).
    func expand(_ r: PrefetchResult, item: PrefetchItem, root: String) -> (items: [PrefetchItem], error: PrefetchError?) {
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
        if let before = letGoStreams.removeValue(forKey: r.key) {
            _ = try? store.catalog.recordStream(root: r.key, format: before.format, members: before.members)
        }
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
            guard let out = try? Evictor(store: store).evict(c, dryRun: false), !out.evicted.isEmpty else { continue }
            given.insert(i)
            urls.append(e.latestURL)
            freed += out.freedBytes
            usage = out.usageAfter
        }
        events(.evicted(urls: urls, freedBytes: freed, usage: usage, overCap: usage > cap))
        return given
    }

    private func runUnique(_ requested: [PrefetchItem]) -> [PrefetchResult] {
        // An HLS stream adds its playlists and segments to the run as they are read (Docs/hls.md):
        // `items` grows; `parent` ties each added item to the one it came from.
        var items = requested
        var parent: [Int: Int] = [:]
        var results = [PrefetchResult?](repeating: nil, count: items.count)
        var running: [ObjectIdentifier: (index: Int, job: PrefetchJob)] = [:]
        var next = 0
        var finishedBytes: Int64 = 0  // downloaded by jobs that have ended
        // Items whose disk filled, to run again after room was made (each at most 3 times).
        var again: [Int] = []
        var spaceRetries: [Int: Int] = [:]
        // Items whose complete bytes did not have an expected digest, fetched whole once more:
        // the bytes the first attempt fetched (they count in the result too).
        var refetched: [Int: Int64] = [:]
        // A job's "finished" is held until its item's end is known: a full disk may run it again
        // (then that failure is never said), a playlist's stream may fail it.
        var heldFinish: [Int: PrefetchEvent] = [:]
        // Counts the times room was made; an item whose disk filled after room was made for
        // another (in parallel) runs again too.
        var roomMade = 0
        var roomMadeAtStart: [Int: Int] = [:]
        // What each item will hold, as its response says (ItemFit), and the items given (by index)
        // found too big for the limit even alone: their parts are neither fetched nor said.
        var sizes: [Int: Int64] = [:]
        var refused = Set<Int>()
        var refusing = false
        /// The item given that item `i` came from (a stream's root; `i` itself for an item given).
        func top(_ i: Int) -> Int {
            var t = i
            while let p = parent[t] { t = p }
            return t
        }

        /// Decides, before evicting anything, which items cannot fit under the limit even in an
        /// empty cache (`refuse`), then keeps the cache under the cap as the run goes.
        @discardableResult
        func fitUnderCap(final: Bool = false) -> Int64? {
            guard !refusing else { return nil }
            // What undecided items hold now may stand over the cap until they are decided.
            var allowance: Int64 = 0
            if let cap = limit() {
                let footprint = Evictor(store: store).footprint(exact: false)
                for (_, r) in running { if let bytes = r.job.expectedBytes { sizes[r.index] = bytes } }
                var parts: [Int: [Int64?]] = [:]
                // An item ended without a response (refused, failed) holds nothing.
                for i in items.indices { parts[top(i), default: []].append(sizes[i] ?? (results[i] != nil ? 0 : nil)) }
                for t in requested.indices where !refused.contains(t) {
                    switch ItemFit.verdict(parts[t] ?? [], fixed: footprint.fixed, perPart: footprint.perEntry, limit: cap) {
                    case .neverFits(let needs): refuse(t, error: noRoom(cap, needs: needs))
                    case .undecided(let holds) where !final: allowance = Checked.saturatingAdd(allowance, holds)
                    case .undecided, .fits: break
                    }
                }
            }
            return keepUnderCap(protecting: runKeys, final: final, allowance: allowance)
        }

        /// Item `t` and all it named are not fetched further; what this run stored of them is
        /// given back (what was cached before stays), and one line says why.
        func refuse(_ t: Int, error: PrefetchError) {
            refused.insert(t)
            refusing = true
            let parts = items.indices.filter { top($0) == t }
            for (_, r) in running where top(r.index) == t { r.job.abort(error) }
            for i in parts where results[i] == nil {
                results[i] = PrefetchResult(url: items[i].url, key: options.keyRules.key(for: items[i].url), length: nil, fetchedBytes: 0,
                                            alreadyCachedBytes: 0, requestedBytes: nil, complete: false, elapsed: 0, error: error)
            }
            for i in parts { results[i]?.error = error }
            refusing = false
            var c = Evictor.Criteria()
            c.keys = Set(parts.compactMap { i in results[i].flatMap { $0.fetchedBytes > 0 && $0.alreadyCachedBytes == 0 ? $0.key : nil } })
            c.alone = true
            if !(c.keys ?? []).isEmpty { _ = try? Evictor(store: store).evict(c, dryRun: false) }
            let first = results[t]
            self.events(.finished(PrefetchResult(url: items[t].url, key: first?.key ?? options.keyRules.key(for: items[t].url), length: nil,
                                                 fetchedBytes: 0, alreadyCachedBytes: 0, requestedBytes: nil, complete: false,
                                                 elapsed: 0, error: error)))
        }

        func launch() {
            while (!again.isEmpty || next < items.count) && running.count < max(1, options.concurrency) && !fetcher.isStopped {
                let index: Int
                if again.isEmpty {
                    index = next
                    next += 1
                    if results[index] != nil { continue }  // decided without a request (a refused member)
                } else {
                    index = again.removeFirst()
                }
                if refused.contains(top(index)) { continue }
                let events = self.events
                let emit: (PrefetchEvent) -> Void = { event in
                    if case .finished = event { heldFinish[index] = event } else { events(event) }
                }
                let job = PrefetchJob(item: items[index], store: store, options: options, fetcher: fetcher, emit: emit) { done in
                    finishedBytes += done.fetched
                    if let r = done.result { sizes[index] = r.alreadyCachedBytes + r.fetchedBytes }
                    let held = heldFinish.removeValue(forKey: index)
                    // ENOSPC is a reason to make room under the cap's rules before failing: room
                    // made now, or freed meanwhile (another item's retry), and the item runs again.
                    let madeMeanwhile = roomMade > roomMadeAtStart[index, default: 0]
                    if case .disk(let e)? = done.result?.error, e.isNoSpace, spaceRetries[index, default: 0] < 3,
                       madeMeanwhile || self.makeRoom(protecting: runKeys) {
                        if !madeMeanwhile { roomMade += 1 }
                        spaceRetries[index, default: 0] += 1
                        again.append(index)
                    } else if case .checksumMismatch? = done.result?.error, refetched[index] == nil, !self.fetcher.isStopped {
                        // Not the file expected (its bytes are dropped): the whole, once more.
                        refetched[index] = done.result?.fetchedBytes ?? 0
                        items[index].requests = []
                        again.append(index)
                    } else {
                        results[index] = done.result
                        // A manifest stopped past its size limit is not kept as an entry (as one refused whole).
                        if done.refusedManifest { self.forgetRefusedPlaylist(key: done.key) }
                        // A member redirected to a host its stream may not reach: refused as one
                        // named there would be, and counted with them.
                        if items[index].memberOrigins != nil, case .transport(let t)? = done.result?.error, t.kind == .redirectRefused,
                           let to = t.redirectedTo {
                            let own = (streamHosts[top(index)] ?? []).sorted()
                            results[index]?.error = .refusedHost(host: to.host.contains(":") ? "[\(to.host)]" : to.host, own: own, redirected: true)
                            results[index]?.refusedMembers = 1
                        }
                        if let first = refetched[index] {
                            results[index]?.fetchedBytes += first
                            if case .checksumMismatch(var m)? = done.result?.error {
                                m.refetched = true
                                results[index]?.error = .checksumMismatch(m)
                            }
                        }
                        // A DASH SegmentBase file's sidx is held: its subsegments join the run, the same entry.
                        if let follow = items[index].dashIndex, let r = done.result, r.succeeded {
                            let (found, error) = self.followDASHIndex(r, follow)
                            if let error { results[index]?.error = error }
                            if var more = found {
                                // The same entry: its init and sidx asked again (held, they cost
                                // nothing; dropped with their version, they come back with the
                                // subsegments), and when this run wrote all it holds, one version
                                // with what it adds even under no strong validator.
                                more.requests = items[index].requests + more.requests
                                more.heldBytesAreThisRuns = r.alreadyCachedBytes == 0
                                more.memberOrigins = items[index].memberOrigins
                                parent[items.count] = index
                                items.append(more)
                                results.append(nil)
                            }
                        }
                        if let r = done.result, r.isPlaylist, r.succeeded, self.options.expandStreams {
                            // The stream it names joins the run (each URL of it once).
                            let root = top(index)
                            let (members, error) = self.expand(r, item: items[index], root: self.options.keyRules.key(for: items[root].url))
                            if let error { results[index]?.error = error }
                            // The hosts its playlists came from: the URL given, and where each was redirected
                            // (this run, or as the catalog recorded it when it is cached already).
                            var own = streamHosts[root] ?? Set([items[root].url].compactMap { OriginTarget.of($0)?.host })
                            let answered = r.finalURL ?? ((try? self.store.catalog.finalURL(of: r.key)) ?? nil) ?? r.url
                            if let host = OriginTarget.of(answered)?.host { own.insert(host) }
                            streamHosts[root] = own
                            for var m in members where !runKeys.contains(self.options.keyRules.key(for: m.url)) {
                                let key = self.options.keyRules.key(for: m.url)
                                if m.memberOrigins != nil {
                                    // A segment, init or key: its stream's hosts only, redirects included.
                                    var only = self.options.memberHosts
                                    for host in own { only.add(host: host, port: nil) }
                                    m.memberOrigins = only
                                }
                                runKeys.insert(key)
                                parent[items.count] = index
                                items.append(m)
                                if let refusal = self.refusal(m.url, own: own, mpd: m.checkSegment == .dashSegment) {
                                    // Never asked: a result of its own, said as it is decided.
                                    var failed = PrefetchResult(url: m.url, key: key, length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                                                requestedBytes: nil, complete: false, elapsed: 0, error: refusal)
                                    failed.refusedMembers = 1
                                    results.append(failed)
                                    refusedInStream(top(items.count - 1), items.count - 1)
                                } else {
                                    results.append(nil)
                                }
                            }
                        }
                        // A refused item's parts are not said one by one (`refuse` said it once);
                        // nor are members refused for their host (one line per stream, at the end).
                        if case .refusedHost? = results[index]?.error {
                            refusedInStream(top(index), index)
                        } else if !refused.contains(top(index)) {
                            if let r = results[index] { events(.finished(r)) } else if let held { events(held) }
                        }
                    }
                    running.removeValue(forKey: ObjectIdentifier(done))
                    fitUnderCap()
                    // Start the next one from a timer, not from inside this job's callback.
                    self.fetcher.after(0) { launch() }
                }
                running[ObjectIdentifier(job)] = (index, job)
                roomMadeAtStart[index] = roomMade
                if options.expandStreams { self.forgetLivePlaylist(items[index].url) }
                job.start()
            }
        }

        // Members refused for their host, per item given: the first and how many; said once
        // each, at the end of the run (a cron log gets one line per stream, not one per member).
        var refusedHosts: [Int: (first: Int, count: Int)] = [:]
        func refusedInStream(_ root: Int, _ i: Int) {
            refusedHosts[root] = (refusedHosts[root]?.first ?? i, (refusedHosts[root]?.count ?? 0) + 1)
        }
        func sayRefusedHosts() {
            for (_, r) in refusedHosts.sorted(by: { $0.key < $1.key }) {
                guard var said = results[r.first], case .refusedHost(let host, let own, let redirected, _, let mpd)? = said.error else { continue }
                said.error = .refusedHost(host: host, own: own, redirected: redirected, more: r.count - 1, mpd: mpd)
                events(.finished(said))
            }
        }
        var runKeys = Set(items.map { options.keyRules.key(for: $0.url) })
        // Per item given (a stream's root): the hosts its playlists came from.
        var streamHosts: [Int: Set<String>] = [:]
        if let maxTime = options.maxTime {
            fetcher.setDeadline(.now + .milliseconds(Checked.int64(maxTime * 1000, clampedTo: 0...Fetcher.longestWaitMilliseconds) ?? 0), reason: Self.deadlineReason)
        }
        launch()
        // With a cap, evict during long downloads too, not only between them: every cap/8
        // (1 MiB to 64 MiB) of new bytes, while the checkpoints keep disk use in the catalog current.
        let evictEvery = (options.maxSize ?? options.minFree).map { max(1 << 20, min(64 << 20, $0 / 8)) }
        var lastEvictionAt: Int64 = 0
        fetcher.run(tick: {
            var downloaded = finishedBytes
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
        let why: PrefetchError = switch fetcher.stopReason {
        case Self.deadlineReason: .deadline
        case Self.overCapReason: noRoom(limit() ?? options.maxSize ?? 0)
        default: .interrupted
        }
        for (_, r) in running.sorted(by: { $0.value.index < $1.value.index }) {
            r.job.abort(why)
        }
        let usage = fitUnderCap(final: true)
        var never: [Int] = []
        for i in results.indices where results[i] == nil {
            let key = options.keyRules.key(for: items[i].url)
            results[i] = PrefetchResult(url: items[i].url, key: key, length: nil, fetchedBytes: 0, alreadyCachedBytes: 0,
                                        requestedBytes: nil, complete: false, elapsed: 0,
                                        error: why == .interrupted ? .notStarted : why)
            never.append(i)
        }
        if let cap = limit(), let usage, usage > cap {
            for i in giveBack(items, cap: cap, usage: usage).sorted() {
                results[i]?.error = noRoom(cap)
                results[i]?.complete = false
                // It may have been reported done already: say that it was given back, and why.
                events(.note(url: items[i].url, message: "given back, not kept: \(noRoom(cap))"))
            }
        }
        if case .noRoom = why {
            // Stopped for room, an item that stayed and is complete is done, whatever stopped it.
            for i in results.indices {
                guard case .noRoom? = results[i]?.error else { continue }
                let key = options.keyRules.key(for: items[i].url)
                if ((try? store.catalog.entry(key: key)) ?? nil)?.isComplete == true {
                    results[i]?.error = nil
                    results[i]?.complete = true
                }
            }
        }
        // Items that never started are said too (each unfinished URL is named).
        for i in never { if let r = results[i] { events(.finished(r)) } }
        sayRefusedHosts()
        // The jobs ended after the loop did (stopped) left timers and results no loop will run.
        fetcher.discardPending()
        // A stream is one item to whoever asked: its members' bytes count for it, and the first
        // member that failed is its failure.
        var out = Array(results.prefix(requested.count).map { $0! })
        for i in stride(from: items.count - 1, through: requested.count, by: -1) {
            guard let r = results[i] else { continue }
            let root = top(i)
            guard root < out.count else { continue }
            out[root].fetchedBytes += r.fetchedBytes
            out[root].alreadyCachedBytes += r.alreadyCachedBytes
            out[root].refusedMembers += r.refusedMembers
            if let e = r.error { out[root].error = e }
            if !r.complete { out[root].complete = false }
        }
        return out
    }
}
