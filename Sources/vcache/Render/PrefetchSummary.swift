import VCacheCore

/// The closing report of a prefetch run.
struct Summary {
    var results: [PrefetchResult]
    var elapsed: Double
    var inputErrors: Int

    /// Items the --max-time deadline stopped (planned: what arrived is kept, a rerun resumes).
    var stopped: Int { results.filter(\.stoppedByDeadline).count }
    var failed: Int { results.filter { !$0.succeeded && !$0.stoppedByDeadline }.count }

    /// 0 when every item succeeded; else by what the failures ask for (Docs/cli.md, exit codes):
    /// 5 fix this machine, 4 fix the origin or the URL, 1 other (a bad line in the list), 3 try
    /// later. The most pressing one wins.
    var exitCode: Int32 {
        var worst: PrefetchError.Remedy?
        for r in results { if let e = r.error { worst = max(worst ?? e.remedy, e.remedy) } }
        if inputErrors > 0 { worst = max(worst ?? .other, .other) }
        return Int32(worst?.rawValue ?? 0)
    }
    var fetched: Int64 { results.reduce(0) { $0 + $1.fetchedBytes } }
    var cached: Int64 { results.reduce(0) { $0 + $1.alreadyCachedBytes } }
    /// URLs given again for an entry already in the run: folded into its one result.
    var merged: Int { results.reduce(0) { $0 + $1.mergedURLs.count } }
    /// HLS members refused for their host (each said on its own line as it was decided).
    var refused: Int { results.reduce(0) { $0 + $1.refusedMembers } }

    var line: String {
        let rate = elapsed > 0 ? Units.formatSize(Checked.int64(Double(fetched) / elapsed) ?? 0) + "/s" : "-"
        var head = ""
        if results.count > 1 || failed > 0 || stopped > 0 || inputErrors > 0 || merged > 0 {
            head = "\(results.count - failed - stopped) done, " + (stopped > 0 ? "\(stopped) stopped at --max-time, " : "") + "\(failed) failed"
                + (inputErrors > 0 ? ", \(inputErrors) bad input line\(inputErrors == 1 ? "" : "s")" : "")
                + (merged > 0 ? ", \(merged) duplicate \(merged == 1 ? "URL" : "URLs") merged" : "")
                + (refused > 0 ? " (\(refused) stream \(refused == 1 ? "member" : "members") refused: on a host not the stream's own; --allow-host HOST allows one)" : "") + "; "
        }
        if fetched == 0 && failed == 0 && stopped == 0 {
            return head + "nothing to fetch: \(Units.formatSize(cached)) already cached (\(Units.formatDuration(elapsed)))"
        }
        if fetched == 0 {
            return head + "nothing fetched, \(Units.formatSize(cached)) already cached, in \(Units.formatDuration(elapsed))"
        }
        return head + "fetched \(Units.formatSize(fetched)), \(Units.formatSize(cached)) already cached, in \(Units.formatDuration(elapsed)) (\(rate))"
    }

    /// For a batch with failures: each failed URL and why, again, just above the summary line,
    /// so the end of a long cron log says everything that needs attention.
    var recap: String {
        let failures = results.filter { !$0.succeeded && !$0.stoppedByDeadline }
        guard results.count > 1, !failures.isEmpty else { return "" }
        // A stream failed by a member names the member: its own URL may well have answered.
        return "failed:\n" + failures.map { r in
            "  " + Console.oneLine("\(r.url): " + (r.failedMember.map { "member \($0): " } ?? "") + (r.errorText ?? "")) + "\n"
        }.joined()
    }

    var json: [String: Any] {
        ["done": results.count - failed - stopped, "failed": failed, "stopped": stopped, "fetched_bytes": fetched, "already_cached_bytes": cached,
         "elapsed_seconds": PrefetchReporter.seconds(elapsed), "bad_input_lines": inputErrors, "merged_urls": merged, "refused_members": refused, "exit_code": Int(exitCode),
         "failures": results.filter { !$0.stoppedByDeadline }.compactMap { r in
             r.error.map { e -> [String: Any] in
                 // A stream failed by one of its members names it, as the text recap does.
                 var f: [String: Any] = ["url": r.url, "error": FailureInfo(prefetch: e).json]
                 if let member = r.failedMember { f["member"] = member }
                 return f
             }
         }]
    }
}
