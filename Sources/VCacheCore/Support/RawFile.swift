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

/// A thin, typed wrapper over one file descriptor (swift-system's spirit): each method names the
/// C call it makes, retries EINTR, and throws `SystemError` naming the path.
///
/// A class, so the descriptor is closed exactly once: `close()` (or the last reference going
/// away) closes it, and a second `close()` does nothing. A closed file refuses further I/O with
/// EBADF rather than reaching whatever file or socket the number now belongs to.
public final class RawFile: Sendable {
    private let descriptor: Int32
    private let closed = Atomic<Bool>(false)
    public let path: String

    init(fd: Int32, path: String) {
        descriptor = fd
        self.path = path
    }

    deinit { close() }

    /// The descriptor, for calls this type does not wrap (lseek, fstat); -1 once closed.
    public var fd: Int32 { closed.load(ordering: .acquiring) ? -1 : descriptor }

    /// open(2) with O_CLOEXEC and O_NOFOLLOW: vcache never follows a symlink inside its cache.
    public static func open(_ path: String, flags: Int32, mode: mode_t = 0o600) throws -> RawFile {
        while true {
            let fd = Glibc_open(path, flags | O_CLOEXEC | O_NOFOLLOW, mode)
            if fd >= 0 { return RawFile(fd: fd, path: path) }
            if errno == EINTR { continue }
            throw SystemError("open", path: path, errno: errno)
        }
    }

    /// open(2) following symlinks: for destinations outside the cache (`/dev/stdout`).
    public static func openFollowing(_ path: String, flags: Int32) throws -> RawFile {
        while true {
            let fd = Glibc_open(path, flags | O_CLOEXEC, 0o644)
            if fd >= 0 { return RawFile(fd: fd, path: path) }
            if errno == EINTR { continue }
            throw SystemError("open", path: path, errno: errno)
        }
    }

    /// write(2) of all of `buffer` to a stream (a pipe, a device), in order.
    public static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, named: String) throws {
        var done = 0
        while done < buffer.count {
            let n = Glibc_write(fd, buffer.baseAddress! + done, buffer.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("write", path: named, errno: errno)
            }
            done += n
        }
    }

    /// close(2), once.
    public func close() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { _ = Glibc_close(descriptor) }
    }

    private func liveDescriptor() throws -> Int32 {
        let fd = self.fd
        if fd < 0 { throw SystemError("use", path: path, errno: EBADF) }
        return fd
    }

    /// pwrite(2) of the whole buffer at an absolute offset; short writes continue.
    public func write(_ buffer: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64) throws {
        let fd = try liveDescriptor()
        var done = 0
        while done < buffer.count {
            let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("write", path: path, errno: errno)
            }
            done += n
        }
    }

    /// pread(2) up to `buffer.count` bytes at an absolute offset; returns bytes read (0 at end of file).
    public func read(into buffer: UnsafeMutableRawBufferPointer, fromAbsoluteOffset offset: Int64) throws -> Int {
        let fd = try liveDescriptor()
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw SystemError("read", path: path, errno: errno)
        }
    }

    /// Fills the buffer completely or throws (a short file is an error here).
    public func readExactly(into buffer: UnsafeMutableRawBufferPointer, fromAbsoluteOffset offset: Int64) throws {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), fromAbsoluteOffset: offset + Int64(done))
            if n == 0 { throw SystemError("read", path: path, errno: EIO) }
            done += n
        }
    }

    /// Reads `range` in order, `chunk` bytes at a time (pread into one buffer), handing each piece
    /// and its offset to `body`; throws on a short file, or what `body` throws.
    public func readChunks(_ range: ByteRange, chunk: Int = 256 << 10, _ body: (UnsafeRawBufferPointer, Int64) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset = range.lowerBound
        while offset < range.upperBound {
            let n = Int(min(Int64(chunk), range.upperBound - offset))
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            try readExactly(into: slice, fromAbsoluteOffset: offset)
            try body(UnsafeRawBufferPointer(slice), offset)
            offset += Int64(n)
        }
    }

    /// `count` bytes from `offset` as an array, or throws (a short file is an error here).
    public func bytes(_ count: Int, at offset: Int64) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        try buffer.withUnsafeMutableBytes { try readExactly(into: $0, fromAbsoluteOffset: offset) }
        return buffer
    }

    /// fsync(2): the data written so far is durable.
    public func sync() throws {
        let fd = try liveDescriptor()
        if BenchSwitches.noFsync { return }
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw SystemError("sync", path: path, errno: errno)
        }
    }

    /// sync_file_range(2) with SYNC_FILE_RANGE_WRITE (Linux): starts writing these bytes back
    /// now, without waiting, so the fsync of the next checkpoint finds little left to do.
    /// Elsewhere (and on failure) it does nothing: it is only a hint.
    public func startWriteback(_ range: ByteRange) {
        #if os(Linux)
        let fd = self.fd
        guard fd >= 0, let call = Self.syncFileRange else { return }
        _ = call(fd, off_t(range.lowerBound), off_t(range.count), 2)  // SYNC_FILE_RANGE_WRITE
        #endif
    }

    #if os(Linux)
    /// glibc declares sync_file_range only under _GNU_SOURCE, which Swift's Glibc module does not
    /// set: looked up by name once instead.
    private typealias SyncFileRange = @convention(c) (Int32, off_t, off_t, UInt32) -> Int32
    private static let syncFileRange: SyncFileRange? = {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "sync_file_range") else { return nil }
        return unsafeBitCast(symbol, to: SyncFileRange.self)
    }()
    #endif

    /// ftruncate(2).
    public func resize(to length: Int64) throws {
        let fd = try liveDescriptor()
        while ftruncate(fd, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw SystemError("truncate", path: path, errno: errno)
        }
    }

    /// fstat(2).
    public func status() throws -> stat {
        let fd = try liveDescriptor()
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError("stat", path: path, errno: errno) }
        return st
    }

    /// The file this descriptor refers to (device and inode): what it holds stays the same file's
    /// bytes even after its path is unlinked or given to a new file.
    public func identity() throws -> FileID { FileID(try status()) }

    /// fallocate(2) PUNCH_HOLE|KEEP_SIZE (Linux): gives the blocks of `range` back to the file
    /// system, so bytes that were written but will never be claimed do not take space. Elsewhere
    /// (and on file systems without holes) it does nothing.
    public func punchHole(_ range: ByteRange) {
        #if os(Linux)
        guard fd >= 0, !range.isEmpty, let call = Self.fallocateCall else { return }
        _ = call(fd, 0x02 | 0x01, off_t(range.lowerBound), off_t(range.count))  // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        #endif
    }

    #if os(Linux)
    private typealias Fallocate = @convention(c) (Int32, Int32, off_t, off_t) -> Int32
    private static let fallocateCall: Fallocate? = {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "fallocate") else { return nil }
        return unsafeBitCast(symbol, to: Fallocate.self)
    }()
    #endif

    /// flock(2). Returns false when `nonBlocking` and the lock is held elsewhere.
    public func lock(exclusive: Bool, nonBlocking: Bool) throws -> Bool {
        let fd = try liveDescriptor()
        let op = (exclusive ? LOCK_EX : LOCK_SH) | (nonBlocking ? LOCK_NB : 0)
        while flock(fd, op) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { return false }
            throw SystemError("lock", path: path, errno: errno)
        }
        return true
    }

}

