#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stream's manifest the origin answers as another version than the copy cached whole (a
/// re-encode in place): serve keeps the invariant prefetch keeps (Docs/dash.md, "Invariant"): a
/// stream is never served or completed from members of two manifest versions.
extension Proxy {
    /// Takes the new version of the stream `root`'s manifest: under the stream's lock (never
    /// waiting: a prefetch holding it is completing the stream), every entry among `old` (what
    /// the cached version named) that holds bytes is dropped and released from the stream BEFORE
    /// `keep` stores the new manifest over the old, as `Prefetcher.revalidated` does, so a kill at
    /// any point leaves the old manifest with some of its members or the new one with none of
    /// them. When the lock is busy, an entry cannot be dropped (another process writes it), or the
    /// new manifest cannot be kept (the old one is then dropped too, so nothing names the new
    /// members as old), `new` (what the player reads from the new manifest) is passed through
    /// from the origin, never read from nor stored in the cache (`passThrough`), until a later
    /// answer finds the cached copy the version the origin serves. Returns whether it was kept.
    /// `manifest`: the manifest answered (the root, or a media playlist of the master `root`).
    @discardableResult
    func takeNewVersion(root: CacheKey, manifest: CacheKey? = nil, old: [CacheKey], new: [StreamRecord.Member], keep: () -> Bool) -> Bool {
        let store = readThrough.store, manifest = manifest ?? root
        guard let lock = (try? store.tryLockStream(root: root)) ?? nil else {
            passThroughLater(manifest: manifest, new)
            return false
        }
        defer { store.releaseStreamLock(lock, root: root) }
        let members = old.filter { $0 != root && $0 != manifest }
        let held = ((try? store.catalog.entries(keys: members)) ?? [:]).filter { !$0.value.ranges.isEmpty }
        for k in held.keys.sorted(by: { $0.hex < $1.hex }) where !readThrough.dropCachedBytes(key: k) {
            passThroughLater(manifest: manifest, new)
            return false
        }
        try? store.catalog.releaseMembers(members, root: root)
        guard keep() else {
            // The old manifest must not stay over members the player fetches from the new one.
            if !readThrough.dropCachedBytes(key: manifest) { passThroughLater(manifest: manifest, new) }
            return false
        }
        versionKept(manifest)
        return true
    }

    /// The cached copy of `manifest` is the version the origin serves: what its answers named
    /// is no longer passed through.
    func versionKept(_ manifest: CacheKey) {
        unstored.withLock { if $0[manifest] != nil { $0[manifest] = nil } }
    }

    /// What `manifest`'s answer named, passed through from now on (`unstoredMember`).
    func passThroughLater(manifest: CacheKey, _ members: [StreamRecord.Member]) {
        unstored.withLock { u in
            var roles = u[manifest] ?? [:]
            for m in members where m.key != manifest { roles[m.key] = m.role }
            u[manifest] = roles
        }
    }

    /// The role of `key` in a manifest a player read in a version not cached (`takeNewVersion`),
    /// and that manifest; nil when it is none.
    func unstoredMember(_ key: CacheKey) -> (manifest: CacheKey, role: StreamRole)? {
        unstored.withLock { u in
            for (manifest, roles) in u { if let role = roles[key] { return (manifest, role) } }
            return nil
        }
    }

    /// The answer for a member of a stream whose new manifest could not be stored: the origin's
    /// answer as it is, never read from nor stored in the cache (a segment of the new encode
    /// must not be kept under the old manifest, nor an old one served under the new), whole or
    /// the span asked (held in memory: up to `passThroughLimit`).
    func passThrough(_ request: HTTPServer.Request, origin: String) -> (response: HTTPServer.Response, fromOrigin: Int64, note: String) {
        let why = "a member of a stream whose manifest changed on the origin while another vcache process holds the stream: passed through, not stored"
        let a: SmallGet.Answer
        switch SmallGet.fetch(origin, options: readThrough.options.request, limit: Self.passThroughLimit) {
        case .answer(let x): a = x
        case .tooLarge:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0,
                    "\(why); larger than the \(Units.formatSize(Int64(Self.passThroughLimit))) passed through whole")
        case .failed:
            return (HTTPServer.Response(status: 502, headers: Self.inert), 0, "\(why); the origin could not be reached")
        }
        guard a.status == 200 else {
            return (HTTPServer.Response(status: Self.relayedStatus(a.status), headers: Self.inert), 0, "\(why); the origin answered \(a.status)")
        }
        let body = Array(a.body), length = Int64(body.count)
        let name = PercentCoding.decode(PathText.lastPathComponent(request.path)) ?? ""
        var headers: [(String, String)] = [("Accept-Ranges", "bytes"), ("X-Cache", CacheStatus.miss.rawValue),
                                           ("Content-Type", ProxyURL.safeContentType(ProxyURL.contentType(origin: a.contentType, name: name)))]
        var status = 200, span = ByteRange(0, length)
        switch RangeHeader(request.headers["range"], length: length) {
        case .whole: break
        case .span(let r):
            (status, span) = (206, r)
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(length)"))
        case .unsatisfiable:
            return (HTTPServer.Response(status: 416, headers: headers + [("Content-Range", "bytes */\(length)")] + Self.inert), 0, why)
        }
        let out = Array(body[Int(span.lowerBound)..<Int(span.upperBound)])
        return (HTTPServer.Response(status: status, headers: headers + Self.inert, body: .bytes(out)), Int64(out.count), why)
    }

    /// The most of a passed-through member held in memory.
    static let passThroughLimit = 256 << 20
}
