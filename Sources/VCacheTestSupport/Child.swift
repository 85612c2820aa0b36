#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A child process of a test: started with `posix_spawn`, reaped with `waitpid` on its own pid.
/// (Foundation's `Process.waitUntilExit` once never returned for an `nft` and a `vcache` that
/// had exited: Docs/reliability.md.) stdout and stderr go through pipes a reader thread drains as
/// they fill, so a child writing megabytes never blocks; the pipes' ends are close-on-exec and
/// every other descriptor is closed in the child, so no other test's child holds them open, and
/// what is read ends when the child has exited even if something it started keeps them.
/// The child gets default signal dispositions and the spawning thread's signal mask, as with
/// Foundation's `Process` (a test's thread blocks most signals; vcache's signal sources rely on
/// that in tests: with an empty mask, `export`'s SIGHUP went unseen. Docs/reliability.md).
public final class Child: @unchecked Sendable {
    // @unchecked: `state` and the captured bytes are guarded by `lock`; the rest is set at start.
    public enum Input {
        /// /dev/null.
        case null
        /// These bytes, from a file (never a pipe a test must keep writing).
        case text(String)
        /// A pipe the test writes through `stdin` (and closes with `closeStdin`).
        case pipe
    }

    public enum Output {
        case null
        /// Kept: `output()`, `finish()`, `waitForOutput`.
        case capture
        /// Appended to this file.
        case file(String)
    }

    /// How it ended: its exit status, or the signal that killed it (`signalled`).
    public struct Exit: Equatable, Sendable {
        public var status: Int32
        public var signalled: Bool
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    public let pid: pid_t
    /// The write end of its stdin, with `Input.pipe`.
    public let stdin: FileHandle?
    private let lock = NSCondition()
    private var exit: Exit?
    private var out = Data()
    private var err = Data()
    private var readerDone = false