/// One file on one device: what a descriptor or a path refers to. An inode number is not reused
/// while any descriptor still holds the file, so a reader holding `data` open can compare it with
/// the path's to learn whether the catalog's claims are about its file.
public struct FileID: Hashable, Sendable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64
    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
    public init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
    public var description: String { "\(device):\(inode)" }
}

public enum FileSystem {
    /// fsync(2) of a folder: the names made, moved and removed in it are durable once it returns.
    /// A symlink to a folder is followed (an export folder may be one; syncing is harmless).
    public static func syncFolder(_ path: String) throws {
        let folder = try RawFile.openFollowing(path, flags: O_RDONLY | O_DIRECTORY)
        defer { folder.close() }
        try folder.sync()
    }

    /// `syncFolder`, where the file system can sync a folder at all: EINVAL (some FUSE and network
    /// file systems) is no failure. For folders outside the cache (an export's destination).
    public static func syncFolderWhereSupported(_ path: String) throws {
        do {
            try syncFolder(path)
        } catch let e as SystemError where e.errno == EINVAL {}
    }

    /// realpath(3): the path with every symlink, `.` and `..` resolved; nil when it does not exist.
    public static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    /// The file a path names now (not following a symlink); nil when there is none.
    public static func identity(_ path: String) -> FileID? { status(path).map(FileID.init) }

    /// lstat(2); nil when the path does not exist.
    public static func status(_ path: String) -> stat? {
        var st = stat()
        return lstat(path, &st) == 0 ? st : nil
    }

    /// stat(2), following symlinks: for paths outside the cache (export destinations).
    public static func followingStatus(_ path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    public static func exists(_ path: String) -> Bool { status(path) != nil }

    /// mkdir -p with `mode`, given exactly (chmod after mkdir: the umask would narrow a group
    /// mode). Tries the folder itself first, so the common case is one call.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws {
        if makeDirectory(path, mode) || errno == EEXIST { return }
        guard errno == ENOENT else { throw SystemError("create folder", path: path, errno: errno) }
        let parent = PathText.deletingLastPathComponent(path)
        // A few tries: another process may remove an empty parent (a shard) between the two mkdirs.
        for attempt in 0..<3 {
            if !parent.isEmpty && parent != path { try makeDirectories(parent, mode: mode) }
            if makeDirectory(path, mode) || errno == EEXIST { return }
            if errno != ENOENT || attempt == 2 { throw SystemError("create folder", path: path, errno: errno) }
        }
    }

