#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// Renders prefetch events: live bars on a TTY, one log line per finished URL otherwise,
/// JSON lines with `--json`, errors only with `-q`. Called on the fetch loop's thread only.
final class PrefetchReporter {
    enum Mode { case bars, lines, json, quiet }

    private struct Active {
        var url: String
        var fetched: Int64 = 0
        var toFetch: Int64?
        var started = ContinuousClock.now
        var note = ""
    }

    let mode: Mode
    let console: Console
    private var active: [String: Active] = [:]
    private var order: [String] = []
    private var drawnLines = 0
    private var lastDraw = ContinuousClock.now - .seconds(1)
    private var lastJSONProgress: [String: ContinuousClock.Instant] = [:]
    private var lastProgressLine: [String: ContinuousClock.Instant] = [:]
    /// In `lines` mode, a plain progress line per download this often (rclone's `--stats`).
    var progressInterval: Duration = .seconds(10)
    private let runStart = ContinuousClock.now
    private(set) var totalFetched: Int64 = 0
    private var finishedCount = 0
    var expectedCount = 1

    init(mode: Mode, console: Console) {
        self.mode = mode
        self.console = console
    }

    func handle(_ event: PrefetchEvent) {
        switch event {
        case .started(let url, let key, let length, let cached, let toFetch):
            active[url] = Active(url: url, toFetch: toFetch)
            order.append(url)
            if mode == .json {
                var o: [String: Any] = ["url": url, "key": key, "already_cached_bytes": cached]
                if let length { o["length_bytes"] = length }
                if let toFetch { o["to_fetch_bytes"] = toFetch }
                console.event("start", o)
            }
            redraw(force: true)
        case .waitingForLock(let url):
            switch mode {
            case .json: console.event("waiting", ["url": url])
            case .bars, .lines: log("waiting: another vcache process is writing \(url)")
            case .quiet: break
            }
        case .progress(let url, let fetched, let toFetch):
            active[url]?.fetched = fetched
            active[url]?.toFetch = toFetch
            if mode == .json {
                let now = ContinuousClock.now
                if now - (lastJSONProgress[url] ?? runStart - .seconds(1)) >= .milliseconds(250) {
                    lastJSONProgress[url] = now
                    var o: [String: Any] = ["url": url, "fetched_bytes": fetched]
                    if let toFetch { o["to_fetch_bytes"] = toFetch }
                    console.event("progress", o)
                }
            }
            if mode == .lines, let a = active[url] {
                let now = ContinuousClock.now
                let last = lastProgressLine[url] ?? a.started
                if now - last >= progressInterval {
                    lastProgressLine[url] = now
                    let seconds = max(0.001, (now - a.started).inSeconds)
                    let of = toFetch.map { t in " of \(Units.formatSize(t)) (\(t > 0 ? Int(Double(fetched) * 100 / Double(t)) : 100)%)" } ?? ""
                    log("progress \(url): \(Units.formatSize(fetched))\(of), \(Units.formatSize(Checked.int64(Double(fetched) / seconds) ?? 0))/s")
                }
            }
            redraw(force: false)
        case .videoChanged(let url, let reason, let changed):
            switch mode {
            case .json: console.event("changed", ["url": url, "reason": reason])
            case .bars, .lines:
                log(changed ? "note: \(url) changed on the origin (\(reason)); cached bytes of the old version were dropped"
                    : "note: \(url): cached bytes dropped and fetched again: \(reason)")
            case .quiet: break
            }
        case .note(let url, let message):
            switch mode {
            case .json: console.event("note", ["url": url, "message": message])
            case .bars, .lines: log("note: \(url): \(message)")
            case .quiet: break
            }
        case .trace(let url, let message):
            switch mode {
            case .json: console.event("trace", ["url": url, "message": message])
            case .bars, .lines, .quiet: console.err(Console.oneLine("\(url): \(message)") + "\n")
            }
        case .retrying(let url, let attempt, let delay, let reason):
            switch mode {
            case .json:
                console.event("retry", ["url": url, "attempt": attempt, "delay_seconds": Self.seconds(delay), "reason": reason])
            case .bars, .lines: log("retry \(attempt) in \(Units.formatDuration(delay)): \(url): \(reason)")
            case .quiet: break
            }
        case .evicted(let urls, let freed, let usage, let overCap):
            switch mode {
            case .json:
                console.event("evicted", ["urls": urls, "freed_bytes": freed, "usage_bytes": usage, "over_cap": overCap])
            case .bars, .lines:
                if !urls.isEmpty { log("evicted \(urls.count) \(urls.count == 1 ? "entry" : "entries") (\(Units.formatSize(freed))) to make room: \(urls.joined(separator: ", "))") }
                if overCap { log("warning: the cache uses \(Units.formatSize(usage)), over what --max-size or min-free allow: what is left is pinned, in use by another process, or the catalog itself") }
            case .quiet:
                if overCap { console.error("the cache uses \(Units.formatSize(usage)), over what --max-size or min-free allow: what is left is pinned, in use by another process, or the catalog itself", kind: "over_cap") }
            }
        case .finished(let r):
            active.removeValue(forKey: r.url)
            order.removeAll { $0 == r.url }
            finishedCount += 1
            totalFetched += r.fetchedBytes
            finished(r)
        }
    }

