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
    func mpdAnswer(_ request: HTTPServer.Request, origin: String, video: ReadThrough.Video) -> (response: HTTPServer.Response, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus?, note: String)? {
        let head = cachedHead(video, count: Int(min(video.length, 4096)))
        guard MPD.looksLikeMPD(firstBytes: head ?? [], contentType: video.contentType) else { return nil }
        let store = readThrough.store
        let shared = livePlaylists.answerMPD(origin) {
            let outcome = SmallGet.fetch(origin, options: readThrough.options.request, limit: MPD.maxBytes)
            guard case .answer(let fresh) = outcome, fresh.status == 200,
                  MPD.looksLikeMPD(firstBytes: Array(fresh.body.prefix(4096)), contentType: fresh.contentType) else { return (outcome, nil) }
            let mpd = try? MPD.parse(Array(fresh.body), url: fresh.finalURL)
            keepCopy(video, body: fresh.body, finalURL: fresh.finalURL, url: origin)
            return (outcome, mpd.flatMap { $0.isDynamic ? LivePlaylists.freshness(minimumUpdatePeriod: $0.minimumUpdatePeriod) : nil })
        }
        var bytes: [UInt8], finalURL: String, status: CacheStatus, offline = false
        switch shared.outcome {
        case .answer(let fresh):
            guard fresh.status == 200 else {
                let code = (100...599).contains(fresh.status) ? fresh.status : 502
                return (HTTPServer.Response(status: code, headers: Self.inert), 0, 0, nil, "the origin answered \(fresh.status) for the MPD")
            }
            guard MPD.looksLikeMPD(firstBytes: Array(fresh.body.prefix(4096)), contentType: fresh.contentType) else { return nil }
            (bytes, finalURL, status) = (Array(fresh.body), fresh.finalURL, shared.fetchedHere ? .miss : .hit)
        case .tooLarge:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil,
                    "the origin's MPD is larger than the \(Units.formatSize(Int64(MPD.maxBytes))) vcache reads as one: not answered")
        case .failed:
            guard let e = (try? store.catalog.entry(key: video.key)) ?? nil, let copy = store.cachedMPD(e) else { return nil }
            (bytes, finalURL, status) = (copy.bytes, copy.base, .hit)
            offline = true
        }
        let host = request.headers["host"].map { "http://" + $0 } ?? (serverNames?.base ?? "http://127.0.0.1")
        let rewritten: [UInt8]
        do {
            rewritten = try DASHRewriter(url: finalURL, proxy: host).rewrite(bytes, edit: offline ? offlineEdit(bytes, url: finalURL) : { _ in })
        } catch {
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, 0, nil, "the MPD cannot be read: \(error)")
        }
        let headers: [(String, String)] = [("Content-Type", "application/dash+xml"), ("Cache-Control", "no-cache"), ("X-Cache", status.rawValue)]
        let count = Int64(rewritten.count)
        return (HTTPServer.Response(status: 200, headers: headers + Self.inert, body: .bytes(rewritten)),
                status == .hit ? count : 0, status == .hit ? 0 : count, status, "MPD, rewritten")
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
        }
        guard playable.plays(mpd) else { return { _ in } }
        return { DASHRewriter.keepOnly(playable, of: mpd, in: $0) }
    }

    /// The MPD the origin answered, kept whole in the cache for offline answers (with the URL
    /// that answered it, which its BaseURLs resolve against): an older copy is replaced.
    private func keepCopy(_ video: ReadThrough.Video, body: Data, finalURL: String, url: String) {
        let store = readThrough.store
        try? store.catalog.recordFinalURL(key: video.key, url: finalURL)
        if let e = (try? store.catalog.entry(key: video.key)) ?? nil, let copy = store.cachedMPD(e), copy.bytes == Array(body) { return }
        readThrough.dropCachedBytes(key: video.key)
        readThrough.store(url, upTo: Int64(MPD.maxBytes))
    }
}
