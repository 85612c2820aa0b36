#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes a cached HLS stream out as a self-contained folder that plays from disk
/// (`ffmpeg -i DIR/master.m3u8`): the root playlist as `master.m3u8`, each media playlist that
/// plays from the cache in a folder of its own, its segments, init sections and keys beside it,
/// every URI rewritten to a relative local name (`HLSRewriter`).
///
/// Invariant 6 as for one video (Docs/cache-format.md): a complete resource is checked against
/// its SHA-256 (`Exporter`), every file is written to a temp file, fsynced and renamed into
/// place, and `master.m3u8` comes last, so a folder with a master holds all it names.
/// A master keeps only the variants that play from the cache (media playlist, segments, init
/// sections, keys, and a rendition of their audio group); a media playlist must be cached whole.
public struct StreamExporter {
    public let store: CacheStore
    public let keyRules: CacheKeyRules

    public init(store: CacheStore, keyRules: CacheKeyRules) {
        self.store = store
        self.keyRules = keyRules
    }

    /// Why a stream marked `StreamRole.manifestUnconfirmed` is not ready (`check`, `export`).
    public static let unconfirmed = "a run fetching its stream has not found its manifest unchanged on the origin yet (it is asking now, or it was stopped or killed before it asked)"

    public enum StreamExportError: Error, Equatable, CustomStringConvertible {
        case notAStream(String)
        case notPlayable(url: String, why: String)
        case destinationExists(String)
        case missingFolder(String)
        case notAFolder(String)
        /// A folder below the export folder is a symbolic link.
        case linkedFolder(String)
        /// A folder stands where the export writes a file.
        case folderInTheWay(String)
        /// Another export is writing into the folder now.
        case busy(String)

        public var description: String {
            switch self {
            case .notAStream(let url): return "\(url) is not the root of a cached stream"
            case .notPlayable(let url, let why): return "\(url) does not play from the cache: \(why); run 'vcache prefetch \(url)' to complete it"
            case .destinationExists(let p): return "'\(p)' already exists; use --force to overwrite it"
            case .missingFolder(let p): return "folder '\(p)' does not exist; create its parent first"
            case .notAFolder(let p): return "'\(p)' exists and is not a folder: a stream is exported into a folder (DIR/master.m3u8, DIR/manifest.mpd)"
            case .folderInTheWay(let p): return "'\(p)' is a folder where the export writes a file; move it away, or export into another folder"
            case .linkedFolder(let p): return "'\(p)' is a symbolic link: vcache writes no file through one inside an export folder; remove it, or export into another folder"
            case .busy(let p): return "another vcache export is writing into '\(p)' now; wait for it to end, or export into another folder"
            }
        }
    }

    public struct Exported: Equatable, Sendable {
        /// The folder's `master.m3u8`.
        public var master: String
        public var files: Int
        public var bytes: Int64
        /// Media playlists written, and those a master names but the cache cannot play.
        public var playlists: Int
        public var dropped: [String]
    }

