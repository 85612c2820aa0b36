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

// lseek whence values for sparse files (glibc hides them behind _GNU_SOURCE).
#if os(Linux)
private let seekData: Int32 = 3, seekHole: Int32 = 4
#else
private let seekData: Int32 = SEEK_DATA, seekHole: Int32 = SEEK_HOLE
#endif

/// Checks that the cache is true: each entry's catalog rows are sane, `data` holds every claimed
/// byte, a complete entry still has the SHA-256 stored at completion and (for MP4) a sound
/// structure (a stream's playlists parse; its segments, init sections and keys are checked by
/// their SHA-256 alone; a stream's root named stands for all its members); optionally that the origin still serves the same version. With `fix`, whatever is
/// wrong is dropped so the catalog claims only what is really there. An entry being written by
/// another process is skipped; while checked, an entry's writer lock is held (so nobody writes it)
/// and its `data` is read under LOCK_SH (so nobody evicts it).
public struct Verifier {
    public let store: CacheStore

    public init(store: CacheStore) { self.store = store }

    public struct EntryReport: Sendable {
        public enum State: String, Sendable { case ok, problem, fixed, skipped }
        public var key: CacheKey
        public var url: String
        public var state: State
        public var problems: [String]
        public var actions: [String]
        /// Why `--fix` could not put the entry right (the disk, the catalog): the entry stays a
        /// problem, and the command says this in one line with its exit code.
        public var fixFailure: (any Error)?
    }

    public struct Options: Sendable {
        public var fix = false
        public var checkOrigin = false
        public var request = RequestOptions()
        /// How the manifests' URLs map to keys (the cache's key rules): what a dropped media
        /// playlist named is found by them (`Evictor.fallout`).
        public var keyRules = CacheKeyRules()
        public init() {}
    }

    /// Verifies `keys` (all entries when nil).
    public func verify(keys: [CacheKey]?, options: Options) throws -> [EntryReport] {
        let all = try store.catalog.allEntries()
        var entries = all
        if let keys {
            // A stream's root stands for every member of the stream.
            var wanted = Set(keys)
            for s in try store.catalog.streams() where wanted.contains(s.root) { wanted.formUnion(s.keys) }
            entries = entries.filter { wanted.contains($0.key) }
        }
        // A live manifest whose replacement a kill cut (Docs/reliability.md): not complete, its
        // new copy whole in its staging entry. --fix restores that copy; without, it is a problem.
        let complete = Set(all.filter(\.isComplete).map(\.key))
        var cut: [CacheKey: String] = [:]
        for e in entries where !e.isComplete && complete.contains(CacheStore.stagingKey(of: e.key)) {
            if !options.fix || !store.restoreStagedManifest(key: e.key, staging: CacheStore.stagingKey(of: e.key), url: e.latestURL) {
                cut[e.key] = "its bytes were lost by a run killed while replacing them with a new copy; 'vcache verify --fix' restores that copy"
            } else {
                cut[e.key] = ""
            }
        }
        if !cut.isEmpty {
            let now = Dictionary(try store.catalog.allEntries().map { ($0.key, $0) }) { a, _ in a }
            entries = entries.compactMap { now[$0.key] }
        }
        var originAnswers: [CacheKey: OriginProbe.Answer] = [:]
        if options.checkOrigin {
            let answers = OriginProbe.probe(entries.map(\.latestURL), known: entries.map(\.validators), options: options.request)
            for (e, a) in zip(entries, answers) { originAnswers[e.key] = a }
        }
        let reports = entries.map { e in
            var r = verifyEntry(e, origin: originAnswers[e.key], fix: options.fix)
            if let why = cut[e.key] {
                if why.isEmpty {
                    r.problems.insert("its bytes were lost by a run killed while replacing them with a new copy", at: 0)
                    r.actions.append("restored the new copy that run fetched")
                    if r.state == .ok { r.state = .fixed }
                } else {
                    r.problems.insert(why, at: 0)
                    if r.state == .ok { r.state = .problem }
                }
            }
            return r
        }
        return options.fix ? try droppingWhatDroppedPlaylistsNamed(reports, keyRules: options.keyRules) : reports
    }

