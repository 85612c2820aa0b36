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
import Synchronization

/// Hands complete videos on as ordinary files. Invariant 6 (Docs/cache-format.md): only complete entries
/// whose bytes verify against the stored SHA-256, written to a temp file in the destination
/// folder, fsynced, then renamed into place; never over an existing file without `force`.
/// The entry's `data` is held with LOCK_SH while it is read, so eviction skips it.
public struct Exporter {
    public let store: CacheStore

    public init(store: CacheStore) { self.store = store }

    public enum ExportError: Error, Equatable, CustomStringConvertible {
        case incomplete(url: String, cached: Int64, length: Int64?)
        case destinationExists(String)
        case missingFolder(String)
        case checksumMismatch(url: String)
        /// The entry is not known to have a digest expected of it (it did not match, or was
        /// never checked against it).
        case expectedDigest(url: String, check: DigestCheck)
        case crossDevice(String)
        case changedWhileExporting(url: String)
        case notFastStartable(String)
        case notRegular(path: String, what: String)
        case io(SystemError)
        /// A signal was caught: the handler removes what the export made and ends the process.
        case stopped

        public var description: String {
            switch self {
            case .incomplete(let url, let cached, let length):
                let missing = length.map { " (\(Units.formatSize($0 - cached)) missing)" } ?? ""
                return "\(url) is not complete: \(Units.formatSize(cached)) of \(length.map(Units.formatSize) ?? "an unknown length") cached\(missing); run 'vcache prefetch \(url)' to complete it"
            case .destinationExists(let p): return "'\(p)' already exists; use --force to overwrite it"
            case .missingFolder(let p): return "folder '\(p)' does not exist; create it first"
            case .checksumMismatch(let url): return "the cached bytes of \(url) do not match their SHA-256; nothing was written; run 'vcache verify --fix'"
            case .expectedDigest(let url, let check):
                let e = check.expected
                let why = check.computed.map { "its \(e.algorithm.rawValue) is \($0), not \(e.hex)" } ?? "its \(e.algorithm.rawValue) was never checked against \(e.hex)"
                return "the cached bytes of \(url) are not the file expected: \(why) (expected by \(e.source.description)); nothing was written; run 'vcache prefetch \(url)' to check or fetch it again"
            case .crossDevice(let p): return "cannot hard-link into '\(p)': it is on another filesystem than the cache; export without --link"
            case .notFastStartable(let why): return "cannot move the moov to the front: \(why); export without --faststart"
            case .changedWhileExporting(let url): return "the cached file of \(url) was replaced while it was being exported; nothing was written; try again"
            case .notRegular(let p, let what): return "'\(p)' is \(what): export replaces only regular files (write to a device or a FIFO by naming it, to stdout with '-')"
            case .io(let e): return e.description
            case .stopped: return "stopped by a signal"
            }
        }
    }

    public struct Exported: Equatable, Sendable {
        public var path: String
        public var bytes: Int64
        public var linked: Bool
        /// `faststart` asked: true when the moov was moved in front, false when it already was.
        public var movedMoov: Bool? = nil
        /// Written into a stream (stdout, a device, a FIFO), not as a file.
        public var streamed = false
    }

