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

/// What an export killed outright (SIGKILL, a power cut) leaves in DIR, taken up by the next
/// export into DIR: the hidden folder `.vcache-export-PID-N` of a process that is gone is either
/// an unfinished copy (no journal: nothing of DIR was touched yet), removed, or a commit stopped
/// between two moves (a journal, `.vcache-commit`, naming every file in the order they move),
/// finished: the files still in it are moved to their names, so DIR holds that export whole
/// instead of a mix of two. Each is said in one line.
///
/// Only a folder of this user's that nobody else may write (mode 0700, as an export makes it) is
/// acted on, and a journal's names stay inside DIR (no `..`, no absolute path): another user who
/// may write DIR cannot have a file of yours moved by planting one.
extension ExportStaging {
    static let journalName = ".vcache-commit"
    static let folderPrefix = ".vcache-export-"

    /// The journal's last line: a journal without it was cut short (a power cut while it was
    /// written, which at a line's end would read as a shorter list of names), so no move began.
    /// No name is `.` (a journal's names never hold a `.` part).
    static let journalEnd = "."

    /// Writes the names to move, in order, then `journalEnd`, into the hidden folder and makes
    /// them durable, before the first move.
    static func writeJournal(_ relatives: [String], into folderFD: Int32, folder: String) throws {
        let path = folder + "/" + journalName
        let fd = openat(folderFD, journalName, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SystemError("create", path: path, errno: errno) }
        defer { _ = Glibc_close(fd) }
        let text = Array((relatives.joined(separator: "\n") + "\n" + journalEnd + "\n").utf8)
        try text.withUnsafeBytes { try RawFile.writeAll(fd, $0, named: path) }
        try sync(fd, folder: path)
        try sync(folderFD, folder: folder)
    }

    /// Finishes or removes the hidden folders in `destination` left by exports whose process is
    /// gone, saying what it did through `note`. Throws `busy` when another export holds DIR.
    static func recoverKilledExports(in destination: String, note: (String) -> Void) throws {
        guard let dir = try? RawFile.openFollowing(destination, flags: O_RDONLY | O_DIRECTORY) else { return }
        defer { dir.close() }
        if flock(dir.fd, LOCK_EX | LOCK_NB) != 0 && (errno == EWOULDBLOCK || errno == EAGAIN) {
            throw StreamExporter.StreamExportError.busy(destination)
        }
        // The folder locked, not whatever its name leads to now.
        for name in FileSystem.names(inFolder: dir.fd).filter({ $0.hasPrefix(folderPrefix) }).sorted() {
            let path = destination + "/" + name
            let parts = name.dropFirst(folderPrefix.count).split(separator: "-")
            // DIR's lock, held by every export from its hidden folder's making to its last move,
            // is this one's: whatever process made it is no export any more (its PID may be
            // another process's now, or one of another PID namespace).
            guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, pid != getpid() else { continue }
            guard let folder = try? RawFile.open(path, flags: O_RDONLY | O_DIRECTORY), let st = try? folder.status(),
                  st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
                note("'\(path)' is left as it is: it is not a hidden export folder of yours; remove it by hand")
                continue
            }
            defer { folder.close() }
            guard let relatives = journal(folder.fd) else {
                FileSystem.removeTree(path)
                note("removed '\(path)': the copy of an export into '\(destination)' killed before it moved any file (process \(pid))")
                continue
            }
            do {
                let moved = try finish(relatives, from: folder.fd, into: destination)
                FileSystem.removeTree(path)
                note("finished the export into '\(destination)' that process \(pid) was killed in the middle of: its last \(moved) of \(relatives.count) files moved to their names, so the folder holds that export whole")
            } catch {
                note("'\(destination)' mixes two exports (process \(pid) was killed while moving its files into it) and they could not be finished: \(error); the files not moved are in '\(path)'")
            }
        }
    }

    /// The names a killed commit was moving, or nil when it had not begun (or they leave DIR).
    private static func journal(_ folderFD: Int32) -> [String]? {
        let fd = openat(folderFD, journalName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc_close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while bytes.count < 64 << 20 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += buffer[0..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        // Cut short (anywhere, a line's end too): written before any move, so none was made.
        guard text.hasSuffix("\n" + journalEnd + "\n") else { return nil }
        let names = text.split(separator: "\n").dropLast().map(String.init)
        let safe = names.allSatisfy { n in
            !n.hasPrefix("/") && n.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
        }
        return safe && !names.isEmpty ? names : nil
    }

    /// Moves the files still in the hidden folder to their names, in the journal's order.
    private static func finish(_ relatives: [String], from folderFD: Int32, into destination: String) throws -> Int {
        var folders = Folders(destination: destination, create: true)
        defer { folders.close() }
        var moved = 0
        for r in relatives {
            var st = stat()
            guard fstatat(folderFD, r, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            // Every folder on the way a real folder of the hidden one, never a link out of it.
            let parts = r.split(separator: "/").map(String.init)
            var way = ""
            for part in parts.dropLast() {
                way += way.isEmpty ? part : "/" + part
                var dst = stat()
                guard fstatat(folderFD, way, &dst, AT_SYMLINK_NOFOLLOW) == 0, (dst.st_mode & S_IFMT) == S_IFDIR else {
                    throw SystemError("rename", path: destination + "/" + r, errno: ELOOP)
                }
            }
            let (fd, name) = try folders.target(r, force: true)
            guard renameat(folderFD, r, fd, name) == 0 else { throw SystemError("rename", path: destination + "/" + r, errno: errno) }
            moved += 1
        }
        if folders.root >= 0 { try sync(folders.root, folder: destination) }
        return moved
    }
}