    /// A master's media playlist whose bytes `--fix` dropped takes the segments, init sections and
    /// keys only it named (nothing cached says which version they are: `Evictor.fallout`), each a
    /// report of its own, and its master's stream is partial until the master is asked for again.
    private func droppingWhatDroppedPlaylistsNamed(_ reports: [EntryReport], keyRules: CacheKeyRules) throws -> [EntryReport] {
        let fixed = reports.filter { $0.state == .fixed }.map(\.key)
        guard !fixed.isEmpty else { return reports }
        let dropped = Set(try store.catalog.entries(keys: fixed).filter { !$0.value.isComplete }.keys)
        let fallout = try Evictor(store: store).fallout(ofRemoving: dropped, keyRules: keyRules)
        guard !fallout.playlists.isEmpty else { return reports }
        try fallout.markRoots(in: store.catalog, gone: fallout.playlists)
        guard !fallout.members.isEmpty else { return reports }
        var c = Evictor.Criteria()
        c.keys = fallout.members
        c.alone = true
        let out = try Evictor(store: store).evict(c, dryRun: false)
        var all = reports
        let rootURL = fallout.roots.first.flatMap { (try? store.catalog.entry(key: $0)) ?? nil }?.latestURL
        let urlOf = Dictionary(reports.map { ($0.key, $0.url) }) { a, _ in a }
        func report(_ e: CacheEntry, _ state: EntryReport.State, _ action: String) {
            let playlist = fallout.namedBy[e.key].flatMap { urlOf[$0] } ?? "?"
            var r = EntryReport(key: e.key, url: e.latestURL, state: state,
                                problems: ["the media playlist naming it was dropped (\(playlist)), and no cached playlist names it: nothing says which version it is"],
                                actions: [action])
            if let i = all.firstIndex(where: { $0.key == e.key }) {
                r.problems = all[i].problems + r.problems
                all[i] = r
            } else {
                all.append(r)
            }
        }
        for e in out.evicted { report(e, .fixed, "dropped it; 'vcache prefetch \(rootURL ?? e.latestURL)' fetches it again") }
        for (e, why) in out.skipped { report(e, .problem, "not dropped: \(why); 'vcache verify --fix' drops it once it is free") }
        return all
    }

    /// Checks one entry under its writer lock. The entry is read again once locked: the listing
    /// it came from may be stale (a prefetch may have completed it, or fetched a new version,
    /// meanwhile). Verifying is not use: last use is left alone, so the LRU order stays true.
    private func verifyEntry(_ listed: CacheEntry, origin: OriginProbe.Answer?, fix: Bool) -> EntryReport {
        var report = EntryReport(key: listed.key, url: listed.latestURL, state: .ok, problems: [], actions: [])
        testPause("verify-before-lock", listed.key)
        // No folder: no writer and no `data`. Without --fix it is checked as it is, rather than
        // making the folder to lock it (checking does not change the cache).
        let lock: EntryLock?
        if !fix && FileSystem.status(store.entryDirectory(listed.key)) == nil {
            lock = nil
        } else {
            let held: EntryLock?
            do {
                held = try store.tryLockWriter(key: listed.key)
            } catch {
                // Not busy: this user cannot open it (another user made it, say). Say so.
                report.state = .problem
                report.problems.append("cannot lock it: \(error)")
                return report
            }
            guard let held else {
                report.state = .skipped
                report.problems.append("another vcache process is writing it")
                return report
            }
            lock = held
        }
        defer { lock?.release() }
        do {
            guard let e = try store.catalog.entry(key: listed.key) else {
                // Evicted meanwhile; a folder tryLockWriter made is an empty orphan.
                if lock != nil { store.removeFiles(key: listed.key) }
                report.state = .skipped
                report.problems.append("evicted while verifying")
                return report
            }
            report.url = e.latestURL
            let keep = try check(e, into: &report)
            // The origin was asked about the version listed; if another is cached now, that answer says nothing.
            if let origin, e.validators == listed.validators { checkOrigin(e, origin, into: &report) }
            if !report.problems.isEmpty && fix {
                do { try repair(e, keep: keep, report: &report) } catch { report.fixFailure = error }
            }
        } catch {
            report.problems.append("\(error)")
        }
        if report.state == .ok && !report.problems.isEmpty { report.state = .problem }
        return report
    }