    /// Exports one entry. `destination` is a file path, or an existing folder (then the name
    /// comes from the URL).
    public func export(key: CacheKey, to destination: String, force: Bool, link: Bool, faststart: Bool = false, mode: mode_t? = nil) throws -> Exported {
        guard let e = try store.catalog.entry(key: key) else { throw ExportError.io(SystemError("find entry", path: key.hex, errno: ENOENT)) }
        guard e.isComplete, let length = e.length, let sha = e.sha256 else {
            throw ExportError.incomplete(url: e.latestURL, cached: e.cachedBytes, length: e.length)
        }
        if let bad = try store.catalog.expectedDigests(key: key).first(where: { $0.matched != true || $0.computed != $0.expected.hex }) {
            throw ExportError.expectedDigest(url: e.latestURL, check: bad)
        }
        // A stream (stdout as '-', a character device such as /dev/null, a FIFO): the bytes are
        // written into it, never by replacing it. Checked against the digest first, since what
        // goes into a stream cannot be taken back.
        if ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"].contains(destination) { return try stream(e, length: length, sha: sha, into: 1, named: "stdout", link: link, faststart: faststart) }
        if let lst = FileSystem.status(destination) {
            let kind = lst.st_mode & S_IFMT
            let followed = FileSystem.followingStatus(destination).map { $0.st_mode & S_IFMT }
            if kind == S_IFCHR || kind == S_IFIFO || (kind == S_IFLNK && (followed == S_IFCHR || followed == S_IFIFO)) {
                let out = try RawFile.openFollowing(destination, flags: O_WRONLY)
                defer { out.close() }
                return try stream(e, length: length, sha: sha, into: out.fd, named: destination, link: link, faststart: faststart)
            }
            if kind == S_IFLNK && followed != S_IFDIR { throw ExportError.notRegular(path: destination, what: "a symbolic link") }
            if kind != S_IFREG && kind != S_IFDIR && kind != S_IFLNK { throw ExportError.notRegular(path: destination, what: Self.describe(kind)) }
        }
        var target = destination
        // The destination is the user's, not the cache's: a folder reached through a symlink is
        // still a folder to write into (the no-follow rule is for paths inside the cache only).
        if let st = FileSystem.followingStatus(destination), (st.st_mode & S_IFMT) == S_IFDIR {
            target = PathText.appendingPathComponent(destination, Self.fileName(for: e.latestURL, key: e.key.hex, contentType: e.contentType))
        } else if destination.hasSuffix("/") {
            throw ExportError.missingFolder(destination)
        }
        let folder = PathText.deletingLastPathComponent(target).isEmpty ? "." : PathText.deletingLastPathComponent(target)
        guard let fst = FileSystem.followingStatus(folder), (fst.st_mode & S_IFMT) == S_IFDIR else { throw ExportError.missingFolder(folder) }
        if let st = FileSystem.status(target) {
            let kind = st.st_mode & S_IFMT
            guard kind == S_IFREG else { throw ExportError.notRegular(path: target, what: Self.describe(kind)) }
            if !force { throw ExportError.destinationExists(target) }
        }

        let data: RawFile
        do { data = try store.openDataForReading(key: key) } catch let s as SystemError { throw ExportError.io(s) }
        var movedMoov: Bool?
        defer { data.close() }
        let temp = folder + "/." + PathText.lastPathComponent(target).prefix(100) + ".vcache-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        Self.temporaries.withLock { _ = $0.insert(temp) }
        defer { Self.temporaries.withLock { _ = $0.remove(temp) } }
        do {
            if link {
                let digest = SHA256Digest()
                try digest.update(from: data, ByteRange(0, length))
                guard digest.finalize() == sha else { throw ExportError.checksumMismatch(url: e.latestURL) }
                testPause("export-link-after-hash", key)
                try Self.unlessStopped {
                    if Glibc_link(store.dataPath(key), temp) != 0 {
                        if errno == EXDEV { throw ExportError.crossDevice(folder) }
                        throw ExportError.io(SystemError("link", path: temp, errno: errno))
                    }
                }
                // link() works by path: publish only if the link is the very file that was hashed.
                let hashed = try data.status()
                guard let linked = FileSystem.status(temp), linked.st_ino == hashed.st_ino, linked.st_dev == hashed.st_dev else {
                    throw ExportError.changedWhileExporting(url: e.latestURL)
                }
            } else if faststart, let pieces = try fastStartPieces(data, length: length) {
                // Checked first (the output's order is not the source's), then written piece by piece.
                let digest = SHA256Digest()
                try digest.update(from: data, ByteRange(0, length))
                guard digest.finalize() == sha else { throw ExportError.checksumMismatch(url: e.latestURL) }
                try write(pieces, from: data, to: temp)
                movedMoov = true
            } else {
                try copy(data, length: length, expecting: sha, to: temp, url: e.latestURL)
                if faststart { movedMoov = false }
            }
            // Its mode before it appears under its name (a key is never readable by others there).
            if let mode, chmod(temp, mode) != 0 { throw ExportError.io(SystemError("chmod", path: temp, errno: errno)) }
            guard rename(temp, target) == 0 else { throw ExportError.io(SystemError("rename", path: target, errno: errno)) }
        } catch {
            unlink(temp)
            if let s = error as? SystemError { throw ExportError.io(s) }
            throw error
        }
        // The new name made durable: "exported" must survive a power cut. A failure is this disk's
        // (exit 5), except from a file system that cannot sync a folder at all (EINVAL: some FUSE
        // and network ones). (It was ignored: a failing disk passed for a durable export.)
        do {
            try FileSystem.syncFolderWhereSupported(folder)
        } catch let e as SystemError {
            throw ExportError.io(e)
        }
        try? store.catalog.touch(key: key)
        return Exported(path: target, bytes: length, linked: link, movedMoov: movedMoov)
    }