    /// Starts `path` with `args`. `environment`: the whole environment (nil: this process's);
    /// `directory`: its working directory (nil: this process's).
    public init(_ path: String, _ args: [String], environment: [String: String]? = nil, directory: String? = nil,
                stdin input: Input = .null, stdout: Output = .capture, stderr: Output = .capture) throws {
        var closeAfter: [Int32] = []
        defer { for fd in closeAfter { close(fd) } }
        func open(_ path: String, _ flags: Int32) throws -> Int32 {
            let fd = Glibc.open(path, flags | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw SpawnError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
            closeAfter.append(fd)
            return fd
        }
        // Each of the child's 0, 1, 2, and the ends this process reads or writes.
        let inFD: Int32
        var stdinWriter: Int32?
        switch input {
        case .null: inFD = try open("/dev/null", O_RDONLY)
        case .text(let text):
            let file = NSTemporaryDirectory() + "vcache-child-\(UUID().uuidString).in"
            _ = FileManager.default.createFile(atPath: file, contents: Data(text.utf8))
            inFD = try open(file, O_RDONLY)
            unlink(file)
        case .pipe:
            let (r, w) = try Self.pipe()
            inFD = r
            closeAfter.append(r)
            stdinWriter = w
        }
        var readers: [(fd: Int32, isErr: Bool)] = []
        func target(_ o: Output, isErr: Bool) throws -> Int32 {
            switch o {
            case .null: return try open("/dev/null", O_WRONLY)
            case .file(let path): return try open(path, O_WRONLY | O_CREAT | O_APPEND)
            case .capture:
                let (r, w) = try Self.pipe()
                closeAfter.append(w)
                readers.append((r, isErr))
                return w
            }
        }
        let outFD = try target(stdout, isErr: false)
        let errFD = try target(stderr, isErr: true)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, to) in [(inFD, Int32(0)), (outFD, 1), (errFD, 2)] {
            let rc = posix_spawn_file_actions_adddup2(&actions, fd, to)
            guard rc == 0 else { throw SpawnError(description: "posix_spawn_file_actions_adddup2: \(String(cString: strerror(rc)))") }
        }
        if let directory {
            guard let addchdir = Self.addchdir else { throw SpawnError(description: "this C library cannot set a child's directory") }
            let rc = addchdir(&actions, directory)
            guard rc == 0 else { throw SpawnError(description: "posix_spawn_file_actions_addchdir_np: \(String(cString: strerror(rc)))") }
        }
        if let closefrom = Self.addclosefrom { _ = closefrom(&actions, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))

        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var child: pid_t = 0
        pthread_rwlock_rdlock(Self.spawning)
        let rc = Self.withCStrings([path] + args) { argv in
            Self.withCStrings(env) { envp in posix_spawn(&child, path, &actions, &attributes, argv, envp) }
        }
        pthread_rwlock_unlock(Self.spawning)
        guard rc == 0 else {
            if let stdinWriter { close(stdinWriter) }
            for r in readers { close(r.fd) }
            throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(rc)))")
        }
        pid = child
        stdin = stdinWriter.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        if readers.isEmpty {
            readerDone = true
        } else {
            let pipes = readers
            Thread.detachNewThread { [self] in drain(pipes) }
        }
    }

    deinit {
        if lock.withLock({ exit == nil }) { Foundation.kill(pid, SIGKILL) }
        _ = wait()
    }

    /// Runs `path` to its end: how it ended, and what it wrote.
    public static func run(_ path: String, _ args: [String], environment: [String: String]? = nil, directory: String? = nil,
                           stdin: Input = .null) throws -> (exit: Exit, out: Data, err: Data) {
        try Child(path, args, environment: environment, directory: directory, stdin: stdin).finish()
    }

    /// Waits for it to exit (`waitpid` on its pid, EINTR retried); once reaped, the same answer.
    @discardableResult
    public func wait() -> Exit {
        if let done = lock.withLock({ exit }) { return done }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return reaped(status)
    }

    /// True until it has exited (reaped by this call when it has).
    public var isRunning: Bool {
        if lock.withLock({ exit }) != nil { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        _ = reaped(status)
        return false
    }

    /// Sends `signal`, unless it was reaped already (its pid may belong to another process by then).
    public func kill(_ signal: Int32) {
        lock.lock()
        defer { lock.unlock() }
        if exit == nil { Foundation.kill(pid, signal) }
    }

    public func closeStdin() { try? stdin?.close() }

    /// Waits for it to exit, then for the rest of what it wrote.
    public func finish() -> (exit: Exit, out: Data, err: Data) {
        let e = wait()
        lock.lock()
        defer { lock.unlock() }
        while !readerDone { lock.wait() }
        return (e, out, err)
    }

    /// What it wrote so far (captured stdout, stderr).
    public func output() -> (out: Data, err: Data) { lock.withLock { (out, err) } }

    /// Waits until captured stdout satisfies `enough`, it ended, or `timeout` passed; stdout then.
    public func waitForOutput(timeout: TimeInterval, until enough: (Data) -> Bool) -> Data {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !enough(out) && !readerDone && lock.wait(until: deadline) {}
        return out
    }

    /// Waits until captured stderr satisfies `enough`, it ended, or `timeout` passed; stderr then.
    public func waitForStderr(timeout: TimeInterval, until enough: (Data) -> Bool) -> Data {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !enough(err) && !readerDone && lock.wait(until: deadline) {}
        return err
    }

    private func reaped(_ status: Int32) -> Exit {
        // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift does not import as macros.
        let signal = status & 0x7f
        let e = signal != 0 && signal != 0x7f ? Exit(status: signal, signalled: true) : Exit(status: (status >> 8) & 0xff, signalled: false)
        lock.lock()
        if exit == nil { exit = e }
        lock.broadcast()
        lock.unlock()
        return e
    }

    /// Reads the pipes as they fill, until each ends, or the child has exited and what it left is read.
    private func drain(_ pipes: [(fd: Int32, isErr: Bool)]) {
        var open = pipes
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var exited = false
        while !open.isEmpty {
            var polls = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            // After the exit every byte it wrote is in the pipe: read without waiting, then stop
            // (a process it started may hold the write end for longer).
            let ready = poll(&polls, nfds_t(polls.count), exited ? 0 : 100)
            if ready < 0 && errno == EINTR { continue }
            var closed: Set<Int32> = []
            for p in polls where p.revents != 0 {
                let n = read(p.fd, &buffer, buffer.count)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    closed.insert(p.fd)
                    continue
                }
                let chunk = Data(buffer[0..<n])
                let isErr = open.first { $0.fd == p.fd }?.isErr ?? false
                lock.lock()
                if isErr { err += chunk } else { out += chunk }
                lock.broadcast()
                lock.unlock()
            }
            if exited && ready <= 0 { break }
            open.removeAll { closed.contains($0.fd) }
            for fd in closed { close(fd) }
            if !exited { exited = lock.withLock { exit != nil } }
        }
        for p in open { close(p.fd) }
        lock.lock()
        readerDone = true
        lock.broadcast()
        lock.unlock()
    }

    /// A pipe whose ends are close-on-exec from the start (no other child, spawned meanwhile by
    /// another thread, inherits them).
    private static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        if let pipe2 = Self.pipe2 {
            guard pipe2(&fds, O_CLOEXEC) == 0 else { throw SpawnError(description: "pipe2: \(String(cString: strerror(errno)))") }
        } else {
            guard Glibc.pipe(&fds) == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        }
        return (fds[0], fds[1])
    }

    /// Held (shared) while a child is spawned: from fork to exec the child holds a copy of every
    /// descriptor of this process, close-on-exec or not, and with it every flock taken through
    /// one. An in-process test that needs a lock this process let go of to be free at once (a
    /// `verify` or an eviction right after a prefetch ended) runs under `withoutSpawning`.
    nonisolated(unsafe) private static let spawning: UnsafeMutablePointer<pthread_rwlock_t> = {
        let l = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        #if canImport(Glibc)
        // A test waiting to run alone is not starved by the suite's steady stream of spawns.
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        #endif
        pthread_rwlock_init(l, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        return l
    }()

    /// Runs `body` while no child is being spawned by this process (spawns wait for it to end;
    /// `body` must spawn none), so no descriptor of this process has a copy in a child.
    public static func withoutSpawning<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(spawning)
        defer { pthread_rwlock_unlock(spawning) }
        return try body()
    }

    private static func withCStrings<T>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> T) -> T {
        let copies = strings.map { strdup($0) }
        defer { for c in copies { free(c) } }
        return body(copies + [nil])
    }

    // glibc's _GNU_SOURCE calls, which the Glibc module does not import: found at run time.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name).map { unsafeBitCast($0, to: type) }
    }
    private static let pipe2 = symbol("pipe2", as: Pipe2.self)
    private static let addchdir = symbol("posix_spawn_file_actions_addchdir_np", as: AddChdir.self)
    private static let addclosefrom = symbol("posix_spawn_file_actions_addclosefrom_np", as: AddCloseFrom.self)
}