    /// Checks one entry; returns the ranges that are really backed by `data` (what a fix keeps).
    private func check(_ e: CacheEntry, into report: inout EntryReport) throws -> RangeSet {
        let rows = try store.catalog.storedRanges(key: e.key)
        var valid = RangeSet()
        var previousEnd: Int64 = -1
        var rowsSane = true
        for (start, end) in rows {
            if start < 0 || start >= end {
                report.problems.append("a range row [\(start), \(end)) is empty or negative")
                rowsSane = false
                continue
            }
            if let length = e.length, end > length {
                report.problems.append("a range [\(start), \(end)) lies beyond the video's length \(length)")
                rowsSane = false
                continue
            }
            // No length (NULL) with ranges is a state prefetch keeps on purpose: a body only the
            // connection's close ended, whose bytes cannot prove it whole (Docs/cache-format.md,
            // "Complete: when a body's end is known"); its ranges are checked like any others. A
            // length that is there but no length (negative), or a complete entry without one, is
            // damage.
            if e.length == nil, try e.isComplete || store.catalog.storedLength(key: e.key) != nil {
                report.problems.append("ranges are recorded but the length is unknown")
                rowsSane = false
                continue
            }
            if start < previousEnd {
                report.problems.append("ranges overlap at byte \(start)")
                rowsSane = false
            }
            previousEnd = max(previousEnd, end)
            valid.insert(ByteRange(start, end))
        }
        if !rowsSane { valid = RangeSet() }  // rows that contradict each other are not trusted
        if rowsSane && valid.count != e.cachedBytes {
            report.problems.append("cached_bytes says \(e.cachedBytes) but the ranges hold \(valid.count)")
        }
        guard !rows.isEmpty else { return valid }

        let path = store.dataPath(e.key)
        var st = stat()
        guard lstat(path, &st) == 0 else {
            // Not there is a problem --fix mends; not readable by this user (another user made
            // the entry) says nothing of the bytes and is never "fixed" away.
            guard errno == ENOENT else { throw SystemError("check", path: path, errno: errno) }
            report.problems.append("its data file is missing")
            return RangeSet()
        }
        let data = try store.openDataForReading(key: e.key)
        defer { data.close() }
        // A complete entry whose bytes still hash to its SHA-256 is whole, holes or not: ZFS and
        // btrfs store blocks of zeros as holes. Holes matter only in a partial entry, or when the
        // digest fails.
        // The digests it is expected to have (`--checksum`, a list line, the origin's) come from
        // the same read.
        let checks = e.isComplete ? try store.catalog.expectedDigests(key: e.key) : []
        if e.isComplete, let length = e.length, let size = try? data.status().st_size, Int64(size) >= length,
           rowsSane, valid.contains(ByteRange(0, length)) {
            let (sha, others) = try Self.digests(of: data, length: length, others: Set(checks.map(\.expected.algorithm)))
            if sha == e.sha256 {
                if let why = Self.unexpected(checks, sha: sha, others: others) {
                    // Its bytes are as downloaded, but not the file expected: none is kept.
                    report.problems.append(why)
                    return RangeSet()
                }
                checkStructure(e, data, length: length, into: &report)
                return valid
            }
        }
        let size = Int64(try data.status().st_size)
        var backed = RangeSet()
        for r in valid.ranges {
            let present = ByteRange(r.lowerBound, min(r.upperBound, max(r.lowerBound, size)))
            if present.upperBound < r.upperBound {
                report.problems.append("data is \(size) bytes but the catalog claims bytes up to \(r.upperBound)")
            }
            // A hole inside a claimed range is a byte that was never written.
            var at = present.lowerBound
            while at < present.upperBound {
                let hole = lseek(data.fd, off_t(at), seekHole)
                if hole < 0 || Int64(hole) >= present.upperBound {
                    backed.insert(ByteRange(at, present.upperBound))
                    break
                }
                if Int64(hole) > at { backed.insert(ByteRange(at, Int64(hole))) }
                let nextData = lseek(data.fd, hole, seekData)
                report.problems.append("bytes from \(hole) of a claimed range were never written (a hole in data)")
                if nextData < 0 { break }
                at = Int64(nextData)
            }
        }
        if e.isComplete, let length = e.length {
            if !backed.contains(ByteRange(0, length)) {
                // What is still there is kept only where the digest's states prove it: the same
                // damage that cut the file may have changed the bytes before the cut.
                report.problems.append("marked complete but not every byte is there")
                guard let states = try store.catalog.chunkStates(key: e.key), let checked = try states.check(data, length: length, within: backed) else {
                    return RangeSet()
                }
                if !checked.bad.isEmpty {
                    report.problems.append("and \(Units.formatSize(checked.bad.count)) of what is there no longer hashes as at completion")
                }
                return checked.good
            }
            let digest = SHA256Digest()
            try digest.update(from: data, ByteRange(0, length))
            if digest.finalize() != e.sha256 {
                // The digest's states at each 1 MiB, kept at completion, tell which chunks
                // changed: only those are dropped (a flipped bit costs a chunk, not the video).
                if let states = try store.catalog.chunkStates(key: e.key), let damaged = try states.damaged(in: data, length: length),
                   !damaged.isEmpty, damaged.count < length {
                    let spans = damaged.ranges.prefix(3).map { "\(Units.formatSize($0.count)) at byte \($0.lowerBound)" }
                    let more = damaged.ranges.count > 3 ? " and \(damaged.ranges.count - 3) more" : ""
                    report.problems.append("its bytes no longer match the SHA-256 stored at completion: damaged \(spans.joined(separator: ", "))\(more)")
                    var keep = backed
                    for r in damaged.ranges { keep.remove(r) }
                    return keep
                }
                report.problems.append("its bytes no longer match the SHA-256 stored at completion")
                return RangeSet()
            }
            checkStructure(e, data, length: length, into: &report)
        }
        return backed
    }

