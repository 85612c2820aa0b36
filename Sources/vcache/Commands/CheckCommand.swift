#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import VCacheCore

/// `vcache check`: is what a list asks for cached now? (`wget --spider` or `rclone check` for a
/// cache: no network, exit 0 only when every item is ready.)
enum CheckCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "check",
        abstract: "say whether what a list asks for (bytes or seconds of videos, HLS and DASH streams) is cached now (no network); exit 0 only when all of it is",
        usage: "check [URL...] [-i FILE] [--bytes SIZE | --seconds N | --range A-B] [--variant V] [--audio LANG]",
        discussion: """
        Reads URLs and a list as prefetch does (a line's own 2M or 10s wins; a line's md5=HEX must
        be the digest the cached copy was checked against and matched) and says for each
        whether those bytes, or those seconds of an MP4 (its moov and the samples they need), are
        in the cache: what a player would find offline. For an HLS playlist, whether what prefetch
        would fetch of the stream (the chosen variant, its audio, init sections, keys and the
        segments that reach N seconds, or all of them) is cached, read from the cached playlists.
        Reads only. Exit 0 when every item is ready, 1 when one is not (or a line of the list is
        malformed), 2 for a usage error.
        """,
        minPositionals: 0, maxPositionals: nil)

    struct Options: OptionGroup {
        var input = Option("input", short: "i", .file, help: "read URLs from FILE (- for stdin), as prefetch reads it")
        var bytes = Option("bytes", .size(), help: "each video's first SIZE (and, for an MP4, its moov)")
        var range = Repeated("range", .byteRange, help: "bytes A to B inclusive; A- to the end; -N the last N (repeatable)")
        var seconds = Option("seconds", .duration.named("N"), help: "the first N seconds of each MP4, or of each HLS or DASH stream (its chosen variant or Representation and audio)")
        var noMoov = Flag("no-moov", help: "with --bytes: the bytes alone, not the moov too")
        var variant = Option("variant", .variant, help: "HLS and DASH: which variant of a master playlist, or video Representation of an MPD (default best: the highest bandwidth), as prefetch chooses")
        var audio = Option("audio", .language, help: "HLS and DASH: the audio rendition or AdaptationSet in this language (default: the DEFAULT=YES one; DASH: Role main, else the first)")
        var allowHost = Repeated("allow-host", .originRule, help: "HLS and DASH: a host (and port) a stream's members may come from besides its playlists' or MPD's own, as given to prefetch (repeatable)")
        var keys = KeyOptions()
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        let items: [PrefetchItem], inputErrors: [String]
        do {
            (items, inputErrors) = try PrefetchCommand.requestedItems(.init(bytes: args.bytes, ranges: args.range, seconds: args.seconds,
                                                                            noMoov: args.noMoov, input: args.input, urls: args.positionals))
            guard !items.isEmpty || !inputErrors.isEmpty || args.input != nil else {
                throw UsageError("'check' needs a URL (or -i FILE); usage: vcache \(configuration.usage)")
            }
        } catch {
            console.error(error)
            return 2
        }
        for e in inputErrors { console.error(e, kind: "bad_input") }
        guard let store = openStore(args, console: console, readOnly: true) else { return StoreOpening.failure }
        var options = PrefetchOptions()
        do { try Settings.apply(store: store, Settings.Overrides(keys: args.keys), to: &options) } catch { console.error(error); return 2 }
        let plan = HLSPlan(variant: args.variant ?? options.hlsVariant, audio: args.audio ?? options.hlsAudio)
        var allowed = AllowedOrigins()
        for rule in args.allowHost { allowed.add(host: rule.host, port: rule.port) }
        var rows = [["STATE", "URL", "DETAIL"]]
        var notReady = 0
        for item in items {
            let key = options.keyRules.key(for: item.url)
            let entry = (try? store.catalog.entry(key: key)) ?? nil
            let data = entry.flatMap { try? store.openDataForReading(key: $0.key) }
            defer { data?.close() }
            // An HLS playlist: what prefetch would fetch of its stream, from the cached playlists.
            // A DASH MPD (by its content, never its URL): the same, from the cached MPD.
            let stream = entry.flatMap { Readiness.ofStream(item, entry: $0, store: store, plan: plan, keyRules: options.keyRules, allowedHosts: allowed)
                ?? Readiness.ofDASHStream(item, entry: $0, store: store, plan: plan, keyRules: options.keyRules, allowedHosts: allowed) }
            var readiness = stream ?? Readiness.of(item, entry: entry) { offset, count in
                guard let data else { throw SystemError("read", path: store.dataPath(key), errno: ENOENT) }
                return try data.bytes(count, at: offset)
            }
            // A stream a run fetched members of and has not judged against the origin's manifest yet.
            if readiness.isReady, stream != nil, (try? store.catalog.rootRole(key)) == .manifestUnconfirmed {
                readiness = .missing(bytes: nil, why: StreamExporter.unconfirmed)
            }
            // A line's checksum the cached copy is not known to have: not ready either.
            if readiness.isReady, let entry, !item.expected.isEmpty,
               let why = Readiness.ofChecksums(item, entry: entry, checks: (try? store.catalog.expectedDigests(key: key)) ?? []) {
                readiness = why
            }
            let (state, detail): (String, String) = switch readiness {
            case .ready: ("ready", Self.asked(item))
            case .missing(_, let why): ("missing", why)
            case .absent: ("absent", "not in the cache")
            }
            if !readiness.isReady { notReady += 1 }
            if args.json {
                var o: [String: Any] = ["url": item.url, "state": state, "detail": detail]
                if case .missing(let bytes?, _) = readiness { o["missing_bytes"] = bytes }
                console.event("checked", o)
            } else {
                rows.append([state, item.url, detail])
            }
        }
        let code: Int32 = notReady == 0 && inputErrors.isEmpty ? 0 : 1
        if args.json {
            console.event("summary", ["items": items.count, "ready": items.count - notReady, "not_ready": notReady,
                                      "bad_input_lines": inputErrors.count, "exit_code": Int(code)])
        } else {
            if items.count > 0 { console.out(Table.render(rows)) }
            console.out("\(items.count - notReady) of \(items.count) ready" + (inputErrors.isEmpty ? "" : "; \(inputErrors.count) bad input line\(inputErrors.count == 1 ? "" : "s")") + "\n")
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