    /// Exports the stream whose root manifest is the entry `key` into the folder `destination`
    /// (made when missing; its parent must exist).
    /// `note`: a line for each earlier export killed in the folder that this one finished or removed.
    public func export(root key: CacheKey, to destination: String, force: Bool,
                       note: (String) -> Void = { _ in }) throws -> Exported {
        try ExportStaging.recoverKilledExports(in: destination, note: note)
        guard let root = try store.catalog.entry(key: key) else { throw StreamExportError.notAStream(key.hex) }
        // Members a run fetched and has not yet judged against the origin's manifest may be of
        // another encode than the cached manifest names: not exported until that run's end check passes.
        if (try? store.catalog.rootRole(key)) == .manifestUnconfirmed {
            throw StreamExportError.notPlayable(url: root.latestURL, why: Self.unconfirmed)
        }
        if (try? store.catalog.stream(root: key))??.format == "dash" { return try exportDASH(root, to: destination, force: force) }
        guard let playlist = parse(root) else { throw StreamExportError.notAStream(root.latestURL) }
        let master = destination + "/master.m3u8"
        if let st = FileSystem.followingStatus(destination), (st.st_mode & S_IFMT) != S_IFDIR { throw StreamExportError.notAFolder(destination) }
        if FileSystem.status(master) != nil && !force { throw StreamExportError.destinationExists(master) }
        let store = self.store, rules = keyRules
        var plan = Plan { url, range in
            // What a member is, for its name: the first bytes it holds where the playlist uses it.
            guard let e = (try? store.catalog.entry(key: rules.key(for: url))) ?? nil else { return nil }
            return store.cachedBytes(of: e, at: range?.lowerBound ?? 0, count: 512)
        }
        var dropped: [String] = []
        switch playlist {
        case .media(let media):
            if let why = missing(media) { throw StreamExportError.notPlayable(url: root.latestURL, why: why) }
            plan.add(media, url: root.latestURL, folder: "")
        case .master(let m):
            var plays: [String: HLSMediaPlaylist] = [:]
            for url in m.variants.map(\.uri) + m.renditions.compactMap(\.uri) where plays[url] == nil {
                if let e = entry(url), case .media(let media)? = parse(e), missing(media) == nil { plays[url] = media }
            }
            func groupPlays(_ group: String?) -> Bool {
                guard let group else { return true }
                let uris = m.renditions.filter { $0.groupID == group }.compactMap(\.uri)
                return uris.isEmpty || uris.contains { plays[$0] != nil }
            }
            let variants = m.variants.filter { plays[$0.uri] != nil && groupPlays($0.audio) }
            guard !variants.isEmpty else {
                throw StreamExportError.notPlayable(url: root.latestURL, why: "none of its \(m.variants.count) variants is cached whole with its audio")
            }
            // Left out, and said: the variants that do not play, and the renditions not cached (a
            // URL kept for them would reach the network from the folder).
            dropped = m.variants.filter { v in !variants.contains { $0.uri == v.uri } }.map(\.uri)
                + m.renditions.compactMap(\.uri).filter { plays[$0] == nil }
            let needed = variants.map(\.uri) + m.renditions.compactMap(\.uri).filter { plays[$0] != nil }
            for url in needed where plan.folder[url] == nil {
                guard let media = plays[url] else { continue }
                plan.add(media, url: url, folder: plan.uniqueFolder(for: url))
            }
        }
        // Every file's name, in the order they take them (the master last), checked before a byte is copied.
        let playlistPaths = plan.playlists.map { $0.folder.isEmpty ? "master.m3u8" : $0.folder + "/index.m3u8" }
        var relatives = plan.resources.map(\.path) + playlistPaths
        if case .master = playlist { relatives.append("master.m3u8") }
        try ExportStaging.check(relatives, in: destination, force: force)
        let planned = try plannedVersions(of: plan.resources.map(\.url) + plan.playlists.map(\.url), root: root)
        var staging = try ExportStaging(destination: destination) { try makeFolder($0, in: $0) }
        var files = 0
        var bytes: Int64 = 0
        do {
            // Resources first, then the media playlists, then the master.
            for r in plan.resources {
                // A key stays readable by its owner only, as in the cache, from the moment it has its name.
                try checkPlanned(r.url, planned)
                bytes += try copy(r.url, to: try staging.path(r.path), ranges: r.ranges, force: false, mode: r.isKey ? 0o600 : nil)
                files += 1
            }
            for (p, path) in zip(plan.playlists, playlistPaths) {
                let names = plan.names
                let folder = p.folder
                let text = rewrite(key: keyRules.key(for: p.url)) { url in
                    guard let local = names[url] else { return url }
                    return Self.relative(local, from: folder)
                }
                try write(Array(text.utf8), to: try staging.path(path), force: false)
                bytes += Int64(text.utf8.count)
                files += 1
            }
            if case .master = playlist {
                let folders = plan.folder
                let keep = Set(plan.playlists.map(\.url))
                let text = rewrite(key: root.key, keep: { keep.contains($0) }) { url in
                    folders[url].map { $0 + "/index.m3u8" } ?? url
                }
                try write(Array(text.utf8), to: try staging.path("master.m3u8"), force: false)
                bytes += Int64(text.utf8.count)
                files += 1
            }
            // Every name made durable before the master's: a folder that has its master.m3u8
            // after a power cut plays whole, on any file system.
            try checkStillPlanned(planned)
            try staging.commit(relatives, force: force)
        } catch {
            staging.discard()
            throw staging.relabel(error)
        }
        try? store.catalog.touch(key: key)
        return Exported(master: master, files: files, bytes: bytes, playlists: plan.playlists.count, dropped: dropped)
    }

