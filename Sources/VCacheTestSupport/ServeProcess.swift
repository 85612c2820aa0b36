import Foundation

/// `vcache serve --port 0` as a subprocess: its base URL (the first line it prints), its log
/// (stderr, in a file), and a clean stop.
public final class ServeProcess: @unchecked Sendable {
    // Used from one test thread.
    public let process = Process()
    public let base: String
    public let port: Int
    private let logPath: String
    private let stdoutPath: String
    private let drained = DispatchSemaphore(value: 0)

    /// `user`: run serve as this user (through runuser; the test runs as root), from `binary`
    /// (one that user can execute: see `VCacheBinary.copy(into:)`). `launcher`: a command that
    /// execs serve in its place, e.g. `NetNamespace.launcher` (serve then runs in that namespace).
    public init(cacheDir: String, logDir: TempDirectory, arguments: [String] = [], user: String? = nil, binary: String = VCacheBinary.path,
                environment: [String: String] = [:], launcher: [String] = []) throws {
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(launcher.dropFirst()) + [binary, "serve", "--port", "0"] + arguments
        } else if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", binary, "serve", "--port", "0"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: VCacheBinary.path)
            process.arguments = ["serve", "--port", "0"] + arguments
        }
        var env = ProcessInfo.processInfo.environment
        env["VCACHE_DIR"] = cacheDir
        env.merge(environment) { _, new in new }
        process.environment = env
        logPath = logDir.file("serve-\(UUID().uuidString.prefix(8)).log")
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The first line is the base URL (with --json, the `listening` event that carries it); it
        // comes once the server listens. The rest of stdout is drained into a file, so the
        // server never blocks on a full pipe.
        let reader = out.fileHandleForReading
        var buffered = Data()
        while !buffered.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            buffered += chunk
        }
        let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) ?? buffered.endIndex
        let first = String(decoding: buffered[..<newline], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if first.hasPrefix("{"), let data = first.data(using: .utf8),
           let event = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let url = event["url"] as? String {
            base = url
        } else {
            base = first
        }
        port = Int(base.split(separator: ":").last ?? "") ?? 0
        stdoutPath = logPath + ".stdout"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: buffered)
        let sink = FileHandle(forWritingAtPath: stdoutPath)
        sink?.seekToEndOfFile()
        let done = drained
        let drain = Thread {
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                sink?.write(chunk)
            }
            try? sink?.close()
            done.signal()
        }
        drain.start()
    }

    /// Everything the server printed on stdout so far, a line each (with --json: its events).
    public var stdoutLines: [String] {
        (try? String(contentsOfFile: stdoutPath, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    /// The proxy URL of `origin` on this server.
    public func url(_ origin: String) -> String { "\(base)/v/" + ProxyURLCoding.encode(origin) + "/" + (URL(string: origin)?.lastPathComponent ?? "video.mp4") }

    /// The log so far, one line per request.
    public var log: [String] {
        (try? String(contentsOfFile: logPath, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    /// SIGTERM, then the exit status (and whether it died by the signal).
    @discardableResult
    public func stop() -> (status: Int32, signalled: Bool) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        // All of stdout is in its file once the pipe's other end is closed.
        if drained.wait(timeout: .now() + 10) == .success { drained.signal() }
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
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
    public static func run(_ path: String, _ args: [String]) throws -> (status: Int32, out: Data, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let capture = try CapturedOutput()
        p.standardOutput = capture.out
        p.standardError = capture.err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        let (out, err) = capture.read()
        return (p.terminationStatus, out, String(decoding: err, as: UTF8.self))
    }

}

/// curl run by a test: the response's status, headers (names lower-cased) and body, the head and
/// body kept in files of `dir` (never pipes: a child's pipe can outlive it).
public enum Curl {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Throws when curl itself fails (not for an HTTP error status: that is the test's to judge).
    public static func fetch(_ args: [String], in dir: TempDirectory) throws -> (status: Int, headers: [String: String], body: Data) {
        let r = try Tool.run("/usr/bin/curl", ["-s", "-D", dir.file("h.txt"), "-o", dir.file("b.bin")] + args)
        guard r.status == 0 else { throw Failed(description: "curl \(args): exit \(r.status) \(r.err)") }
        let head = (try? String(contentsOfFile: dir.file("h.txt"), encoding: .utf8)) ?? ""
        let (status, headers) = ResponseHeadText.parse(head)
        return (status, headers, (try? Data(contentsOf: URL(fileURLWithPath: dir.file("b.bin")))) ?? Data())
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