    static func describe(_ kind: mode_t) -> String {
        switch kind {
        case S_IFLNK: "a symbolic link"
        case S_IFDIR: "a folder"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        default: "not a regular file"
        }
    }

    /// Writes a complete entry into an open stream, in order, after checking its bytes against the
    /// stored SHA-256 (nothing is written when they do not match).
    private func stream(_ e: CacheEntry, length: Int64, sha: String, into fd: Int32, named: String, link: Bool, faststart: Bool) throws -> Exported {
        if link { throw ExportError.notRegular(path: named, what: "a stream, which cannot be a hard link") }
        let data: RawFile
        do { data = try store.openDataForReading(key: e.key) } catch let s as SystemError { throw ExportError.io(s) }
        defer { data.close() }
        let digest = SHA256Digest()
        try digest.update(from: data, ByteRange(0, length))
        guard digest.finalize() == sha else { throw ExportError.checksumMismatch(url: e.latestURL) }
        var movedMoov: Bool?
        var pieces: [FastStart.Piece] = [.source(ByteRange(0, length))]
        if faststart {
            if let p = try fastStartPieces(data, length: length) {
                pieces = p
                movedMoov = true
            } else {
                movedMoov = false
            }
        }
        try Self.emit(pieces, from: data) { try RawFile.writeAll(fd, $0, named: named) }
        try? store.catalog.touch(key: e.key)
        return Exported(path: named, bytes: length, linked: false, movedMoov: movedMoov, streamed: true)
    }

    /// Temp files being written now (a signal handler removes them before the process dies).
    static let temporaries = Locked<Set<String>>([])

    /// Removes the temp files of exports in progress: for a process stopped by a signal, so an
    /// interrupted export leaves no hidden partial file behind.
    /// Returns the export folder whose files were being moved into place when it was called: those
    /// moves are finished first (`ExportStaging.commit`), so the folder holds the new export whole.
    @discardableResult
    public static func removeTemporaries() -> String? {
        // Moves under way end before the gate is free: this waits for them, and for a making of
        // a temp file or folder; after it nothing more is made (`unlessStopped`).
        commitGate.withLock { $0 = true }
        testPause("export-signal-caught", "")
        let finished = committed.withLock { $0 }
        for t in temporaries.withLock({ $0 }) { unlink(t) }
        for f in temporaryFolders.withLock({ $0 }) { FileSystem.removeTree(f) }
        for f in madeFolders.withLock({ $0 }).reversed() { rmdir(f) }
        return finished
    }

    /// Held by a stream export while it moves its files to their names, by every making of a temp
    /// file or folder a signal must remove (`unlessStopped`), and by the signal handler before it
    /// removes them, so a signal never lands between two moves and nothing is made after the
    /// removal; true once a signal was caught (no commit may begin, nothing may be made then).
    static let commitGate = Locked(false)

    /// The export folder whose files were all moved to their names (set inside `commitGate`, so
    /// the handler, which reads it after taking the gate, knows whether a commit finished).
    static let committed = Locked<String?>(nil)

    /// Whether a signal was caught: the export is being stopped by the handler, which removes the
    /// temp files and ends the process. A failure the removal caused (a rename of a file it
    /// removed) is not the user's to read.
    public static var isStopping: Bool { commitGate.withLock { $0 } }

    /// Runs `make` (the making of a temp file or folder that a signal must remove, and its
    /// registration) inside `commitGate`, unless a signal was caught: then `stopped` is thrown and
    /// nothing is made. So the handler's removal, after it set `stopping` under the gate, misses
    /// nothing a thread made in the meantime (a file made after it would stay behind).
    static func unlessStopped<T>(_ make: () throws -> T) throws -> T {
        try commitGate.withLock { (stopping: inout Bool) throws(any Error) -> T in
            guard !stopping else { throw refusedAfterSignal() }
            return try make()
        }
    }

    /// The error a making or a commit refused after a signal throws.
    static func refusedAfterSignal() -> ExportError {
        testPause("export-refused-after-signal", "")
        return .stopped
    }

    /// Export folders a stream export made (DIR when it was missing), removed when still empty.
    static let madeFolders = Locked<[String]>([])

    /// The hidden folders stream exports are written into now (`ExportStaging`), removed whole
    /// with the temp files.
    static let temporaryFolders = Locked<[String]>([])

