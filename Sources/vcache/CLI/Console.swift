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
import VCacheCore
import Synchronization

/// stdout carries data, stderr progress and errors. Writes go straight to fds 1 and 2
/// (Glibc's `stderr` global is not concurrency-safe in Swift 6).
struct Console: Sendable {
    var stderrIsTTY: Bool
    var stdoutIsTTY: Bool
    var color: Bool
    /// With `--json`: the command whose events go to stdout in the envelope of Docs/json.md.
    var jsonCommand: String?

    static func current() -> Console {
        let env = ProcessInfo.processInfo.environment
        let errTTY = isatty(2) == 1
        return Console(stderrIsTTY: errTTY, stdoutIsTTY: isatty(1) == 1,
                       color: errTTY && env["NO_COLOR"].map(\.isEmpty) ?? true && env["TERM"] != "dumb")
    }

    /// `-q` of a command that says nothing more of it itself: stderr carries errors only.
    var quiet = false

    func out(_ text: String) { Self.write(1, text) }
    /// Progress, notes and reports on stderr (dropped with `quiet`); errors go through `error`.
    func err(_ text: String) { if !quiet { Self.write(2, text) } }

    /// A failure: `vcache: <message>` on stderr and, with `--json`, an `error` event on stdout.
    func error(_ failure: FailureInfo) {
        // One line, whatever origin text the message embeds (a URL an MPD gave, its BaseURL).
        failureLine(failure)
        event("error", ["error": failure.json])
    }

    /// A failure's line on stderr, `-q` or not (the caller says its own `--json` event).
    func failureLine(_ failure: FailureInfo) { Self.write(2, "vcache: \(Self.oneLine(failure.message))\n") }

    /// A failure the command met itself, with its machine-readable kind (Docs/json.md).
    func error(_ message: String, kind: String, exitCode: Int32 = 1) {
        error(FailureInfo(kind: kind, message: message, exitCode: exitCode))
    }

    /// A bad command line: exit code 2.
    func usage(_ message: String) { error(message, kind: "usage", exitCode: 2) }

    /// Text from outside (a URL, a header) made safe for one log line (`LogText.escaped`).
    static func escaped(_ text: String) -> String { LogText.escaped(text) }

    /// A whole line that may embed origin text, some of it quoted escaped already: one line,
    /// control characters escaped, backslashes left as they are (`LogText.escaped`).
    static func oneLine(_ text: String) -> String { LogText.escaped(text, keepBackslashes: true) }

    /// Says `error` and returns its exit code (5 for a damaged catalog or a disk problem, 3 for
    /// a busy one...), so a command's exit status and its JSON error event never disagree.
    func fail(_ error: any Error, context: String? = nil) -> Int32 {
        let failure = FailureInfo(error, context: context)
        self.error(failure)
        return failure.exitCode
    }

    /// An error thrown by the core, classified by its type; `context` goes before its text.
    func error(_ error: any Error, context: String? = nil) { self.error(FailureInfo(error, context: context)) }

    /// One `--json` event on stdout (nothing without `--json`).
    func event(_ name: String, _ fields: [String: Any]) {
        guard let jsonCommand else { return }
        out(JSONEvents.line(command: jsonCommand, event: name, fields))
    }

    /// A password in a URL (`http://alice:s3cret@host/`) is never shown: every line vcache
    /// prints goes through here (`PasswordRedaction` says what it finds).
    static func redacted(_ text: String) -> String { PasswordRedaction.redacted(text) }

    static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(redacted(text).utf8)
        do {
            try bytes.withUnsafeBytes { try RawFile.writeAll(fd, $0, named: fd == 1 ? "stdout" : "stderr") }
        } catch let e as SystemError where e.errno == EPIPE {
            // The reader went away (`vcache ... | head -1`): the run stops as for SIGPIPE.
            brokenPipe.withLock { hook in
                let h = hook
                hook = nil
                h?()
            }
        } catch {
            // A full disk under stderr: nothing more can be said anyway.
        }
    }

    /// Called once when a write to stdout or stderr finds the pipe closed.
    static let brokenPipe = Locked<(@Sendable () -> Void)?>(nil)


    /// Terminal width for bars; 80 when unknown.
    var width: Int {
        var ws = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 20 { return Int(ws.ws_col) }
        return 80
    }
}

/// JSON's null in a `[String: Any]` for `JSONLines` (Foundation's NSNull is not in FoundationEssentials).
struct JSONNull {}

/// A JSON-lines writer: one object per line on stdout, keys sorted (by their UTF-8 bytes) for
/// stable output. Written by hand: JSONSerialization's sorted keys compare with ICU collation,
/// which made `ls --json` over 10,000 entries take 1.9 s.
enum JSONLines {
    static func encode(_ object: [String: Any]) -> String {
        var out = ""
        out.reserveCapacity(256)
        value(object, into: &out)
        return out
    }

    private static func value(_ v: Any, into out: inout String) {
        switch v {
        case let b as Bool: out += b ? "true" : "false"
        case let s as String: string(s, into: &out)
        case let k as CacheKey: string(k.hex, into: &out)
        case let i as Int: out += String(i)
        case let i as Int64: out += String(i)
        case let i as Int32: out += String(i)
        case let i as UInt32: out += String(i)
        case let d as Double: out += d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)) : "null"
        case let a as [Any]:
            out += "["
            for (n, x) in a.enumerated() {
                if n > 0 { out += "," }
                value(x, into: &out)
            }
            out += "]"
        case let o as [String: Any]:
            out += "{"
            for (n, key) in o.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if n > 0 { out += "," }
                string(key, into: &out)
                out += ":"
                value(o[key]!, into: &out)
            }
            out += "}"
        default: out += "null"
        }
    }

    private static func string(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
    }
}