    /// The SHA-256 of `[0, length)` of `data` and the digests of `others`, in one read.
    static func digests(of data: RawFile, length: Int64, others: Set<DigestAlgorithm>) throws -> (String, [DigestAlgorithm: String]) {
        let sha = SHA256Digest(), set = DigestSet(others.subtracting([.sha256]))
        try data.readChunks(ByteRange(0, length)) { piece, _ in
            sha.update(piece)
            set.update(piece)
        }
        return (sha.finalize(), set.finalize())
    }

    /// Why a complete entry's bytes are not the file expected (nil: they have every digest
    /// expected of them).
    static func unexpected(_ checks: [DigestCheck], sha: String, others: [DigestAlgorithm: String]) -> String? {
        var computed = others
        computed[.sha256] = sha
        guard let bad = DigestCheck.judged(checks, computed: computed).mismatch else { return nil }
        let e = bad.expected
        return "its \(e.algorithm.rawValue) is \(bad.computed ?? "?"), not \(e.hex) (expected by \(e.source.description))"
    }

    private func checkStructure(_ e: CacheEntry, _ data: RawFile, length: Int64, into report: inout EntryReport) {
        // A stream's member is checked as what it is to the stream (Docs/hls.md).
        var role = (try? store.catalog.streamRole(of: e.key)) ?? nil
        if role?.isRoot == true { role = .manifest }
        switch role {
        case .manifest? where ((try? store.catalog.stream(root: e.key)) ?? nil)?.format == "dash":
            guard length <= Int64(MPD.maxBytes) else {
                report.problems.append("DASH MPD: larger than \(Units.formatSize(Int64(MPD.maxBytes)))")
                return
            }
            do {
                _ = try MPD.parse(try data.bytes(Int(length), at: 0), url: e.latestURL)
            } catch {
                report.problems.append("DASH MPD: \(error)")
            }
            return
        case .manifest?, .manifestToAsk?, .manifestUnconfirmed?, .playlist?:
            guard length <= Int64(HLSPlaylist.maxBytes) else {
                report.problems.append("HLS playlist: larger than \(Units.formatSize(Int64(HLSPlaylist.maxBytes)))")
                return
            }
            do {
                _ = try HLSPlaylist.parse(try data.bytes(Int(length), at: 0), url: e.latestURL)
            } catch {
                report.problems.append("HLS playlist: \(error)")
            }
            return
        case .segment?, .initSection?, .key?:
            // A fragment or a key is no whole MP4: its SHA-256 is its check.
            return
        case nil:
            break
        }
        guard looksLikeMP4(e, data) else { return }
        do {
            let walker = MP4Walker(file: data, length: length)
            // A DASH/HLS media segment cached on its own (a live window's past segment, one fetched
            // by its URL): `moof` and no `moov` is a fragment, whole when its boxes tile it.
            let top = try walker.topLevel()
            if top.contains(where: { $0.type == "moof" }), !top.contains(where: { $0.type == "moov" }) { return }
            _ = try walker.check()
        } catch {
            report.problems.append("MP4 structure: \(error)")
        }
    }