    /// The fast-start layout of the video in `data`, or nil when its moov already leads.
    private func fastStartPieces(_ data: RawFile, length: Int64) throws -> [FastStart.Piece]? {
        do {
            let walker = MP4Walker(file: data, length: length)
            let top = try walker.topLevel()
            guard let moov = top.first(where: { $0.type == "moov" }) else { throw MP4Error.notMP4("no 'moov' box") }
            guard moov.size <= MP4Movie.maxMoovSize else { throw MP4Error.malformed(type: "moov", at: moov.offset, reason: "too large to rewrite") }
            return try FastStart.plan(top: top, moov: try walker.read(moov.offset, Int(moov.size)), length: length)
        } catch let e as MP4Error {
            throw ExportError.notFastStartable(e.description)
        }
    }

    /// Hands `pieces` (ranges of `data`, new bytes) to `write` in order, in blocks of at most 1 MiB.
    private static func emit(_ pieces: [FastStart.Piece], from data: RawFile, _ write: (UnsafeRawBufferPointer) throws -> Void) throws {
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        for piece in pieces {
            switch piece {
            case .bytes(let b):
                try b.withUnsafeBytes { try write($0) }
            case .source(let r):
                var offset = r.lowerBound
                while offset < r.upperBound {
                    let n = Int(min(Int64(chunk), r.upperBound - offset))
                    let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
                    try data.readExactly(into: slice, fromAbsoluteOffset: offset)
                    try write(UnsafeRawBufferPointer(slice))
                    offset += Int64(n)
                }
            }
        }
    }

    /// Writes `pieces` (ranges of `data`, new bytes) to `path`, a new file, and fsyncs it.
    private func write(_ pieces: [FastStart.Piece], from data: RawFile, to path: String) throws {
        let out = try Self.unlessStopped { try RawFile.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644) }
        defer { out.close() }
        var at: Int64 = 0
        try Self.emit(pieces, from: data) { bytes in
            try out.write(bytes, toAbsoluteOffset: at)
            at += Int64(bytes.count)
        }
        try out.sync()
    }

    /// Copies `data` to `path` (a new file), hashing as it goes; the file is fsynced, and removed
    /// when the bytes do not match `sha`.
    private func copy(_ data: RawFile, length: Int64, expecting sha: String, to path: String, url: String) throws {
        let out = try Self.unlessStopped { try RawFile.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644) }
        defer { out.close() }
        let digest = SHA256Digest()
        try data.readChunks(ByteRange(0, length), chunk: 1 << 20) { piece, offset in
            digest.update(piece)
            if offset == 0 { testPause("export-copying", path) }
            try out.write(piece, toAbsoluteOffset: offset)
        }
        guard digest.finalize() == sha else { throw ExportError.checksumMismatch(url: url) }
        try out.sync()
    }

    /// A safe file name from the URL's last path segment: percent-decoded, no `/`, `\`, control
    /// characters or leading dots, at most 200 bytes with the extension kept; the key when
    /// nothing usable is left.
    public static func fileName(for url: String, key: String, contentType: String? = nil) -> String {
        var (stem, ext) = fileNameParts(for: url, key: key)
        if ext.isEmpty { ext = (contentType?.contains("quicktime") ?? false) ? "mov" : "mp4" }
        while stem.utf8.count + ext.utf8.count + 1 > 200 { stem.removeLast() }
        return stem + "." + ext
    }

    /// `fileName`'s stem and extension (empty when the URL's name has none of at most 8
    /// characters), before one is chosen for it.
    static func fileNameParts(for url: String, key: String) -> (stem: String, ext: String) {
        let rawLast = URLComponents(string: url)?.percentEncodedPath.split(separator: "/").last.map(String.init) ?? ""
        var name = (PercentCoding.decode(rawLast) ?? rawLast)
        name = String(name.unicodeScalars.map { s -> Character in
            if s == "/" || s == "\\" || s.value < 0x20 || s.value == 0x7f || s == ":" { return "_" }
            return Character(s)
        })
        name = name.trimmingBlanks
        // A name that is only an extension (`.mp4`, ` .mp4` from `/%20.mp4`) keeps it: "x" stands
        // in for the missing stem, since a leading dot hides the extension from pathExtension.
        var ext = PathText.pathExtension("x" + name)
        if ext.count > 8 { ext = "" }
        var stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
        // Never a hidden file: no leading dot, whatever blanks stood before or between the dots.
        while let first = stem.first, first == "." || first.isWhitespace { stem.removeFirst() }
        stem = stem.trimmingBlanks
        if stem.isEmpty { stem = "video-" + key.prefix(12) }
        return (stem, ext)
    }
}

@inline(__always) private func Glibc_link(_ from: String, _ to: String) -> Int32 {
    #if canImport(Glibc)
    return Glibc.link(from, to)
    #else
    return Darwin.link(from, to)
    #endif
}