    /// What is written where: each resource once (by URL), with the byte ranges the playlists use
    /// (nil: the whole resource).
    struct Plan {
        var playlists: [(url: String, folder: String, media: HLSMediaPlaylist)] = []
        var folder: [String: String] = [:]
        var resources: [(url: String, path: String, ranges: RangeSet?, isKey: Bool)] = []
        var resourceIndex: [String: Int] = [:]
        /// Absolute URL to its path in the folder.
        var names: [String: String] = [:]
        var usedPaths = Set<String>()
        /// A member's first bytes where `range` starts (nil: not cached), to name it by what it is.
        let firstBytes: (String, ByteRange?) -> [UInt8]?

        mutating func uniqueFolder(for url: String) -> String {
            let parts = (URL(string: url)?.path ?? "").split(separator: "/")
            var base = parts.count >= 2 ? Exporter.fileName(for: "http://x/" + parts[parts.count - 2], key: "p", contentType: nil) : "p"
            base = PathText.deletingPathExtension(base)
            if base.isEmpty || base == "master" { base = "p" }
            var name = base
            var n = 2
            while usedPaths.contains(name) { name = "\(base)-\(n)"; n += 1 }
            usedPaths.insert(name)
            return name
        }

        /// `url`: the playlist's URL as the master names it.
        mutating func add(_ media: HLSMediaPlaylist, url: String, folder: String) {
            playlists.append((url, folder, media))
            self.folder[url] = folder
            func resource(_ url: String, _ range: ByteRange?, _ context: HLSURIContext) {
                if let i = resourceIndex[url] {
                    if let range, resources[i].ranges != nil { resources[i].ranges?.insert(range) } else { resources[i].ranges = nil }
                    return
                }
                let prefix = folder.isEmpty ? "" : folder + "/"
                // (The key stands in for a name only when the URL gives none.)
                var name = Exporter.memberFileName(for: url, key: SHA256Digest.hash(url), context: context) { firstBytes(url, range) }
                if name == "master.m3u8" || name == "index.m3u8" { name = "_" + name }
                var path = prefix + name
                var n = 2
                while usedPaths.contains(path) {
                    path = prefix + PathText.deletingPathExtension(name) + "-\(n)." + PathText.pathExtension(name)
                    n += 1
                }
                usedPaths.insert(path)
                names[url] = path
                resourceIndex[url] = resources.count
                resources.append((url, path, range.map { RangeSet([$0]) }, context == .key))
            }
            for s in media.segments {
                let encrypted = s.keys.contains { $0.method == .aes128 }
                if let m = s.fetchedMap { resource(m.uri, m.byteRange, .initSection(encrypted: encrypted)) }
                for k in s.keys where k.isFetchable { if let u = k.uri { resource(u, nil, .key) } }
                resource(s.uri, s.byteRange, .segment(fragmented: s.map != nil, encrypted: encrypted))
            }
        }
    }

    /// `path` (relative to the export folder) as seen from a playlist in `folder`.
    static func relative(_ path: String, from folder: String) -> String {
        guard !folder.isEmpty else { return path }
        return path.hasPrefix(folder + "/") ? String(path.dropFirst(folder.count + 1)) : "../" + path
    }

    /// The version of each member the export was planned from, and of the root manifest
    /// (`root`, as read for the plan), read in one snapshot: a stream whose manifest a prefetch
    /// replaced meanwhile, or a member missing now, fails the export (exit 3, "replaced while it
    /// was being exported"), never a folder mixing two versions (Docs/dash.md, "export").
    func plannedVersions(of urls: [String], root: CacheEntry) throws -> [CacheKey: CacheEntry] {
        var keys = [root.key]
        var urlOf: [CacheKey: String] = [:]
        for url in urls {
            let k = keyRules.key(for: url)
            if urlOf.updateValue(url, forKey: k) == nil { keys.append(k) }
        }
        let now = try store.catalog.entries(keys: keys)
        guard let r = now[root.key], Self.sameVersion(planned: root, now: r) else { throw Exporter.ExportError.changedWhileExporting(url: root.latestURL) }
        for k in keys where now[k] == nil { throw Exporter.ExportError.changedWhileExporting(url: urlOf[k] ?? k.hex) }
        return now
    }

