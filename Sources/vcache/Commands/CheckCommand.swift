import Foundation
import VCacheCore

/// `vcache check`: is what a list asks for cached now? (`wget --spider` or `rclone check` for a
/// cache: no network, exit 0 only when every item is ready.)
enum CheckCommand: VCacheCommand {
    static let spec = CommandSpec(
        name: "check",
        abstract: "say whether what a list asks for is cached now (no network); exit 0 only when all of it is",
        usage: "check [URL...] [-i FILE] [--bytes SIZE | --seconds N | --range A-B]",
        discussion: """
        Reads URLs and a list as prefetch does (a line's own 2M or 10s wins) and says for each
        whether those bytes, or those seconds of an MP4 (its moov and the samples they need), are
        in the cache: what a player would find offline. Reads only. Exit 0 when every item is
        ready, 1 when one is not (or a line of the list is malformed), 2 for a usage error.
        """,
        options: [
            .value("input", short: "i", "FILE", "read URLs from FILE (- for stdin), as prefetch reads it"),
            .value("bytes", "SIZE", "each video's first SIZE (and, for an MP4, its moov)"),
            .repeated("range", "A-B", "bytes A to B inclusive; A- to the end; -N the last N (repeatable)"),
            .value("seconds", "N", "the first N seconds of each MP4"),
            .flag("no-moov", "with --bytes: the bytes alone, not the moov too"),
            .flag("key-ignore-query", "URLs differing only in their query are one entry (signed URLs)"),
            .repeated("key-strip-param", "NAME", "ignore query parameter NAME when keying (repeatable)"),
            .flag("json", "a checked event per URL, then a summary (Docs/json.md)"),
        ],
        minPositionals: 0, maxPositionals: nil)

    static func run(_ args: ParsedArguments, console: Console) -> Int32 {
        let items: [PrefetchItem], inputErrors: [String]
        do {
            (items, inputErrors) = try PrefetchCommand.requestedItems(args)
            guard !items.isEmpty || !inputErrors.isEmpty || args.value("input") != nil else {
                throw UsageError("'check' needs a URL (or -i FILE); usage: vcache \(spec.usage)")
            }
        } catch {
            console.error(error)
            return 2
        }
        for e in inputErrors { console.error(e, kind: "bad_input") }
        guard let store = openStore(args, console: console, readOnly: true) else { return StoreOpening.failure }
        var options = PrefetchOptions()
        do { try Settings.apply(store: store, args: args, to: &options) } catch { console.error(error); return 2 }
        var rows = [["STATE", "URL", "DETAIL"]]
        var notReady = 0
        for item in items {
            let key = options.keyRules.key(for: item.url)
            let entry = (try? store.catalog.entry(key: key)) ?? nil
            let data = entry.flatMap { try? store.openDataForReading(key: $0.key) }
            defer { data?.close() }
            let readiness = Readiness.of(item, entry: entry) { offset, count in
                guard let data else { throw SystemError("read", path: store.dataPath(key), errno: ENOENT) }
                return try data.bytes(count, at: offset)
            }
            let (state, detail): (String, String) = switch readiness {
            case .ready: ("ready", Self.asked(item))
            case .missing(_, let why): ("missing", why)
            case .absent: ("absent", "not in the cache")
            }
            if !readiness.isReady { notReady += 1 }
            if args.flag("json") {
                var o: [String: Any] = ["url": item.url, "state": state, "detail": detail]
                if case .missing(let bytes?, _) = readiness { o["missing_bytes"] = bytes }
                console.event("checked", o)
            } else {
                rows.append([state, item.url, detail])
            }
        }
        let code: Int32 = notReady == 0 && inputErrors.isEmpty ? 0 : 1
        if args.flag("json") {
            console.event("summary", ["items": items.count, "ready": items.count - notReady, "not_ready": notReady,
                                      "bad_input_lines": inputErrors.count, "exit_code": Int(code)])
        } else {
            if items.count > 0 { console.out(Table.render(rows)) }
            console.out("\(items.count - notReady) of \(items.count) ready" + (inputErrors.isEmpty ? "" : "; \(inputErrors.count) bad input lines") + "\n")
        }
        return code
    }

    /// What an item asked for, in the words of the command line.
    static func asked(_ item: PrefetchItem) -> String {
        if case .seconds(let s)? = item.mp4 { return "its first \(Units.formatDuration(s)) are cached" }
        if item.requests.isEmpty || item.requests == [.whole] { return "cached whole" }
        return "the requested bytes are cached"
    }
}