    private func finished(_ r: PrefetchResult) {
        switch mode {
        case .json:
            var o: [String: Any] = ["url": r.url, "key": r.key, "fetched_bytes": r.fetchedBytes, "already_cached_bytes": r.alreadyCachedBytes,
                                    "complete": r.complete, "elapsed_seconds": Self.seconds(r.elapsed)]
            if let length = r.length { o["length_bytes"] = length }
            if let e = r.error { o["error"] = FailureInfo(prefetch: e).json }
            console.event(r.error == nil ? "done" : r.stoppedByDeadline ? "stopped" : "failed", o)
        case .quiet:
            if let e = r.error, !r.stoppedByDeadline {
                var failure = FailureInfo(e, context: "cannot prefetch \(r.url)")
                if r.newCopyDropped, let text = r.errorText { failure.message = FailureInfo.joined("cannot prefetch \(r.url)", text) }
                console.error(failure)
            }
        case .bars, .lines:
            if r.stoppedByDeadline {
                // Planned, not a failure: said as what it is.
                log(r.newCopyDropped ? "stopped \(r.url) at the --max-time deadline: the new copy being fetched was dropped and the cached copy kept; the next run fetches it again"
                    : "stopped \(r.url) at the --max-time deadline: \(Units.formatSize(r.fetchedBytes)) fetched and kept; the next run resumes")
            } else if let e = r.error {
                clearBars()
                // A run logged by cron gets the time on every line, failures included.
                let stamp = mode == .lines ? Self.timestamp() + " " : ""
                console.err("\(stamp)vcache: " + Console.oneLine(FailureInfo.joined("cannot prefetch \(r.url)", r.errorText ?? "\(e)")) + "\n")
                redraw(force: true)
            } else if mode == .lines || expectedCount > 1 {
                let state = r.complete ? "complete" : "partial"
                log("ok \(r.url): fetched \(Units.formatSize(r.fetchedBytes)), \(Units.formatSize(r.alreadyCachedBytes)) already cached, \(state), \(Units.formatDuration(r.elapsed))")
            }
        }
    }

    /// A line above the bars (or a plain line, with a timestamp, when not on a TTY).
    /// `text` may embed what an origin sent (a URL an MPD or playlist names): escaped to one line.
    private func log(_ raw: String) {
        let text = Console.oneLine(raw)
        if mode == .lines {
            console.err("\(Self.timestamp()) \(text)\n")
        } else {
            clearBars()
            console.err(text + "\n")
            redraw(force: true)
        }
    }

    static func timestamp() -> String { Timestamp.iso8601(Date()) }

    /// Seconds with millisecond precision, for JSON.
    static func seconds(_ s: Double) -> Double { (s * 1000).rounded() / 1000 }

    private func clearBars() {
        guard mode == .bars, drawnLines > 0 else { return }
        var s = ""
        for _ in 0..<drawnLines { s += "\u{1B}[1A\u{1B}[2K" }
        console.err("\r" + s)
        drawnLines = 0
    }

    private func redraw(force: Bool) {
        guard mode == .bars else { return }
        let now = ContinuousClock.now
        guard force || now - lastDraw >= .milliseconds(100) else { return }
        lastDraw = now
        let width = console.width
        var lines: [String] = []
        for url in order.prefix(12) {
            guard let a = active[url] else { continue }
            lines.append(Self.bar(a.url, fetched: a.fetched, toFetch: a.toFetch, elapsed: (now - a.started).inSeconds, width: width))
        }
        if expectedCount > 1 {
            lines.append("  \(finishedCount)/\(expectedCount) done, \(Units.formatSize(totalFetched + active.values.reduce(0) { $0 + $1.fetched })) fetched")
        }
        var s = ""
        for _ in 0..<drawnLines { s += "\u{1B}[1A\u{1B}[2K" }
        s = "\r" + s
        for l in lines { s += l + "\n" }
        console.err(s)
        drawnLines = lines.count
    }

    func close() { clearBars() }

    /// A line about the whole run, not one URL (the key rules' note): as notes are, none when quiet;
    /// with --json on stderr as the other lines outside the events.
    func runNote(_ line: String) {
        switch mode {
        case .bars, .lines: log(line)
        case .json: console.err(Console.oneLine(line) + "\n")
        case .quiet: break
        }
    }

    /// `name  [=====>     ]  42%  1.2 MiB/2.9 MiB  5.1 MiB/s  ETA 0.3s`
    static func bar(_ url: String, fetched: Int64, toFetch: Int64?, elapsed: Double, width: Int) -> String {
        let rate = elapsed > 0 ? Double(fetched) / elapsed : 0
        var tail = "  \(Units.formatSize(fetched))"
        var fraction: Double?
        if let total = toFetch, total > 0 {
            fraction = min(1, Double(fetched) / Double(total))
            tail = String(cFormat: " %3ld%%", Int((fraction! * 100).rounded(.down))) + "  \(Units.formatSize(fetched))/\(Units.formatSize(total))"
        }
        tail += "  \(Units.formatSize(Checked.int64(rate) ?? 0))/s"
        if let total = toFetch, rate > 0, total > fetched {
            tail += "  ETA " + Units.formatDuration(Double(total - fetched) / rate)
        }
        let name = Console.oneLine(url.split(separator: "/").last.map(String.init) ?? url)
        let barWidth = max(10, min(30, width - tail.count - 24))
        let filled = Int((fraction ?? 0) * Double(barWidth))
        let bar = "[" + String(repeating: "=", count: filled) + (filled < barWidth ? ">" + String(repeating: " ", count: barWidth - filled - 1) : "") + "]"
        let shown = name.count > 20 ? String(name.prefix(19)) + "…" : name.padded(toLength: 20)
        return String((shown + " " + bar + tail).prefix(width - 1))
    }
}
