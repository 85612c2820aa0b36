import Foundation

/// HLS through the proxy (Docs/hls.md): a playlist is answered rewritten, every URI in it (URI
/// lines, and `URI="..."` of keys, maps, renditions, I-frame streams) pointing at the proxy, so a
/// player fetches segments, init sections and keys through the cache and plays them offline.
extension Proxy {
    static var playlistLimit: Int { HLSPlaylist.maxBytes }

    /// The answer for a playlist, or nil when `video` is not one (then it is served as bytes).
    /// A playlist is fetched fresh from the origin each time (a live one must never be served
    /// stale), resolved against the URL that answered after redirects; when the origin cannot be
    /// reached, the cached copy is used (offline playback).
    func playlistAnswer(_ request: HTTPServer.Request, origin: String, video: ReadThrough.Video) -> (response: HTTPServer.Response, status: Int, fromCache: Int64, fromOrigin: Int64, cache: CacheStatus)? {
        guard video.length <= Int64(Self.playlistLimit) else { return nil }
        let cached = cachedHead(video, count: 16)
        guard HLSPlaylist.looksLikePlaylist(firstBytes: cached ?? [], contentType: video.contentType) else { return nil }
        var text: String?, finalURL = origin, status: CacheStatus = .miss
        if let fresh = SmallGet.get(origin, options: readThrough.options.request, limit: Self.playlistLimit), fresh.status == 200,
           HLSPlaylist.looksLikePlaylist(firstBytes: fresh.body.prefix(16), contentType: fresh.contentType) {
            text = String(decoding: fresh.body, as: UTF8.self)
            finalURL = fresh.finalURL
        } else if let whole = cachedHead(video, count: Int(video.length)) {
            text = String(decoding: whole, as: UTF8.self)
            status = .hit
        }
        guard let text else { return nil }
        let host = request.headers["host"].map { "http://" + $0 } ?? "http://127.0.0.1"
        let rewritten = Array(HLSRewriter(url: finalURL, proxy: { ProxyURL.make(origin: $0, base: host) }).rewrite(text).utf8)
        let headers: [(String, String)] = [("Content-Type", "application/vnd.apple.mpegurl"), ("Cache-Control", "no-cache"), ("X-Cache", status.rawValue)]
        let bytes = Int64(rewritten.count)
        return (HTTPServer.Response(status: 200, headers: headers + Self.inert, body: .bytes(rewritten)), 200,
                status == .hit ? bytes : 0, status == .hit ? 0 : bytes, status)
    }

    /// The entry's first `count` bytes when the cache holds them all, else nil.
    private func cachedHead(_ video: ReadThrough.Video, count: Int) -> [UInt8]? {
        let store = readThrough.store
        let n = min(Int64(count), video.length)
        guard n > 0, let e = (try? store.catalog.entry(key: video.key)) ?? nil, e.ranges.contains(ByteRange(0, n)),
              let data = try? store.openDataForReading(key: video.key) else { return nil }
        defer { data.close() }
        var b = [UInt8](repeating: 0, count: Int(n))
        guard (try? b.withUnsafeMutableBytes { try data.readExactly(into: $0, fromAbsoluteOffset: 0) }) != nil else { return nil }
        return b
    }
}