    /// Before the export's files take their names: every entry it copied is still the version
    /// planned (`plannedVersions`), so what was copied is that version's bytes and no other.
    func checkStillPlanned(_ planned: [CacheKey: CacheEntry]) throws {
        let now = try store.catalog.entries(keys: Array(planned.keys))
        for (k, p) in planned.sorted(by: { $0.key < $1.key }) {
            guard let n = now[k], Self.sameVersion(planned: p, now: n) else { throw Exporter.ExportError.changedWhileExporting(url: p.latestURL) }
        }
    }

    /// Before a member is copied: its entry is still the version planned (one dropped or
    /// replaced since fails the export as replaced, not as "not cached").
    func checkPlanned(_ url: String, _ planned: [CacheKey: CacheEntry]) throws {
        guard let p = planned[keyRules.key(for: url)] else { return }
        guard let n = entry(url), Self.sameVersion(planned: p, now: n) else { throw Exporter.ExportError.changedWhileExporting(url: p.latestURL) }
    }

    /// Whether `now` holds the bytes `planned` did: a complete entry the same SHA-256; a partial
    /// one the same validators and length, and at least the ranges it had.
    static func sameVersion(planned: CacheEntry, now: CacheEntry) -> Bool {
        if planned.isComplete { return now.isComplete && now.sha256 == planned.sha256 }
        return now.etag == planned.etag && now.lastModified == planned.lastModified && now.length == planned.length && now.ranges.contains(planned.ranges)
    }

    func entry(_ url: String) -> CacheEntry? { (try? store.catalog.entry(key: keyRules.key(for: url))) ?? nil }

    private func parse(_ e: CacheEntry) -> HLSPlaylist? {
        store.cachedPlaylist(e, keyRules: keyRules)?.playlist
    }

    /// Why the media playlist does not play from the cache, or nil when it does.
    private func missing(_ media: HLSMediaPlaylist) -> String? {
        func held(_ url: String, _ range: ByteRange?) -> Bool {
            guard let e = entry(url) else { return false }
            return range.map { e.ranges.contains($0) } ?? e.isComplete
        }
        if media.isLive { return "\(media.url) is a live playlist (no EXT-X-ENDLIST)" }
        var missing = 0
        for s in media.segments {
            var ok = held(s.uri, s.byteRange)
            if let m = s.fetchedMap, !held(m.uri, m.byteRange) { ok = false }
            for k in s.keys {
                if !k.isFetchable && k.method != .none { return "\(media.url) is encrypted with a key vcache cannot fetch" }
                if let u = k.uri, k.isFetchable, !held(u, nil) { ok = false }
            }
            if !ok { missing += 1 }
        }
        return missing == 0 ? nil : "\(missing) of the \(media.segments.count) segments of \(media.url) are not cached"
    }

    /// The cached playlist's text with every URI through `local`.
    private func rewrite(key: CacheKey, keep: @escaping @Sendable (String) -> Bool = { _ in true },
                         _ local: @escaping @Sendable (String) -> String) -> String {
        guard let copy = store.cachedPlaylist(key: key, keyRules: keyRules, complete: false) else { return "" }
        // Resolved as the plan was (after redirects), so every URI finds its local name.
        return HLSRewriter(url: copy.base, proxy: local, keep: keep).rewrite(String(decoding: copy.bytes, as: UTF8.self))
    }

