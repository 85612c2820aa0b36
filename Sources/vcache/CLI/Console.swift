#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// stdout carries data, stderr progress and errors. Writes go straight to fds 1 and 2
/// (Glibc's `stderr` global is not concurrency-safe in Swift 6).
struct Console: Sendable {
    var stderrIsTTY: Bool
    var stdoutIsTTY: Bool
    var color: Bool

    static func current() -> Console {
        let env = ProcessInfo.processInfo.environment
        let errTTY = isatty(2) == 1
        return Console(stderrIsTTY: errTTY, stdoutIsTTY: isatty(1) == 1,
                       color: errTTY && env["NO_COLOR"].map(\.isEmpty) ?? true && env["TERM"] != "dumb")
    }

    func out(_ text: String) { Self.write(1, text) }
    func err(_ text: String) { Self.write(2, text) }

    /// `vcache: <message>` on stderr.
    func error(_ message: String) { err("vcache: \(message)\n") }

    static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var done = 0
        bytes.withUnsafeMutableBytes { raw in
            while done < raw.count {
                let n = Glibc_write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 { if errno == EINTR { continue } else { return } }
                done += n
            }
        }
    }

    /// Terminal width for bars; 80 when unknown.
    var width: Int {
        var ws = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 20 { return Int(ws.ws_col) }
        return 80
    }
}

@inline(__always) private func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.write(fd, p, n)
    #else
    return Darwin.write(fd, p, n)
    #endif
}

/// A JSON-lines writer: one object per line on stdout, keys sorted for stable output.
enum JSONLines {
    static func encode(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