    private static func makeDirectory(_ path: String, _ mode: mode_t) -> Bool {
        guard mkdir(path, mode) == 0 else { return false }
        if mode & 0o7077 != 0 { chmod(path, mode) }  // best effort: the folder exists either way
        return true
    }

    /// statvfs(2): the size of the file system holding `path` and what an unprivileged user may
    /// still write there, in bytes; nil when it cannot be asked.
    public static func space(_ path: String) -> (size: Int64, free: Int64)? {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return nil }
        return (Int64(fs.f_blocks) * Int64(fs.f_frsize), Int64(fs.f_bavail) * Int64(fs.f_frsize))
    }

    /// Allocated bytes on disk (what `du` counts), not the apparent length.
    public static func allocatedBytes(_ st: stat) -> Int64 { Int64(st.st_blocks) * 512 }

    /// Removes `path` and, when it is a folder, all it holds, without following a symbolic link
    /// anywhere below `path` (a link is removed, not what it names): each folder is opened with
    /// O_NOFOLLOW and emptied through its descriptor (`unlinkat`), so a folder swapped for a link
    /// by another user while it is removed leads nowhere outside it. `path` itself last, by name:
    /// a folder put in its place meanwhile is removed only when empty.
    public static func removeTree(_ path: String) {
        let fd = Glibc_open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard fd >= 0 else {
            unlink(path)  // a file or a link (or nothing)
            return
        }
        removeContents(of: fd)
        _ = Glibc_close(fd)
        rmdir(path)
    }

    /// The names in the folder open as `fd` (which stays open), "." and ".." left out.
    public static func names(inFolder fd: Int32) -> [String] {
        let listing = dup(fd)
        guard listing >= 0, let dir = fdopendir(listing) else {
            if listing >= 0 { _ = Glibc_close(listing) }
            return []
        }
        var names: [String] = []
        while let ent = readdir(dir) {
            // The name read in place: a dirent is only as long as its name (d_reclen), so
            // copying the whole 256-byte d_name read past glibc's buffer (AddressSanitizer).
            let name = withUnsafePointer(to: &ent.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        return names
    }

    /// Empties the folder open as `fd` (which stays open), through descriptors only.
    private static func removeContents(of fd: Int32) {
        for name in names(inFolder: fd) {
            let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if sub >= 0 {
                removeContents(of: sub)
                _ = Glibc_close(sub)
                unlinkat(fd, name, AT_REMOVEDIR)
            } else {
                unlinkat(fd, name, 0)
            }
        }
    }
}

// Module-qualified names so the wrappers above can use the C calls of the same name.
@inline(__always) private func Glibc_open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
    return Glibc.open(path, flags, mode)
    #else
    return Darwin.open(path, flags, mode)
    #endif
}

@inline(__always) private func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.write(fd, p, n)
    #else
    return Darwin.write(fd, p, n)
    #endif
}

/// close(2) by its C name, where a type's own `close()` hides it (RawFile, ExportStaging).
@inline(__always) func Glibc_close(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

#if DEBUG
/// Debug builds only: hooks for tests.
enum TestSeam {
    /// Pause points for race and crash tests, so a test can act at an exact moment instead of
    /// guessing with a sleep. In-process: a hook set in `hooks` runs there. Across processes:
    /// `VCACHE_TEST_PAUSE=NAME:PREFIX` makes the process create `PREFIX.reached` at point NAME and
    /// wait until `PREFIX.go` exists (or be killed there); several points are joined by newlines.
    nonisolated(unsafe) static var hooks: [String: @Sendable (String) -> Void] = [:]
    private static let hooksLock = Locked(())
    private static let pausePoints: [String: String] = {
        guard let v = ProcessInfo.processInfo.environment["VCACHE_TEST_PAUSE"] else { return [:] }
        var points: [String: String] = [:]
        for item in v.split(separator: "\n") {
            guard let colon = item.firstIndex(of: ":") else { continue }
            points[String(item[..<colon])] = String(item[item.index(after: colon)...])
        }
        return points
    }()

    /// A hook runs at point `name` for the entry `key` only (the point's detail): tests running
    /// in parallel each hang theirs on their own entries. (Keyed by the name alone, one test's
    /// removal took another's hook away, which then waited for it in vain.) It gets the detail.
    static func setHook(_ name: String, key: String, _ hook: (@Sendable (String) -> Void)?) {
        hooksLock.withLock { _ in hooks[name + "\u{0}" + key] = hook }
    }

    static func pause(_ name: String, _ detail: String) {
        if let hook = hooksLock.withLock({ _ in hooks[name + "\u{0}" + detail] }) { hook(detail) }
        guard let prefix = pausePoints[name] else { return }
        _ = FileManager.default.createFile(atPath: prefix + ".reached", contents: nil)
        while !FileManager.default.fileExists(atPath: prefix + ".go") { usleep(5_000) }
    }
}
#endif

/// A named pause point for tests (see `TestSeam.pause`); nothing at all in release builds.
@inline(__always) func testPause(_ name: String, _ detail: String) {
    #if DEBUG
    TestSeam.pause(name, detail)
    #endif
}