    /// An ISO BMFF file starts with a known top-level box (`ftyp` for MP4; old QuickTime files
    /// may start with `wide`, `moov` or `mdat`). A content type alone is not proof.
    private func looksLikeMP4(_ e: CacheEntry, _ data: RawFile) -> Bool {
        var head = [UInt8](repeating: 0, count: 8)
        let n = (try? head.withUnsafeMutableBytes { try data.read(into: $0, fromAbsoluteOffset: 0) }) ?? 0
        guard n == 8 else { return false }
        let type = String(decoding: head[4..<8], as: UTF8.self)
        if type == "ftyp" { return true }
        let typed = e.contentType.map { $0.lowercased().contains("mp4") || $0.lowercased().contains("quicktime") } ?? false
        return typed && ["moov", "mdat", "wide", "free", "skip", "moof", "styp"].contains(type)
    }

    private func checkOrigin(_ e: CacheEntry, _ answer: OriginProbe.Answer, into report: inout EntryReport) {
        switch answer {
        case .unchanged:
            break
        case .failed(let why):
            report.problems.append("origin check failed: \(why)")
        case .validators(let now):
            if e.validators.differs(from: now) {
                var what: [String] = []
                if let a = e.etag, let b = now.etag, a != b { what.append("ETag \(a) -> \(b)") }
                if let a = e.lastModified, let b = now.lastModified, a != b { what.append("Last-Modified \(a) -> \(b)") }
                if let a = e.length, let b = now.length, a != b { what.append("length \(a) -> \(b)") }
                report.problems.append("changed on the origin (\(what.joined(separator: ", ")))")
            }
        }
    }

    private func repair(_ e: CacheEntry, keep: RangeSet, report: inout EntryReport) throws {
        let changed = report.problems.contains { $0.hasPrefix("changed on the origin") }
        // A checksum failure without chunk states drops the video; with them (`keep` lacks
        // only the damaged chunks), only those chunks go.
        let checksum = report.problems.contains { $0.contains("SHA-256") } && (keep.isEmpty || e.length.map { keep.contains(ByteRange(0, $0)) } ?? true)
        let onlyOrigin = report.problems.allSatisfy { $0.hasPrefix("origin check failed") }
        guard !onlyOrigin else { return }
        let structural = report.problems.allSatisfy { $0.hasPrefix("MP4 structure") || $0.hasPrefix("HLS playlist") || $0.hasPrefix("DASH MPD") || $0.hasPrefix("origin check failed") }
        if structural {
            // The bytes are what the origin served (the checksum matched): nothing to drop.
            report.actions.append("kept: the bytes match what the origin served")
            return
        }
        if changed || checksum || keep.isEmpty {
            try store.dropVersion(key: e.key, validators: changed ? Validators(length: nil, etag: nil, lastModified: nil) : e.validators).close()
            report.actions.append("dropped every cached byte; 'vcache prefetch \(e.latestURL)' fetches it again")
        } else {
            let whole = e.length.map { keep.contains(ByteRange(0, $0)) } ?? false
            try store.catalog.replaceRanges(key: e.key, with: keep, diskBytes: store.diskUsage(key: e.key), keepCompletion: whole && e.isComplete)
            let dropped = (e.length ?? keep.count) - keep.count
            let kept = e.isComplete && dropped > 0
                ? "kept the \(Units.formatSize(keep.count)) that still hash as at completion, dropped the other \(Units.formatSize(dropped))"
                : "kept the \(Units.formatSize(keep.count)) really in data, dropped the rest"
            report.actions.append("\(kept); 'vcache prefetch \(e.latestURL)' fetches it again")
        }
        report.state = .fixed
    }
}
