#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Runs the built `vcache` binary as a subprocess and captures what a user would see.
public struct VCacheRun: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// True when the process was killed by a signal (then `status` is the signal number).
    public var signalled: Bool

    public init(status: Int32, stdout: String, stderr: String, signalled: Bool) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.signalled = signalled
    }

    /// stderr a line each, the ISO-8601 time that starts a log line removed.
    public var stderrLines: [String] {
        stderr.split(separator: "\n").map { line in
            let s = String(line)
            guard let r = s.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "#, options: .regularExpression) else { return s }
            return String(s[r.upperBound...])
        }
    }

    /// Killed by a signal, or died the way a Swift runtime trap does.
    public var signalledOrCrashed: Bool { signalled || status == 132 || status == 133 || status == 134 || status == 139 }
}

public enum VCacheBinary {
    /// `$VCACHE_BIN`, else `vcache` next to the test bundle (SwiftPM's build folder).
    public static var path: String {
        if let p = ProcessInfo.processInfo.environment["VCACHE_BIN"], !p.isEmpty { return p }
        let exe = URL(fileURLWithPath: Sockets.executablePath)
        var dir = exe.deletingLastPathComponent()
        // macOS: .../debug/vcachePackageTests.xctest/Contents/MacOS/vcachePackageTests
        while dir.path != "/" && !FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("vcache").path) {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("vcache").path
    }

    /// A copy of the binary in `dir` (made world-readable and traversable) that another user can
    /// run: the build folder of a fresh clone may sit under a private temp folder.
    public static func copy(into dir: TempDirectory) throws -> String {
        chmod(dir.path, 0o755)
        let target = dir.file("vcache-bin")
        if !FileManager.default.fileExists(atPath: target) {
            try FileManager.default.copyItem(atPath: path, toPath: target)
            chmod(target, 0o755)
        }
        return target
    }

    /// Starts vcache; the caller waits with `finish`.
    /// `executable`: run this instead of vcache (e.g. `/bin/sh` to set a umask first).
    public static func start(_ args: [String], cacheDir: String?, stdin: String? = nil, environment extra: [String: String] = [:],
                             executable: String? = nil) throws -> Running {
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        if let cacheDir { env["VCACHE_DIR"] = cacheDir }
        for (k, v) in extra { env[k] = v }
        return Running(process: try Child(executable ?? path, args, environment: env, stdin: .text(stdin ?? "")))
    }

    /// Runs vcache to completion.
    public static func run(_ args: [String], cacheDir: String?, stdin: String? = nil, environment: [String: String] = [:]) throws -> VCacheRun {
        try start(args, cacheDir: cacheDir, stdin: stdin, environment: environment).finish()
    }

    public final class Running: Sendable {
        public let process: Child

        init(process: Child) { self.process = process }

        public var pid: Int32 { process.pid }

        public func kill(_ signal: Int32) { process.kill(signal) }

        public func finish() -> VCacheRun {
            let (exit, out, err) = process.finish()
            return VCacheRun(status: exit.status, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self),
                             signalled: exit.signalled)
        }
    }
}

/// A cache folder owned by `nobody`, for tests where another user made files in it (root warms,
/// nobody serves or evicts): the folder, and a vcache binary nobody can run. A test that makes
/// one carries `.requires(.runuser)`; without root and runuser this throws.
public struct NobodysCache {
    public let cache: String
    public let binary: String

    public init(in dir: TempDirectory) throws {
        if let why = Requirement.runuser.missing() { throw RequirementMissing(description: why) }
        binary = try VCacheBinary.copy(into: dir)
        cache = dir.file("cache")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        _ = try Tool.run("/bin/chown", ["nobody", cache])
    }

    /// vcache run as nobody on this cache.
    public func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        let r = try Tool.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "VCACHE_DIR=\(cache)", binary] + args)
        return (r.status, String(decoding: r.out, as: UTF8.self), r.err)
    }
}
