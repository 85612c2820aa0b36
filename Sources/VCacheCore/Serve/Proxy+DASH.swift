#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// DASH through the proxy (Docs/dash.md, "Through serve"): an MPD is answered rewritten
/// (`DASHRewriter`), every URL a player can form from it resolving to the proxy, so segments go
/// through the cache and play offline. Fetched fresh from the origin each time, except a dynamic
/// MPD asked again within its `minimumUpdatePeriod` (`LivePlaylists`); the cached copy when the
/// origin cannot be reached.
extension Proxy {
    /// The answer for an MPD, or nil when `video` is not one (recognised as prefetch does: its
    /// Content-Type or first element, never its URL).
    func mpdAnswer(_ request: HTTPServer.Request, origin: String, video: ReadThrough.Video, peeked: [UInt8]? = nil) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String)? {
        let head = cachedHead(video, count: Int(min(video.length, 4096)), peeked: peeked)
        // A URL named like an MPD is asked for fresh too, whatever is cached under it (an empty
        // answer or an error page cached there must not hide the MPD the origin now serves), as
        // a `.m3u8` is; what is an MPD is still decided by the answer's content.
        let named = Self.pathExtension(origin) == "mpd"
        guard named || MPD.looksLikeMPD(firstBytes: head ?? [], contentType: video.contentType) else { return nil }
        let store = readThrough.store
        var version: NewVersion?
        let shared = livePlaylists.answerMPD(origin) {
            let asked = ContinuousClock.now, headAnswer = headFetchedWhole(video)
            let outcome = headAnswer.map { SmallGet.Outcome.answer($0) }
                ?? SmallGet.fetch(origin, options: readThrough.options.request, limit: MPD.maxBytes)
            guard case .answer(let fresh) = outcome, fresh.status == 200,
                  MPD.looksLikeMPD(firstBytes: Array(fresh.body.prefix(4096)), contentType: fresh.contentType) else { return (outcome, nil) }
            let (mpd, kept) = keepAnswerMPD(video, fresh, origin: origin)
            switch kept {
            case .taken(let v)?, .notKept(let v)?: version = v
            default: break
            }
            // What the answer says of members stored before its request began (`Proxy+Confirm`);
            // the head `open` fetched for this request began earlier than `asked`: no answer of it.
            if headAnswer == nil {
                switch kept {
                case .same?: manifestAnswered(video.key, roots: [video.key], at: asked, taken: false)
                case .taken?: manifestAnswered(video.key, roots: [video.key], at: asked, taken: true)
                default: break
                }
            }
            return (outcome, mpd.flatMap { $0.isDynamic ? LivePlaylists.freshness(minimumUpdatePeriod: $0.minimumUpdatePeriod) : nil })
        }
        var bytes: [UInt8], finalURL: String, status: CacheStatus, offline = false
        switch shared.outcome {
        case .answer(let fresh):
            guard fresh.status == 200 else {
                let code = Self.relayedStatus(fresh.status)
                return (HTTPServer.Response(status: code, headers: Self.inert), 0, 0, nil, "the origin answered \(fresh.status) for the MPD")
            }
            guard MPD.looksLikeMPD(firstBytes: Array(fresh.body.prefix(4096)), contentType: fresh.contentType) else {
                // The URL was an MPD and the origin now answers something else (a maintenance
                // page, a video): never the cached MPD as it was (its URLs would lead off the
                // proxy); the cached copy stays for offline answers when it is an MPD, and goes
                // when it is not one either (the same empty answer or page, kept by `open`).
                forgetRefusedMPD(video, refused: Array(fresh.body))
                return Self.notOne("the MPD", fresh)
            }
            (bytes, finalURL, status) = (Array(fresh.body), fresh.finalURL, shared.fetchedHere ? .miss : .hit)
        case .tooLarge:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil,
                    "the origin's MPD is larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one: not answered")
        case .failed:
            guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, let copy = store.cachedMPD(e) else { return nil }
            if let refused = unconfirmedOffline(video.key, what: "MPD") { return refused }
            (bytes, finalURL, status) = (copy.bytes, copy.base, .hit)
            offline = true
        }
        if let refusal = livePlaylists.mpdTotals.refusal(origin, bytes: bytes, base: finalURL) {
            // Past the segment total (Docs/dash.md, "limits"): refused as prefetch refuses it.
            forgetRefusedMPD(video, refused: bytes)
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil, "the MPD cannot be read: \(refusal)")
        }
        let host = request.headers["host"].map { "http://" + $0 } ?? (serverNames?.base ?? "http://127.0.0.1")
        let rewritten: [UInt8]
        do {
            rewritten = try DASHRewriter(url: finalURL, proxy: host).rewrite(bytes, edit: offline ? offlineEdit(bytes, url: finalURL) : { _ in })
        } catch {
            // Refused (past a limit, not well-formed): not kept, as a refused playlist is not; an
            // older copy that reads as an MPD stays (the offline answer a bad deploy must not take).
            forgetRefusedMPD(video, refused: bytes)
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil, "the MPD cannot be read: \(error)")
        }
        let headers: [(String, String)] = [("Content-Type", "application/dash+xml"), ("Cache-Control", "no-cache"), ("X-Cache", status.rawValue)]
        let count = Int64(rewritten.count)
        return (HTTPServer.Response(status: 200, headers: headers + Self.inert, body: .bytes(rewritten)),
                status == .hit ? count : 0, status == .hit ? 0 : count, status, "MPD, rewritten" + (version.map { "; " + $0.note } ?? ""))
    }

    /// The answer for a remote element an MPD names by `xlink:href` (a Period, AdaptationSet or
    /// SegmentList document, recognised by its root in the DASH namespace), rewritten as the MPD
    /// is (`DASHRewriter.rewriteRemote`), so no URL in it leads a player off the proxy. Its bytes
    /// are the cache's (kept whole as any small resource is, so it is answered offline too); nil
    /// when `video` is no such document.
    func remoteElementAnswer(_ request: HTTPServer.Request, origin: String, video: ReadThrough.Video, peeked: [UInt8]? = nil) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String)? {
        guard let head = cachedHead(video, count: Int(min(video.length, 4096)), peeked: peeked), DASHRewriter.looksLikeRemoteElement(head) else { return nil }
        let store = readThrough.store
        guard video.length <= Int64(MPD.maxBytes) else {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil,
                    "the origin's remote DASH element is larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one: not answered")
        }
        var e = (try? store.catalog.entry(key: video.key)) ?? nil
        if e?.isComplete != true {
            readThrough.store(origin, upTo: Int64(MPD.maxBytes))
            e = (try? store.catalog.entry(key: video.key)) ?? nil
        }
        guard let e, e.isComplete, let length = e.length, let bytes = store.cachedBytes(of: e, count: length) else {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil, "the remote DASH element could not be read whole")
        }
        let host = request.headers["host"].map { "http://" + $0 } ?? (serverNames?.base ?? "http://127.0.0.1")
        let rewritten: [UInt8]
        do {
            rewritten = try DASHRewriter(url: e.latestURL, proxy: host).rewriteRemote(bytes)
        } catch {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil, "the remote DASH element cannot be read: \(error)")
        }
        let status: CacheStatus = video.fromCatalog ? .hit : .miss
        let headers: [(String, String)] = [("Content-Type", "application/xml"), ("Cache-Control", "no-cache"), ("X-Cache", status.rawValue)]
        let count = Int64(rewritten.count)
        return (HTTPServer.Response(status: 200, headers: headers + Self.inert, body: .bytes(rewritten)),
                status == .hit ? count : 0, status == .hit ? 0 : count, status, "remote DASH element, rewritten")
    }

    /// The MPD as this very request's head `open` fetched it, whole, into the file the request
    /// holds (a manifest is read on past the head: `PrefetchJob.wholeManifestLimit`, or its rest
    /// asked by the same job): the origin's answer of a moment ago, so the first sight of an MPD
    /// costs one origin request (two when the origin honours the head's Range: the 206 ends at
    /// 64 KiB), not one more to fetch it fresh. Nil: the bytes came from the cache or not all
    /// from this request.
    private func headFetchedWhole(_ video: ReadThrough.Video) -> SmallGet.Answer? {
        let all = ByteRange(0, video.length)
        guard !video.fromCatalog, video.length > 0, video.length <= Int64(MPD.maxBytes), video.ownHead.contains(all),
              video.snapshot.claims.contains(all), let file = video.snapshot.file,
              let bytes = try? file.bytes(Int(video.length), at: 0) else { return nil }
        let final = ((try? readThrough.store.catalog.finalURL(of: video.key)) ?? nil) ?? video.url
        return SmallGet.Answer(status: 200, body: Data(bytes), finalURL: final, contentType: video.contentType,
                               etag: video.validators.etag, lastModified: video.validators.lastModified)
    }

    /// Offline, the MPD lists only what plays from the cache (`DASHRewriter.keepOnly`); when
    /// nothing does (no video, or video without the audio it needs), or the MPD is dynamic, it is
    /// answered whole and the player says what it misses.
    private func offlineEdit(_ bytes: [UInt8], url: String) -> (XMLEditNode) -> Void {
        guard let mpd = try? MPD.parse(bytes, url: url), !mpd.isDynamic else { return { _ in } }
        let store = readThrough.store, rules = readThrough.options.keyRules
        let playable = DASHPlayable(mpd) { u, range in
            guard let e = (try? store.catalog.entry(key: rules.key(for: u))) ?? nil else { return false }
            return range.map { e.ranges.contains(ByteRange($0.first, $0.last + 1)) } ?? e.isComplete
        } read: { u, range in
            // A SegmentBase file's cached sidx: its subsegments cached play (`DASHPlayable`).
            guard let e = (try? store.catalog.entry(key: rules.key(for: u))) ?? nil,
                  e.ranges.contains(ByteRange(range.first, range.last + 1)) else { return nil }
            return store.cachedBytes(of: e, at: range.first, count: range.count)
        }
        guard playable.plays(mpd) else { return { _ in } }
        return { DASHRewriter.keepOnly(playable, of: mpd, in: $0) }
    }

    /// An MPD serve refuses to read leaves nothing cached under its URL (the head `open` stored
    /// included), unless it is pinned, or the entry holds another MPD, whole, that reads (an
    /// earlier good version: the offline copy): as prefetch forgets a refused playlist.
    private func forgetRefusedMPD(_ video: ReadThrough.Video, refused: [UInt8]) {
        let store = readThrough.store
        // This request's own hold on `data` goes first, or the entry counts as in use (RawFile closes once).
        video.snapshot.file?.close()
        guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, !e.pinned else { return }
        if let copy = store.cachedMPD(e), copy.bytes != refused, (try? MPD.parse(copy.bytes, url: copy.base)) != nil { return }
        var c = Evictor.Criteria()
        c.keys = [video.key]
        c.alone = true
        _ = try? Evictor(store: store).evict(c, dryRun: false)
    }

    /// The stream in the catalog, as prefetch records it (Docs/dash.md): every init segment and
    /// segment (a SegmentBase file) of every Representation joins the MPD's stream, so serve
    /// checks each before storing it (`memberCheck`: an error page answered 200 is not kept) and
    /// the stream is one unit to `ls`, `evict` and the cap. Best effort: the answer does not wait
    /// on it, and a catalog that says no leaves the entries each on its own.
    private func recordStream(_ mpd: MPD, key: CacheKey) {
        let lazy = lazyTemplates.withLock { $0[key] != nil }
        _ = try? readThrough.store.catalog.recordStream(root: key, format: "dash", members: members(of: mpd, lazy: lazy))
    }

    /// Every init segment and segment (a SegmentBase file) of every Representation of `mpd`;
    /// `lazy`: of a template Representation whose URLs `lazyMember` reads back, its init only.
    private func members(of mpd: MPD, lazy: Bool = false) -> [StreamRecord.Member] {
        let rules = readThrough.options.keyRules
        let live = mpd.isDynamic ? DASHLiveClock(now: Date().timeIntervalSince1970) : nil
        var members: [StreamRecord.Member] = [], seen = Set<String>()
        for (p, _, rep) in mpd.representations {
            if lazy, let t = Self.readableTemplate(rep) {
                if let i = t.initialization, seen.insert(i).inserted { members.append(.init(key: rules.key(for: i), role: .initSection)) }
                continue
            }
            let period = mpd.periods[p]
            guard let plan = try? rep.plan(periodDuration: period.duration, live: live.map { ($0, mpd, period.start) }) else { continue }
            // A SegmentBase file (its init, index and media one resource) is a segment, as prefetch has it.
            let named: [(String?, StreamRole)] = plan.segments.map { ($0.url, .segment) } + [(plan.index?.url, .segment), (plan.initialization?.url, .initSection)]
            for case (let url?, let role) in named where seen.insert(url).inserted {
                members.append(.init(key: rules.key(for: url), role: role))
            }
        }
        return members
    }

    /// An MPD the origin answered 200 (`fresh`) for `origin`, carried out: kept (and its stream
    /// recorded) only when it reads as an MPD within the limits (one refused for its limits or
    /// unreadable would be of no use offline either), a re-encode taken (`keepCopy`). Nil: not
    /// kept. Its segment total is counted once per version (`MPDTotals`), not on every parse.
    /// Returns it parsed (nil: it does not read), and what was done.
    func keepAnswerMPD(_ video: ReadThrough.Video, _ fresh: SmallGet.Answer, origin: String) -> (mpd: MPD?, kept: KeptCopy?) {
        let store = readThrough.store, body = Array(fresh.body)
        let parsed = try? MPD.parse(body, url: fresh.finalURL, checkingTotal: false)
        guard let mpd = parsed, livePlaylists.mpdTotals.refusal(origin, bytes: body, base: fresh.finalURL, mpd: mpd) == nil else { return (parsed, nil) }
        // The stream is recorded when the copy is new: listing every segment URL of a large
        // MPD and reading its members back cost seconds per request (Docs/dash.md, "limits").
        learnTemplates(mpd, root: video.key, segments: livePlaylists.mpdTotals.segments(origin))
        // A stream prefetch recorded keeps the Representations it chose: recording every
        // Representation on each answer made a complete stream partial to `ls` and every
        // cron run ask for its MPD again (hostile probe h9d, F1). What serve stores of the
        // others is still dropped by a re-encode: `keepCopy` drops what the old copy names.
        let kept = keepCopy(video, fresh, mpd: mpd, url: origin)
        switch kept {
        case .new, .taken: recordStream(mpd, key: video.key)
        case .same: if !((try? store.catalog.isStreamRoot(video.key)) ?? false) { recordStream(mpd, key: video.key) }
        case .notKept: break
        }
        return (mpd, kept)
    }

    /// The MPD the origin answered, kept whole in the cache for offline answers (with the URL
    /// that answered it, which its BaseURLs resolve against): an older copy is replaced by the
    /// very bytes answered (`ReadThrough.keepWhole`: no second origin request). A static MPD
    /// cached whole that names another stream than the answer (a re-encode in place: not the
    /// same encode, `ManifestRevalidation.sameEncode`) is another version:
    /// its members go first, under the stream's lock (`takeNewVersion`); when they cannot, the
    /// answer is not kept and the new members are passed through. Whether the cache held these
    /// very bytes already, took them, or could not.
    func keepCopy(_ video: ReadThrough.Video, _ fresh: SmallGet.Answer, mpd: MPD, url: String) -> KeptCopy {
        let store = readThrough.store, body = Array(fresh.body)
        let validators = Validators(length: Int64(body.count), etag: fresh.etag, lastModified: fresh.lastModified)
        let keep = { () -> Bool in
            try? store.catalog.recordFinalURL(key: video.key, url: fresh.finalURL)
            return self.readThrough.keepWhole(body, url: url, validators: validators, contentType: fresh.contentType)
        }
        guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, let copy = store.cachedMPD(e) else {
            // A stream root whose copy is gone (dropped as another MPD naming its members was
            // re-encoded, `verify --fix`) while members hold bytes: nothing says which version
            // they are, so they go first, as prefetch has it (`dropMembersOfLostManifest`).
            let recorded = ((try? store.catalog.stream(root: video.key)) ?? nil)?.keys.filter { $0 != video.key } ?? []
            if !mpd.isDynamic, ((try? store.catalog.entries(keys: recorded)) ?? [:]).contains(where: { !$0.value.ranges.isEmpty }) {
                switch takeNewVersion(root: video.key, old: recorded, new: members(of: mpd), keep: keep) {
                case .taken(let n, let others, _, _): return .taken(.taken(dropped: n, others: others))
                case .passedThrough: return .notKept(.passedThrough)
                }
            }
            _ = keep()
            return .new
        }
        if copy.bytes == body {
            try? store.catalog.recordFinalURL(key: video.key, url: fresh.finalURL)
            versionKept(video.key)
            return .same
        }
        guard !mpd.isDynamic, let was = copy.mpd, !was.isDynamic else {
            _ = keep()
            versionKept(video.key)
            return .new
        }
        // The same encode in other bytes (prefetch's end-check rule: member URLs under the key
        // rules; `publishTime`, the query of a URL naming no member aside) is no re-encode: nothing is dropped (hostile probe h9d, F13:
        // a just-in-time packager's `publishTime` emptied the warmed stream at every player).
        if sameEncode(body, copy.bytes, mpd: true) {
            _ = keep()
            versionKept(video.key)
            return .same
        }
        // What the stream records and what the old copy names (a member stored before it was
        // recorded must go too). A large MPD's template segments are recorded only as serve
        // stores them: one cached as an entry of its own before (a `prefetch` of its URL, a
        // player's request after a restart) is found by its name (h9d F8).
        let lazy = lazyTemplates.withLock { $0[video.key] != nil }
        let recorded = ((try? store.catalog.stream(root: video.key)) ?? nil)?.keys ?? []
        let old = Array(Set(recorded + members(of: was, lazy: lazy).map(\.key) + (lazy ? cachedTemplateSegments(of: was) : [])))
        switch takeNewVersion(root: video.key, old: old, new: members(of: mpd), keep: keep) {
        case .taken(let n, let others, _, _): return .taken(naming(.taken(dropped: n, others: others), tokensOf: body, copy.bytes, mpd: true))
        case .passedThrough: return .notKept(.passedThrough)
        }
    }

    enum KeptCopy { case same, new, taken(NewVersion), notKept(NewVersion) }
}
