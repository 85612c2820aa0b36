#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A real nginx on 127.0.0.1, started with its own config under a temp dir and stopped on
/// `stop()`/deinit. Its access log records each request's Range header and body bytes sent.
public final class Nginx: @unchecked Sendable {
    // Immutable after init except `process`, which only stop() touches.
    public let root: String
    public let port: Int
    private let dir: TempDirectory
    private let process: Child

    public enum LaunchError: Error, CustomStringConvertible {
        case notInstalled, didNotStart(String)
        public var description: String {
            switch self {
            case .notInstalled: "nginx is not installed (apt-get install nginx-light, or run 'make deps')"
            case .didNotStart(let log): "nginx did not start: \(log)"
            }
        }
    }

    public static var binary: String? {
        ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx", "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// - Parameter gzip: `gzip on` for every type, as a misconfigured origin compresses video
    ///   (nginx then answers a client that accepts gzip with a compressed 200, never a range).
    public init(gzip: Bool = false) throws {
        guard let binary = Self.binary else { throw LaunchError.notInstalled }
        dir = TempDirectory("vcache-nginx")
        root = dir.file("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.file("tmp"), withIntermediateDirectories: true)
        // The port is free when chosen, but another server may take it before nginx binds: nginx
        // then exits, or the other server answers the connect. Only nginx answers this token.
        let token = UUID().uuidString
        try token.write(toFile: dir.file("ready"), atomically: true, encoding: .utf8)
        var lastLog = ""
        for _ in 0..<20 {
            let port = try Self.freePort()
            let conf = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(dir.file("nginx.pid"));
            error_log \(dir.file("error.log")) warn;
            events { worker_connections 512; }
            http {
                log_format ranges '$request_method $uri "$http_range" $status $body_bytes_sent';
                access_log \(dir.file("access.log")) ranges;
                client_body_temp_path \(dir.file("tmp")); proxy_temp_path \(dir.file("tmp"));
                fastcgi_temp_path \(dir.file("tmp")); uwsgi_temp_path \(dir.file("tmp")); scgi_temp_path \(dir.file("tmp"));
                types { video/mp4 mp4; video/quicktime mov; }
                default_type application/octet-stream;
                sendfile on;
                keepalive_requests 100000;
                \(gzip ? "gzip on; gzip_min_length 1; gzip_types *;" : "")
                server {
                    listen 127.0.0.1:\(port);
                    root \(root);
                    location /slow/ { limit_rate 2m; alias \(root)/; }
                    location = /.vcache-nginx-ready { access_log off; alias \(dir.file("ready")); }
                }
            }
            """
            try conf.write(toFile: dir.file("nginx.conf"), atomically: true, encoding: .utf8)
            let p = try Child(binary, ["-c", dir.file("nginx.conf"), "-p", dir.path, "-e", dir.file("error.log")], stdout: .null, stderr: .null)
            if Self.waitForListener(port: port, process: p, token: token) {
                self.port = port
                self.process = p
                return
            }
            p.kill(SIGKILL)
            p.wait()
            lastLog = (try? String(contentsOfFile: dir.file("error.log"), encoding: .utf8)) ?? ""
        }
        throw LaunchError.didNotStart(lastLog)
    }

    deinit { stop() }

    public func stop() {
        // SIGKILL: the test process may have SIGTERM blocked, which the child inherits. nginx
        // writes each access-log line unbuffered when the request ends, so nothing is lost.
        process.kill(SIGKILL)
        process.wait()
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Puts a file into the document root.
    @discardableResult
    public func publish(_ name: String, _ data: Data) throws -> String {
        try data.write(to: URL(fileURLWithPath: root + "/" + name))
        return url("/" + name)
    }

    /// Publishes `name` as a symlink to an already published file: another URL, the same bytes.
    @discardableResult
    public func alias(_ name: String, to target: String) throws -> String {
        try FileManager.default.createSymbolicLink(atPath: root + "/" + name, withDestinationPath: target)
        return url("/" + name)
    }

    public struct LogLine: Equatable, Sendable {
        public var method: String
        public var path: String
        public var range: String?
        public var status: Int
        public var bytes: Int64
    }

    /// The access log so far. nginx writes a line when a request completes.
    public func accessLog() -> [LogLine] {
        guard let text = try? String(contentsOfFile: dir.file("access.log"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let p = line.split(separator: " ")
            guard p.count == 5, let status = Int(p[3]), let bytes = Int64(p[4]) else { return nil }
            let range = p[2].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            return LogLine(method: String(p[0]), path: String(p[1]), range: range == "-" ? nil : range, status: status, bytes: bytes)
        }
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Sockets.stream, 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Asks for the token until this nginx answers it (true), or it exits (it could not bind) or
    /// another server answers on the port (false: the caller tries another port).
    static func waitForListener(port: Int, process: Child, token: String) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard process.isRunning else { return false }
            let fd = Sockets.connectLoopback(port)
            if fd >= 0 {
                defer { close(fd) }
                var wait = timeval(tv_sec: 2, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                Sockets.say(fd, "GET /.vcache-nginx-ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                var received = Data()
                var buf = [UInt8](repeating: 0, count: 4096)
                while received.count < 64 << 10 {
                    let n = read(fd, &buf, buf.count)
                    if n <= 0 { break }
                    received.append(contentsOf: buf[0..<n])
                }
                return String(decoding: received, as: UTF8.self).contains(token)
            }
            usleep(20_000)
        }
        return false
    }
}
