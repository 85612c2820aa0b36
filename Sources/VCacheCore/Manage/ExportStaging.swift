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

/// A stream export's files (`export STREAM DIR`), all or nothing: each is written first into a
/// hidden folder of this export's own inside DIR (`DIR/.vcache-export-PID-N/`, so the moves are
/// renames on one file system), checked against its SHA-256 as it is copied; only when every one
/// is written are they moved to their names, the manifest last. A failure before that (a member's
/// bytes not matching, a full disk, a folder below DIR swapped for a symlink) removes the hidden
/// folder and what this export made, so DIR is as it was: no file of an earlier export replaced,
/// no mix of two exports, and "nothing was written" is true.
///
/// Invariants: the hidden folder is written through a descriptor held from its making
/// (`/proc/self/fd/N` where there is one), so renaming it away and planting a symlink in its place
/// sends no byte elsewhere; the moves go through descriptors of DIR's subfolders opened with
/// O_NOFOLLOW (a subfolder that is a symlink is refused, never written through); every refusal
/// (an existing file without `force`, a symlinked or non-folder subfolder) is found before the
/// first move. Only a move itself failing (EIO) can leave part of the files moved, and it says so
/// by its own error, not by "nothing was written".
///
/// One export into DIR at a time: DIR is held with an exclusive flock(2) from the making of the
/// hidden folder to the end of the commit, and a second export into it is refused (`busy`). The
/// moves run inside `Exporter.commitGate`: SIGINT/SIGTERM/SIGHUP arriving meanwhile is acted on
/// once every file has its name, never between two. Before the first move the hidden folder gets
/// a journal (`.vcache-commit`, the names in order), so an export killed outright (SIGKILL, a power
/// cut) half-way is finished by the next export into DIR (ExportStaging+Recovery.swift).
struct ExportStaging {
    /// The export folder as the user named it.
    let destination: String
    /// The hidden folder, by name (for messages and removal) and as written through.
    let folder: String
    let writeRoot: String
    private let handle: RawFile
    /// DIR, held open under an exclusive flock(2) (its lock unset where the file system has none).
    private let lock: RawFile
    /// Folders this export made in DIR (DIR itself when it was missing), to remove on failure.
    private var made: [String] = []