    /// Makes `path`, the export folder `destination` or a folder below it, unless it is one.
    /// The destination is the user's and may be reached through a symlink; a folder below it is
    /// vcache's (`r1`, a variant's), so one that is a symlink is refused: another user who may
    /// write the export folder could point it anywhere the exporting user may write.
    func makeFolder(_ path: String, in destination: String) throws {
        guard !path.isEmpty else { return }
        let below = path != destination
        if let st = below ? FileSystem.status(path) : FileSystem.followingStatus(path) {
            if below && (st.st_mode & S_IFMT) == S_IFLNK { throw StreamExportError.linkedFolder(path) }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw StreamExportError.notAFolder(path) }
            return
        }
        let parent = PathText.deletingLastPathComponent(path)
        guard parent.isEmpty || FileSystem.followingStatus(parent).map({ ($0.st_mode & S_IFMT) == S_IFDIR }) == true else {
            throw StreamExportError.missingFolder(parent)
        }
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw SystemError("mkdir", path: path, errno: errno) }
        if below, let st = FileSystem.status(path), (st.st_mode & S_IFMT) != S_IFDIR { throw StreamExportError.linkedFolder(path) }
    }

    /// Copies the resource at `url`: whole (checked against its SHA-256 by `Exporter`), or only
    /// `ranges` at their offsets (a byte-range file cached in part). Returns the bytes written.
    func copy(_ url: String, to path: String, ranges: RangeSet?, force: Bool, mode: mode_t?) throws -> Int64 {
        guard let e = entry(url) else { throw StreamExportError.notPlayable(url: url, why: "it is not cached") }
        if e.isComplete {
            return try Exporter(store: store).export(key: e.key, to: path, force: force, link: false, mode: mode).bytes
        }
        guard let ranges, let length = e.length, e.ranges.contains(ranges) else {
            throw StreamExportError.notPlayable(url: url, why: "it is not cached whole")
        }
        if FileSystem.status(path) != nil && !force { throw StreamExportError.destinationExists(path) }
        let data = try store.openDataForReading(key: e.key)
        defer { data.close() }
        let temp = Self.temporary(for: path)
        defer { Exporter.temporaries.withLock { _ = $0.remove(temp) } }
        let out = try Exporter.unlessStopped { try RawFile.open(temp, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode ?? 0o644) }
        do {
            defer { out.close() }
            try out.resize(to: length)
            for r in ranges.ranges {
                var at = r.lowerBound
                while at < r.upperBound {
                    let n = Int(min(Int64(1 << 20), r.upperBound - at))
                    let chunk = try data.bytes(n, at: at)
                    try chunk.withUnsafeBytes { try out.write($0, toAbsoluteOffset: at) }
                    at += Int64(n)
                }
            }
            try out.sync()
        } catch {
            unlink(temp)
            throw error
        }
        guard rename(temp, path) == 0 else {
            let e = errno
            unlink(temp)
            throw SystemError("rename", path: path, errno: e)
        }
        return ranges.count
    }

    /// fsync of each folder, deepest first.
    func syncFolders(_ folders: Set<String>) throws {
        for folder in folders.sorted(by: { $0.count > $1.count }) { try FileSystem.syncFolderWhereSupported(folder) }
    }

    /// Writes `bytes` to `path` through a temp file, fsynced, renamed into place.
    func write(_ bytes: [UInt8], to path: String, force: Bool) throws {
        if FileSystem.status(path) != nil && !force { throw StreamExportError.destinationExists(path) }
        let temp = Self.temporary(for: path)
        defer { Exporter.temporaries.withLock { _ = $0.remove(temp) } }
        let out = try Exporter.unlessStopped { try RawFile.open(temp, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644) }
        do {
            defer { out.close() }
            try bytes.withUnsafeBytes { try out.write($0, toAbsoluteOffset: 0) }
            try out.sync()
            testPause("stream-export-writing", path)
        } catch {
            unlink(temp)
            throw error
        }
        guard rename(temp, path) == 0 else {
            let e = errno
            unlink(temp)
            throw SystemError("rename", path: path, errno: e)
        }
    }

    /// A hidden temp file beside `path`, as `Exporter` names them, registered so that a signal
    /// removes it before the process dies (no partial file stays behind).
    private static func temporary(for path: String) -> String {
        let folder = PathText.deletingLastPathComponent(path)
        let temp = (folder.isEmpty ? "." : folder) + "/." + PathText.lastPathComponent(path).prefix(100)
            + ".vcache-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        Exporter.temporaries.withLock { _ = $0.insert(temp) }
        return temp
    }
}
