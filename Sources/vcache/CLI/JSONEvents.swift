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

/// The one envelope of every `--json` line, whatever the command (Docs/json.md):
/// `{"schema":1,"event":"done","time":"2026-11-23T02:15:04.120Z","command":"prefetch",...}`.
/// Keys follow one vocabulary: byte counts end in `_bytes`, durations in `_seconds`, instants are
/// ISO-8601 UTC strings, an HTTP status is `http_status`, a failure is an `error` object.
enum JSONEvents {
    /// Bumped when a key changes meaning or disappears; new keys and events do not bump it.
    static let schema = 1

    static func line(command: String, event: String, _ fields: [String: Any]) -> String {
        var o = fields
        o["schema"] = schema
        o["event"] = event
        o["time"] = Timestamp.iso8601(Date(), milliseconds: true)
        o["command"] = command
        return JSONLines.encode(o) + "\n"
    }
}

/// What a failure was, for people (`message`) and for scripts (`kind`, `http_status`, and the
/// exit code this failure alone gives): the `error` object of Docs/json.md.
struct FailureInfo {
    var kind: String
    var message: String
    var httpStatus: Int?
    var exitCode: Int32

    init(kind: String, message: String, httpStatus: Int? = nil, exitCode: Int32) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
        self.exitCode = exitCode
    }

    /// `context: text`, naming its subject once: a message that opens with the word the context
    /// ends with ("cannot prefetch URL" and "URL: not a playlist...", "URL is a DASH MPD...")
    /// goes on from it ("cannot prefetch URL: not a playlist...", "cannot prefetch URL: it is...").
    static func joined(_ context: String, _ text: String) -> String {
        if let subject = context.split(separator: " ").last, text.hasPrefix(subject) {
            let rest = text.dropFirst(subject.count)
            if rest.hasPrefix(": ") { return context + rest }
            if rest.hasPrefix(" is ") { return context + ": it" + rest }
        }
        return "\(context): \(text)"
    }

    /// Classifies an error thrown by the core; `context` ("cannot list /x") goes before its text.
    init(_ error: any Error, context: String? = nil) {
        let text = context.map { Self.joined($0, "\(error)") } ?? "\(error)"
        switch error {
        case let e as PrefetchError:
            self.init(prefetch: e)
            message = text
        case is EntryLookup.NotCached:
            self.init(kind: "not_found", message: text, exitCode: 1)
        case is UsageError:
            self.init(kind: "usage", message: text, exitCode: 2)
        case let e as SystemError:
            self.init(kind: Self.kind(e), message: text, exitCode: 5)
        case let e as DatabaseError:
            self.init(kind: e.isBusy ? "busy" : e.isCorrupt ? "corrupt_catalog" : "catalog", message: text, exitCode: e.isBusy ? 3 : 5)
        case let e as CacheStore.OpenError:
            switch e {
            case .notWritable: self.init(kind: "disk", message: text, exitCode: 5)
            case .catalog, .newerCatalog: self.init(kind: "catalog", message: text, exitCode: 5)
            case .noCache: self.init(kind: "no_cache", message: text, exitCode: 1)
            case .corruptCatalog, .repairInterrupted: self.init(kind: "corrupt_catalog", message: text, exitCode: 5)
            }
        case StreamExporter.StreamExportError.busy:
            self.init(kind: "busy", message: text, exitCode: 3)
        case let e as Exporter.ExportError:
            switch e {
            case .incomplete: self.init(kind: "incomplete", message: text, exitCode: 1)
            case .expectedDigest: self.init(kind: "checksum_mismatch", message: text, exitCode: 1)
            case .destinationExists, .notRegular: self.init(kind: "exists", message: text, exitCode: 1)
            case .missingFolder: self.init(kind: "not_found", message: text, exitCode: 1)
            case .checksumMismatch: self.init(kind: "corrupt", message: text, exitCode: 5)
            case .crossDevice: self.init(kind: "cross_device", message: text, exitCode: 1)
            case .changedWhileExporting: self.init(kind: "busy", message: text, exitCode: 3)
            case .notFastStartable: self.init(kind: "not_mp4", message: text, exitCode: 1)
            case .io(let s): self.init(kind: Self.kind(s), message: text, exitCode: 5)
            case .stopped: self.init(kind: "stopped", message: text, exitCode: 3)
            }
        default:
            self.init(kind: "failed", message: text, exitCode: 1)
        }
    }

    /// A prefetch failure: its kind by cause, the exit code by what it asks of the user.
    init(prefetch e: PrefetchError) {
        var status: Int?
        let kind: String
        switch e {
        case .invalidURL: kind = "bad_url"
        case .http(let s, _): kind = "http"; status = s
        case .transport(let t):
            switch t.kind {
            case .resolve: kind = "dns"
            case .connect: kind = "connect"
            case .timeout: kind = "timeout"
            case .stalled: kind = "stalled"
            case .partialBody, .receive: kind = "receive"
            case .refusedScheme, .tooManyRedirects, .redirectRefused: kind = "redirect"
            case .other: kind = "network"
            }
        case .badContentRange, .missingLength, .notTheVideo, .unstableVersion: kind = "bad_response"
        case .noProgress: kind = "no_progress"
        case .cutBody: kind = "receive"
        case .unprovenEnd: kind = "unproven_end"
        case .disk(let s): kind = Self.kind(s)
        case .catalog: kind = "catalog"
        case .catalogBusy, .lockBusy, .streamBusy: kind = "busy"
        case .mp4: kind = "not_mp4"
        case .interrupted: kind = "interrupted"
        case .deadline: kind = "deadline"
        case .noRoom: kind = "over_cap"
        case .stream, .rangeOverrun: kind = "bad_stream"
        case .notStarted: kind = "not_started"
        case .notAsCompleted: kind = "digest_mismatch"
        case .checksumMismatch: kind = "checksum_mismatch"
        case .changedUnderRanges, .manifestChangedDuringRun: kind = "changed"
        case .staleManifest: kind = "stale_manifest"
        case .refusedHost: kind = "refused_host"
        }
        self.init(kind: kind, message: e.description, httpStatus: status, exitCode: Int32(e.remedy.rawValue))
    }

    static func kind(_ e: SystemError) -> String {
        if e.isNoSpace { return "disk_full" }
        if e.isPastFileLimit && !PrefetchError.hasFileSizeLimit { return "bad_response" }
        switch e.errno {
        case ENOENT: return "not_found"
        case EEXIST: return "exists"
        default: return "disk"
        }
    }

    var json: [String: Any] {
        var o: [String: Any] = ["kind": kind, "message": message, "exit_code": Int(exitCode)]
        if let httpStatus { o["http_status"] = httpStatus }
        return o
    }
}

/// ISO-8601 UTC without a formatter object (ISO8601DateFormatter is neither cheap nor Sendable).
enum Timestamp {
    static func iso8601(_ date: Date, milliseconds: Bool = false) -> String {
        let seconds = date.timeIntervalSince1970
        var t = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        // Digits by hand: String(format:) costs more than the rest of an `ls --json` line.
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        var s = pad(Int(parts.tm_year) + 1900, 4) + "-" + pad(Int(parts.tm_mon) + 1, 2) + "-" + pad(Int(parts.tm_mday), 2)
            + "T" + pad(Int(parts.tm_hour), 2) + ":" + pad(Int(parts.tm_min), 2) + ":" + pad(Int(parts.tm_sec), 2)
        if milliseconds { s += "." + pad(min(999, Int((seconds - seconds.rounded(.down)) * 1000)), 3) }
        return s + "Z"
    }
}