    /// Makes DIR when missing (its parent must exist) and the hidden folder inside it.
    init(destination: String, makeFolder: (String) throws -> Void) throws {
        self.destination = destination
        if FileSystem.followingStatus(destination) == nil {
            try Exporter.unlessStopped {
                try makeFolder(destination)
                Exporter.madeFolders.withLock { $0.append(destination) }
            }
            made.append(destination)
        }
        do {
            lock = try RawFile.openFollowing(destination, flags: O_RDONLY | O_DIRECTORY)
        } catch {
            if made.contains(destination) { rmdir(destination) }
            throw error
        }
        if flock(lock.fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            // (ENOLCK, EOPNOTSUPP: a file system without locks; the names are still checked at the commit.)
            if e == EWOULDBLOCK || e == EAGAIN {
                lock.close()
                Exporter.madeFolders.withLock { $0.removeAll { $0 == destination } }
                throw StreamExporter.StreamExportError.busy(destination)
            }
        }
        let name: String
        do {
            name = try Exporter.unlessStopped {
                while true {
                    let name = destination + "/.vcache-export-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                    if mkdir(name, 0o700) == 0 {
                        Exporter.temporaryFolders.withLock { $0.append(name) }
                        return name
                    }
                    let e = errno
                    if e == EEXIST { continue }
                    throw SystemError("mkdir", path: name, errno: e)
                }
            }
        } catch {
            lock.close()
            if made.contains(destination) { rmdir(destination) }
            throw error
        }
        folder = name
        do {
            handle = try RawFile.open(name, flags: O_RDONLY | O_DIRECTORY)
        } catch {
            rmdir(name)
            lock.close()
            if made.contains(destination) { rmdir(destination) }
            throw error
        }
        // The folder as written through: the held descriptor (Linux), else its name.
        let viaFD = "/proc/self/fd/\(handle.fd)"
        if let a = FileSystem.followingStatus(viaFD), let b = try? handle.status(), a.st_ino == b.st_ino, a.st_dev == b.st_dev {
            writeRoot = viaFD
        } else {
            writeRoot = name
        }
    }

    /// Where the file `relative` (to DIR) is written now, its folders made inside the hidden folder.
    func path(_ relative: String) throws -> String {
        var at = writeRoot
        for part in relative.split(separator: "/").dropLast() {
            at += "/" + part
            try Exporter.unlessStopped {
                guard mkdir(at, 0o755) == 0 || errno == EEXIST else { throw SystemError("mkdir", path: label(at), errno: errno) }
            }
        }
        return writeRoot + "/" + relative
    }

    /// A path under the write root as the user knows it (under DIR), for messages.
    func label(_ path: String) -> String {
        path.hasPrefix(writeRoot) ? destination + path.dropFirst(writeRoot.count) : path
    }

    /// `error` with any path under the write root named as under DIR.
    func relabel(_ error: any Error) -> any Error {
        switch error {
        case var s as SystemError:
            s.path = label(s.path)
            return s
        case Exporter.ExportError.io(var s):
            s.path = label(s.path)
            return Exporter.ExportError.io(s)
        default:
            return error
        }
    }

    /// Whether the files `relatives` (to DIR, in the order they are moved) may take their names:
    /// every folder below DIR on their way a real folder (or missing), no file there without
    /// `force`, and none that is a folder. Nothing is changed.
    static func check(_ relatives: [String], in destination: String, force: Bool) throws {
        var folders = Folders(destination: destination, create: false)
        defer { folders.close() }
        for r in relatives { _ = try folders.target(r, force: force) }
    }

    /// Moves every file to its name, `relatives` in order (the manifest last), each folder made
    /// durable before the last file's move and DIR after it; then removes the hidden folder.
    mutating func commit(_ relatives: [String], force: Bool) throws {
        var folders = Folders(destination: destination, create: true)
        defer { folders.close() }
        var targets: [(fd: Int32, name: String, path: String)] = []
        do {
            for r in relatives {
                let (fd, name) = try folders.target(r, force: force)
                targets.append((fd, name, destination + "/" + r))
            }
        } catch {
            made += folders.made
            throw error
        }
        testPause("stream-export-commit", destination)
        try Self.writeJournal(relatives, into: handle.fd, folder: folder)
        let byPath = folders.byPath, root = folders.root, handle = self.handle, destination = self.destination
        try Exporter.commitGate.withLock { (stopping: inout Bool) throws(any Error) in
            // A signal caught before the moves began: the handler is removing the hidden folder.
            guard !stopping else { throw Exporter.refusedAfterSignal() }
            for (i, t) in targets.enumerated() {
                if i == targets.count - 1 {
                    for (path, fd) in byPath.sorted(by: { $0.key.count > $1.key.count }) where fd >= 0 { try Self.sync(fd, folder: path) }
                }
                guard renameat(handle.fd, relatives[i], t.fd, t.name) == 0 else { throw SystemError("rename", path: t.path, errno: errno) }
                if i == 0 { testPause("stream-export-renaming", destination) }
            }
            try Self.sync(root, folder: destination)
            Exporter.committed.withLock { $0 = destination }
        }
        discard(removeMade: false)
    }

    /// Removes the hidden folder, and (`removeMade`) the folders this export made in DIR.
    func discard(removeMade: Bool = true) {
        FileSystem.removeTree(folder)
        handle.close()
        lock.close()
        Exporter.temporaryFolders.withLock { $0.removeAll { $0 == folder } }
        Exporter.madeFolders.withLock { $0.removeAll { $0 == destination } }
        if removeMade { for f in made.reversed() { rmdir(f) } }
    }

    static func sync(_ fd: Int32, folder: String) throws {
        guard fsync(fd) == 0 || errno == EINVAL else { throw SystemError("fsync", path: folder, errno: errno) }
    }

    /// DIR and its subfolders as descriptors, opened (and with `create`, made) without following
    /// a symlink below DIR.
    struct Folders {
        let destination: String
        let create: Bool
        var root: Int32 = -1
        var byPath: [String: Int32] = [:]
        var opened: [Int32] = []
        var made: [String] = []

        init(destination: String, create: Bool) {
            self.destination = destination
            self.create = create
        }

        /// The folder `relative`'s file goes in, as a descriptor (-1: missing, not made), and
        /// the file's own name; throws when it may not take it.
        mutating func target(_ relative: String, force: Bool) throws -> (Int32, String) {
            if root < 0 {
                // DIR is the user's: reached through a symlink or not.
                root = open(destination, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard root >= 0 else {
                    if errno == ENOENT && !create { root = -2; return (-1, "") }
                    throw SystemError("open", path: destination, errno: errno)
                }
                opened.append(root)
            }
            let parts = relative.split(separator: "/").map(String.init)
            var fd = root
            var path = destination
            for part in parts.dropLast() {
                path += "/" + part
                if let known = byPath[path] { fd = known; continue }
                guard fd >= 0 else { break }
                var st = stat()
                if fstatat(fd, part, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                    guard errno == ENOENT else { throw SystemError("stat", path: path, errno: errno) }
                    guard create else { byPath[path] = -1; fd = -1; continue }
                    guard mkdirat(fd, part, 0o755) == 0 || errno == EEXIST else { throw SystemError("mkdir", path: path, errno: errno) }
                    made.append(path)
                } else if (st.st_mode & S_IFMT) == S_IFLNK {
                    throw StreamExporter.StreamExportError.linkedFolder(path)
                } else if (st.st_mode & S_IFMT) != S_IFDIR {
                    throw StreamExporter.StreamExportError.notAFolder(path)
                }
                let sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard sub >= 0 else { throw Self.refusal(errno, path) }
                opened.append(sub)
                // A folder the user may not write (r2 read-only) refused now, not after r1's files moved.
                guard faccessat(sub, ".", W_OK, AT_EACCESS) == 0 else { throw SystemError("write into", path: path, errno: errno) }
                byPath[path] = sub
                fd = sub
            }
            let name = parts.last ?? ""
            guard fd >= 0 else { return (-1, name) }
            var st = stat()
            if fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
                if (st.st_mode & S_IFMT) == S_IFDIR { throw StreamExporter.StreamExportError.folderInTheWay(destination + "/" + relative) }
                if !force { throw StreamExporter.StreamExportError.destinationExists(destination + "/" + relative) }
            }
            return (fd, name)
        }

        /// A subfolder that could not be opened as one: swapped for a symlink or a file since it was looked at.
        static func refusal(_ e: Int32, _ path: String) -> any Error {
            switch e {
            case ELOOP: StreamExporter.StreamExportError.linkedFolder(path)
            case ENOTDIR: StreamExporter.StreamExportError.notAFolder(path)
            default: SystemError("open", path: path, errno: e)
            }
        }

        func close() { for fd in opened { _ = Glibc_close(fd) } }
    }
}
