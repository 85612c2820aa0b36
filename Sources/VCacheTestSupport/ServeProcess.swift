import Foundation
import Synchronization
import VCacheCore

/// `vcache serve --port 0` as a subprocess: its base URL (the first line it prints), its log
/// (stderr, in a file), and a clean stop.
public final class ServeProcess: Sendable {
    public let process: Child
    public let base: String
    public let port: Int
    private let logPath: String

    /// `user`: run serve as this user (through runuser; the test runs as root), from `binary`
    /// (one that user can execute: see `VCacheBinary.copy(into:)`). `launcher`: a command that
    /// execs serve in its place, e.g. `NetNamespace.launcher` (serve then runs in that namespace).
    public init(cacheDir: String, logDir: TempDirectory, arguments: [String] = [], user: String? = nil, binary: String = VCacheBinary.path,
                environment: [String: String] = [:], launcher: [String] = []) throws {
        var env = ProcessInfo.processInfo.environment
        env["VCACHE_DIR"] = cacheDir
        env.merge(environment) { _, new in new }
        logPath = logDir.file("serve-\(UUID().uuidString.prefix(8)).log")
        let (executable, args) = if let first = launcher.first {
            (first, Array(launcher.dropFirst()) + [binary, "serve", "--port", "0"] + arguments)
        } else if let user {
            ("/usr/sbin/runuser", ["-u", user, "--", binary, "serve", "--port", "0"] + arguments)
        } else {
            (VCacheBinary.path, ["serve", "--port", "0"] + arguments)
        }
        process = try Child(executable, args, environment: env, stdout: .capture, stderr: .file(logPath))
        // The first line is the base URL (with --json, the `listening` event that carries it); it
        // comes once the server listens (or never, if it exits first).
        let buffered = process.waitForOutput(timeout: 300) { $0.contains(UInt8(ascii: "\n")) }
        let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) ?? buffered.endIndex
        let first = String(decoding: buffered[..<newline], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if first.hasPrefix("{"), let data = first.data(using: .utf8),
           let event = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let url = event["url"] as? String {
            base = url
        } else {
            base = first
        }
        port = Int(base.split(separator: ":").last ?? "") ?? 0
    }

    /// Everything the server printed on stdout so far, a line each (with --json: its events).
    public var stdoutLines: [String] {
        String(decoding: process.output().out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// The proxy URL of `origin` on this server.
    public func url(_ origin: String) -> String { "\(base)/v/" + ProxyURLCoding.encode(origin) + "/" + (URL(string: origin)?.lastPathComponent ?? "video.mp4") }

    /// The lines of the log that match, once there is one (polled for up to `seconds`; a line
    /// may follow the response it is about); empty if none came.
    public func logLines(within seconds: Double, where matches: (String) -> Bool) -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let lines = log.filter(matches)
            if !lines.isEmpty || Date() >= deadline { return lines }
            usleep(50_000)
        }
    }

    /// Whether every stream member serve fetched from the origin had its manifest confirmed by
    /// an answer of the origin (`/status` `manifests_unconfirmed` 0; polled for up to `seconds`):
    /// until then a stream whose members it stored is marked unconfirmed, and offline serve does
    /// not answer it (Docs/serve.md).
    public func confirmed(within seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let r = try? Tool.run("/usr/bin/curl", ["-s", base + "/status"]),
               let o = try? JSONSerialization.jsonObject(with: r.out) as? [String: Any], o["manifests_unconfirmed"] as? Int == 0 { return true }
            if Date() >= deadline { return false }
            usleep(50_000)
        }
    }

    /// The log so far, one line per request.
    public var log: [String] {
        (try? String(contentsOfFile: logPath, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    /// SIGTERM, then the exit status (and whether it died by the signal).
    @discardableResult
    public func stop() -> (status: Int32, signalled: Bool) {
        process.kill(SIGTERM)
        let exit = process.finish().exit
        return (exit.status, exit.signalled)
    }

    deinit { process.kill(SIGKILL) }
}

/// The proxy path's encoding of an origin URL (base64url without padding), as `vcache url` makes it.
public enum ProxyURLCoding {
    public static func encode(_ s: String) -> String {
        Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Runs a tool (curl, ffmpeg, ffprobe) and captures its output.
public enum Tool {
    public static func run(_ path: String, _ args: [String], stdin: Child.Input = .null) throws -> (status: Int32, out: Data, err: String) {
        let (exit, out, err) = try Child.run(path, args, stdin: stdin)
        return (exit.status, out, String(decoding: err, as: UTF8.self))
    }

}

/// curl run by a test: the response's status, headers (names lower-cased) and body, the head and
/// body kept in files of `dir` (never pipes: a child's pipe can outlive it).
public enum Curl {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Each call's files are its own (players fetching at once from several threads must not
    /// write one another's head and body); the last call's stay as `h.txt` and `b.bin`.
    private static let calls = Locked(0)

    /// Throws when curl itself fails (not for an HTTP error status: that is the test's to judge).
    public static func fetch(_ args: [String], in dir: TempDirectory) throws -> (status: Int, headers: [String: String], body: Data) {
        let n = calls.withLock { c -> Int in
            c += 1
            return c
        }
        let headFile = dir.file("h-\(n).txt"), bodyFile = dir.file("b-\(n).bin")
        let r = try Tool.run("/usr/bin/curl", ["-s", "-D", headFile, "-o", bodyFile] + args)
        guard r.status == 0 else { throw Failed(description: "curl \(args): exit \(r.status) \(r.err)") }
        let head = (try? String(contentsOfFile: headFile, encoding: .utf8)) ?? ""
        let (status, headers) = ResponseHeadText.parse(head)
        let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))) ?? Data()
        // Kept under the usual names for a look after the test (VCACHE_KEEP_TEST_DIRS).
        _ = rename(headFile, dir.file("h.txt"))
        _ = rename(bodyFile, dir.file("b.bin"))
        return (status, headers, body)
    }
}

/// A response head as curl's `-D` writes it: the status of the last response and its headers
/// (names lower-cased).
public enum ResponseHeadText {
    public static func parse(_ head: String) -> (status: Int, headers: [String: String]) {
        var headers: [String: String] = [:]
        var status = 0
        for line in head.components(separatedBy: "\r\n") {
            if line.hasPrefix("HTTP/") { status = Int(line.split(separator: " ")[1]) ?? 0; headers = [:]; continue }
            guard let c = line.firstIndex(of: ":") else { continue }
            headers[line[..<c].lowercased()] = line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }
}
