#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `PrefetchJob` asks for: opening the entry, the next request (`EntryPlan`), the judge of
/// its response, and what it reports of them.
extension PrefetchJob {
    /// Opens the locked entry's `data` and reads its row, dropping claims beyond what `data`
    /// holds (invariant 1). Read only now, under the lock: another writer may have filled it.
    /// `replacingUnclaimed`: bytes in `data` that no claim vouches for (left by a crash before a
    /// checkpoint, or by a drop whose file could not go) get a new file (`CacheStore.replaceData`):
    /// a reader of another process may still trust what was claimed of them, and this job would
    /// write any version over them (it holds no byte, so any is accepted). serve's jobs, which
    /// share the lock, write only the version their readers were promised and keep them.
    static func open(store: CacheStore, key: CacheKey, replacingUnclaimed: Bool) throws -> (data: RawFile, entry: CacheEntry?) {
        var data = try store.openDataForWriting(key: key)
        do {
            var entry = try store.catalog.entry(key: key)
            if let e = entry { entry = try store.dropClaimsBeyondData(e, data: data) }
            if replacingUnclaimed, entry?.ranges.isEmpty ?? true, try data.status().st_size > 0 {
                data = try store.replaceData(key: key, closing: data)
            }
            return (data, entry)
        } catch {
            data.close()
            throw error
        }
    }

    /// Some byte of this entry is cached, on its way to the catalog, or just written.
    var hasAnyBytes: Bool { writer?.hasAnyBytes ?? false }

    /// The next request to send, or nil when every wanted byte is held (or left to a lane:
    /// `--connections`).
    func nextAsked() -> ResponseJudge.Asked? {
        var held = writer?.held ?? RangeSet()
        if !connections.lanes.isEmpty { held.formUnion(connections.reserved) }
        return plan.next(length: entry.validators.length, held: held, stop: stopPoint)
    }

    /// The judge for the response to `asked`: where a 200's body may stop is the end of what is wanted.
    func judge(for asked: ResponseJudge.Asked) -> ResponseJudge {
        ResponseJudge(asked: asked, held: entry.validators, hasBytes: hasAnyBytes,
                      wantedEnd: plan.wantedEnd(length: entry.validators.length, stop: stopPoint),
                      weakPartsCombine: entry.heldFromThisRunOnly, promised: options.expectedVersion, heldDigests: entry.checks)
    }

    /// Sends the next request, or, when every wanted byte is held, goes on to the MP4's next step.
    func nextRequest() {
        // (A retry's timer that fires after a lane's drop already sent the next request: nothing.)
        guard !fetcher.isStopped, !isFinished, case .idle = phase else { return }
        // Once the length is known (the catalog's, or a response's), before anything is planned.
        if let length = entry.validators.length, let e = item.rangeOverrun(length: length) { return finish(e) }
        // Bytes a lane staged are held once written: never asked for again. (One connection has
        // nothing staged here: every transfer's end wrote its bytes.)
        if let writer, writer.hasStaged, let e = writer.writeStaged() { return finish(e) }
        guard let next = nextAsked() else {
            // The rest is the lanes': the entry completes once they are done (`laneEnded`).
            if !connections.lanes.isEmpty { return waitForLanes() }
            return advanceMP4()
        }
        let ifRange = hasAnyBytes ? entry.validators.ifRange : nil
        trace("> GET Range: bytes=\(next.spec)" + (ifRange.map { " If-Range: \($0)" } ?? ""))
        do {
            // A stream's member is fetched only from its stream's hosts, redirects included (a
            // run that already limits every origin, serve's, keeps its own limit).
            var request = options.request
            if request.allowedOrigins == nil, let only = item.memberOrigins { request.allowedOrigins = only }
            let t = try CurlTransfer(url: item.fetchURL, range: next.spec, ifRange: ifRange, options: request, delegate: self)
            enter(.fetching(Exchange(t, asked: next, writer: writer)))
            fetcher.add(t)
        } catch {
            finish(PrefetchError(error))
        }
    }

    /// Reports the start; returns the wanted bytes already cached when the length is known.
    func emitStarted() -> Int64? {
        guard let length = entry.validators.length else {
            emit(.started(url: item.url, key: key, length: nil, alreadyCached: 0, toFetch: nil))
            return nil
        }
        let stop = stopPoint
        let target = plan.target(length: length, stop: stop).count
        let cached = target - plan.missing(length: length, held: writer?.held ?? RangeSet(), stop: stop).reduce(0) { $0 + $1.count }
        emit(.started(url: item.url, key: key, length: length, alreadyCached: cached, toFetch: target - cached))
        return cached
    }

    func emitProgress() {
        emit(.progress(url: item.url, fetched: fetched, toFetch: toFetch))
    }

    /// What this job will fetch, once the length is known.
    var toFetch: Int64? {
        guard let length = entry.validators.length, let cached = entry.alreadyCached else { return nil }
        return max(fetched, plan.target(length: length, stop: stopPoint).count - cached)
    }

    /// What the entry will hold of what was asked once this job is done (`ItemFit`), once known.
    var expectedBytes: Int64? { toFetch.map { $0 + (entry.alreadyCached ?? 0) } }

    /// Whether to keep the running digest: only when this run can complete the video (not for a
    /// head); nil while the length is unknown.
    func digestWanted() -> Bool? {
        guard let length = entry.validators.length, let writer else { return nil }
        var after = plan.target(length: length, stop: stopPoint)
        after.formUnion(writer.checkpointer.durableOrPending)
        return after.contains(ByteRange(0, length))
    }
}
