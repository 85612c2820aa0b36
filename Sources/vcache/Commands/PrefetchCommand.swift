import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `vcache prefetch URL... [options]`: make sure the asked-for bytes are in the cache.
enum PrefetchCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "prefetch",
        abstract: "download the missing bytes of videos into the cache",
        usage: "prefetch URL... [--seconds N | --bytes SIZE | --range A-B...] [options]",
        discussion: """
        Fetches only what is missing (requested ranges minus cached ranges) and resumes where an
        earlier run stopped. Without --seconds, --bytes or --range the whole video is fetched.
        For an MP4, --seconds N caches exactly what a player needs for its first N seconds (the
        moov wherever it is, and those seconds' samples), and --bytes also fetches the moov when it
        lies outside the head.
        --checksum ALGO=HEX (or a list line's md5=HEX) is the digest the whole video must have:
        checked when it completes (in this run or a later one, from the arriving bytes); a video
        that does not have it is dropped, fetched whole once more, then fails with exit 4.
        SIZE: 512K, 2M, 1.5G (binary) or 2MB (decimal). DURATION: 30s, 5m, 2h.
        """,
        minPositionals: 0, maxPositionals: nil, handlesQuiet: true)

    struct Options: OptionGroup {
        var seconds = Option("seconds", .duration.named("N"), help: "MP4: cache the moov and every sample of the first N seconds (e.g. 10, 2.5, 10s)")
        var bytes = Option("bytes", .size(), help: "make sure the first SIZE bytes are cached (and an MP4's moov, wherever it is)")
        var noMoov = Flag("no-moov", help: "with --bytes, do not also fetch an MP4's moov that lies outside the head")
        var range = Repeated("range", .byteRange, help: "bytes A to B inclusive; A- to the end; -N the last N (repeatable)")
        var input = Option("input", short: "i", .file, help: "read URLs from FILE (- for stdin): one per line, optionally followed by a size (2M) or seconds (10s) and checksums (md5=HEX)")
        var checksum = Repeated("checksum", .checksum, help: "the digest the whole video must have (md5, sha1, sha256, sha512; repeatable): checked when it completes; a mismatch is fetched once more, then exit 4")
        var jobs = Option("jobs", short: "j", .count(1...64), help: "parallel downloads (default 4)")
        var connections = Option("connections", .count(1...64), help: "fetch one video's missing bytes over up to N connections at once, in pieces of at least 4 MiB, under a strong ETag or Last-Modified only (default 1, or config connections; -j times N is at most 64)")
        var header = Repeated("header", short: "H", .text("'NAME: VALUE'"), help: "extra request header, e.g. auth or cookie (repeatable); @FILE reads them from FILE")
        var userAgent = Option("user-agent", .headerValue("STRING"), help: "User-Agent header (default vcache/\(VCacheVersion.string))")
        var connectTimeout = Option("connect-timeout", .duration, help: "give up connecting after DURATION (default 15s)")
        var timeout = Option("timeout", .duration, help: "give up when no byte arrives for DURATION (default 30s)")
        var retries = Option("retries", .count(0...Int.max), help: "retries after connection errors, timeouts, 5xx, 408, 429 (default 3)")
        var maxTime = Option("max-time", .duration, help: "stop the whole run cleanly after DURATION; a rerun resumes")
        var limitRate = Option("limit-rate", .size(minimum: 1024), help: "cap the total download rate, e.g. 2M (per second, all downloads together)")
        var maxSize = Option("max-size", .size(), help: "keep the cache under SIZE by evicting least recently used entries (default: config max-size)")
        var variant = Option("variant", .variant, help: "HLS and DASH: which variant of a master playlist, or video Representation of an MPD (default best: the highest bandwidth)")
        var audio = Option("audio", .language, help: "HLS and DASH: the audio rendition or AdaptationSet in this language (default: the DEFAULT=YES one; DASH: Role main, else the first)")
        var allowHost = Repeated("allow-host", .originRule, help: "HLS and DASH: a host (and port) a stream's members may come from besides its playlists' or MPD's own, redirects included (repeatable)")
        var minFree = Option("min-free", .size(), help: "keep SIZE free on the cache's disk by evicting least recently used entries (default: config min-free)")
        var keys = KeyOptions()
        var noWait = Flag("no-wait", help: "skip an entry (or a stream) another vcache process is writing instead of waiting")
        var origin = OriginOptions()
        var progress = Option<ProgressDisplay>("progress", help: "progress display: a bar on a terminal, plain lines in logs (default auto)")
        var stats = Option("stats", .duration, help: "with plain lines, a progress line per download this often (default 10s)")
    }

    enum ProgressDisplay: String, CLIChoice {
        case auto, bar, lines
        case off = "none"

        var help: String {
            switch self {
            case .auto: "a bar on a terminal, plain lines otherwise"
            case .bar: "a bar redrawn in place"
            case .lines: "plain timestamped progress lines, as in a log"
            case .off: "no progress (the ok and failure lines and the summary stay)"
            }
        }
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        var items: [PrefetchItem]
        var options: PrefetchOptions
        var inputErrors: [String] = []
        do {
            options = try makeOptions(args)
            var list: [PrefetchItem]
            (list, inputErrors) = try requestedItems(Asked(bytes: args.bytes, ranges: args.range, seconds: args.seconds,
                                                           noMoov: args.noMoov, input: args.input, urls: args.positionals,
                                                           checksums: args.checksum))
            guard !list.isEmpty || !inputErrors.isEmpty else {
                if let input = args.input {
                    // An empty list is a quiet night for cron, not a usage error.
                    if args.json {
                        console.event("summary", Summary(results: [], elapsed: 0, inputErrors: 0).json)
                    } else if !args.quiet {
                        console.err("no URLs in \(input == "-" ? "stdin" : input); nothing to do\n")
                    }
                    return 0
                }
                throw UsageError("'prefetch' needs a URL (or -i FILE); usage: vcache \(configuration.usage)")
            }
            items = list
        } catch {
            console.error(error)
            return 2
        }
        for e in inputErrors { console.error(e, kind: "bad_input") }
        // Below it a download runs out of descriptors, and libdispatch ends a process that does
        // (SIGILL; Docs/serve.md, "Descriptors"): said once, before anything is opened.
        let usable = Resources.usableDescriptors()
        guard usable.usable >= PrefetchOptions.minimumDescriptors else {
            console.error("cannot prefetch: only \(Resources.describe(usable)), and prefetch needs at least \(PrefetchOptions.minimumDescriptors): raise the limit (ulimit -n)",
                          kind: "failed", exitCode: 1)
            return 1
        }
        guard let store = openStore(args, console: console) else { return StoreOpening.failure }
        do {
            try Settings.apply(store: store, Settings.Overrides(maxSize: args.maxSize, minFree: args.minFree, connections: args.connections, usesConnections: true, keys: args.keys), to: &options)
        } catch {
            console.error(error)
            return 2
        }
        // Lines naming one video (by its key) with two values of a checksum: one file cannot
        // have both, and a later value would otherwise be dropped without a word.
        let keyRules = options.keyRules
        let (kept, conflicts) = conflictingChecksums(items, list: args.input == "-" ? "stdin" : args.input ?? "") { keyRules.key(for: $0) }
        items = kept
        for e in conflicts { console.error(e, kind: "bad_input") }
        inputErrors += conflicts

        var mode: PrefetchReporter.Mode = args.json ? .json : args.quiet ? .quiet : console.stderrIsTTY ? .bars : .lines
        // TERM=dumb cannot redraw in place: plain lines.
        if mode == .bars && ProcessInfo.processInfo.environment["TERM"] == "dumb" { mode = .lines }
        var interval: Duration = .seconds(10)
        switch args.progress ?? .auto {
        case .auto: break
        case .bar: if mode != .json && mode != .quiet { mode = .bars }
        case .lines: if mode != .json && mode != .quiet { mode = .lines }
        case .off:
            // No bar and no progress lines; the ok/failure lines and the summary stay.
            if mode == .bars { mode = .lines }
            interval = .seconds(Int64(Units.maxDuration))
        }
        if let s = args.stats { interval = .milliseconds(Int64(s * 1000)) }
        let reporter = PrefetchReporter(mode: mode, console: console)
        if let line = Self.keyRulesNote(given: options.keyRules, config: Settings.keyRules(store: store)) { reporter.runNote(line) }
        reporter.progressInterval = interval
        let stopFlag = Fetcher.StopFlag()
        let prefetcher = Prefetcher(store: store, options: options, stopFlag: stopFlag) { reporter.handle($0) }
        reporter.expectedCount = prefetcher.distinct(items).count
        let signals = SignalTrap { stopFlag.stop(reason: $0) }
        Console.brokenPipe.withLock { $0 = { signals.raiseFromWrite(SIGPIPE) { stopFlag.stop(reason: $0) } } }

        let start = ContinuousClock.now
        let results = prefetcher.run(items)
        reporter.close()
        let elapsed = (ContinuousClock.now - start).inSeconds
        let summary = Summary(results: results, elapsed: elapsed, inputErrors: inputErrors.count)
        switch mode {
        case .json:
            // A run a signal stopped ends by that signal (128 + its number): its summary says so.
            var json = summary.json
            if let signal = signals.caught, stopFlag.reason == signal { json["exit_code"] = 128 + Int(signal) }
            console.event("summary", json)
        case .quiet: break
        case .bars, .lines: console.err(summary.recap + summary.line + "\n")
        }
        if let signal = signals.caught, stopFlag.reason == signal { signals.dieBy(signal) }
        return summary.exitCode
    }

    /// `-H` values: `Name: value`, or `@FILE` for such lines in a file (secrets out of `ps` and
    /// crontab); blank lines and `#` comments in the file are skipped.
    static func headers(_ values: [String]) throws -> [String] {
        var out: [String] = []
        for h in values {
            // A line from @FILE is named by its number, never shown: the file exists to keep
            // secrets out of `ps` and logs, and a malformed line may still hold one.
            var lines: [(text: String, place: String?)] = [(h, nil)]
            if h.hasPrefix("@") {
                let path = String(h.dropFirst())
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw UsageError("cannot read headers from '\(path)' for -H @FILE: no such file or not readable")
                }
                lines = String(decoding: data, as: UTF8.self).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
                    .enumerated().map { (String($1).trimming(.whitespaces), "line \($0 + 1) of '\(path)'") }
                    .filter { !$0.text.isEmpty && !$0.text.hasPrefix("#") }
            }
            for (line, place) in lines {
                // A CR, LF or NUL would end the line on the wire and start another (a header the
                // user never wrote): no control character but a tab is taken.
                if line.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7f }) {
                    if let place { throw UsageError("invalid header on \(place) for -H @FILE: it holds a control character (such as NUL or ESC); remove it") }
                    throw UsageError("invalid header '\(Console.escaped(line))' for -H: it holds a control character (CR, LF or NUL); give one 'Name: value' per -H")
                }
                guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                      line[..<colon].unicodeScalars.allSatisfy(Self.isTokenCharacter) else {
                    if let place { throw UsageError("invalid header on \(place) for -H @FILE; use 'Name: value' (a header name, then a colon)") }
                    throw UsageError("invalid header '\(Console.escaped(line))' for -H; use 'Name: value'")
                }
                let name = line[..<colon].lowercased()
                let shown = place.map { "the \(line[..<colon]) header on \($0)" } ?? "-H '\(line)'"
                if name == "accept-encoding" || name == "te" {
                    // Stored bytes are the video's own: an encoded body would be cached as video.
                    throw UsageError("vcache stores the video's own bytes and asks for no encoding: drop \(shown)")
                }
                if ["range", "if-range", "content-length", "transfer-encoding"].contains(name) {
                    throw UsageError("vcache sets \(line[..<colon]) itself (ranges come from --bytes, --seconds and --range; a GET has no body): drop \(shown)")
                }
                out.append(line)
            }
        }
        return out
    }

    /// RFC 9110 §5.6.2: a header name is a token.
    static func isTokenCharacter(_ c: Unicode.Scalar) -> Bool {
        c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(c))
    }

    /// What a command line asks for, typed: `prefetch`'s and `check`'s options of the same names.
    struct Asked {
        var bytes: Int64?
        var ranges: [RangeRequest]
        var seconds: Double?
        var noMoov: Bool
        var input: String?
        var urls: [String]
        /// `--checksum`: the one URL given on the command line must have these digests.
        var checksums: [ExpectedDigest] = []
    }

    /// What the command line asks for: its URLs and `-i` list, each with `--bytes`, `--range`,
    /// `--seconds` (a list line's own size or seconds win), and the list's bad lines. Shared with
    /// `check`, so "is it cached" means what `prefetch` would fetch.
    static func requestedItems(_ asked: Asked) throws -> (items: [PrefetchItem], inputErrors: [String]) {
        var inputErrors: [String] = []
        var requests: [RangeRequest] = []
        var goal: MP4Goal?
        if let n = asked.bytes {
            guard n > 0 else { throw UsageError("--bytes 0 asks for nothing; give a size such as 2M, or leave --bytes out for the whole video") }
            requests.append(.head(n))
            if !asked.noMoov { goal = .moov }
        }
        requests += asked.ranges
        // A bad URL given on the command line is bad input (exit 2); in a list it is one failed line.
        // An internationalised host is converted to the ASCII form libcurl contacts.
        let urls = asked.urls.map(OriginTarget.asciiHost)
        for url in urls {
            if let why = PrefetchItem.urlProblem(url) { throw UsageError("cannot prefetch \(Console.escaped(url)): \(why)") }
        }
        let defaults = Defaults(requests: requests, goal: goal, seconds: asked.seconds, fetchMoov: !asked.noMoov)
        var list = urls.map { defaults.item($0) }
        if !asked.checksums.isEmpty {
            guard list.count == 1 else {
                throw UsageError("--checksum is the digest of one video: give exactly one URL with it (in a -i list, put each URL's checksum on its line: URL sha256=HEX)")
            }
            for (i, c) in asked.checksums.enumerated() where asked.checksums[..<i].contains(where: { $0.algorithm == c.algorithm && $0.hex != c.hex }) {
                throw UsageError("--checksum gives two different \(c.algorithm.rawValue) values; give one per algorithm")
            }
            list[0].expected = asked.checksums
        }
        if let input = asked.input {
            let (fromFile, errors) = try readInput(input, defaults: defaults)
            list += fromFile
            inputErrors = errors
        }
        return (list, inputErrors)
    }

    static func makeOptions(_ args: ParsedArguments<Options>) throws -> PrefetchOptions {
        var o = PrefetchOptions()
        o.request.headers = try headers(args.header)
        try OriginOptions.apply(args.origin, to: &o.request)
        if let ua = args.userAgent { o.request.userAgent = ua }
        if let t = args.connectTimeout { o.request.connectTimeout = t }
        if let t = args.timeout { o.request.stallTimeout = t }
        if let n = args.retries { o.retries = n }
        if let n = args.jobs { o.concurrency = n }
        o.waitForLock = !args.noWait
        o.verbose = args.verbose
        o.maxTime = args.maxTime
        o.maxRate = args.limitRate
        if let v = args.variant { o.hlsVariant = v }
        o.hlsAudio = args.audio
        for rule in args.allowHost { o.memberHosts.add(host: rule.host, port: rule.port) }
        return o
    }

    /// What each URL gets unless its line in a list says otherwise.
    struct Defaults {
        var requests: [RangeRequest]
        var goal: MP4Goal?
        var seconds: Double?
        /// A head also brings the MP4's moov (no `--no-moov`).
        var fetchMoov = true

        func item(_ url: String) -> PrefetchItem {
            if let seconds { return .seconds(url, seconds, also: requests) }
            return PrefetchItem(url: url, requests: requests, mp4: goal)
        }
    }

    /// `items` without those giving a video (the same key) another value for an algorithm than
    /// an earlier item did, and a line naming each one skipped (`FILE:N: ...; line skipped`).
    static func conflictingChecksums(_ items: [PrefetchItem], list: String, key: (String) -> CacheKey) -> (items: [PrefetchItem], errors: [String]) {
        var first: [CacheKey: [ExpectedDigest]] = [:]
        var kept: [PrefetchItem] = [], errors: [String] = []
        for item in items {
            let k = key(item.url)
            let before = first[k] ?? []
            if let e = item.expected.first(where: { e in before.contains { $0.algorithm == e.algorithm && $0.hex != e.hex } }),
               let old = before.first(where: { $0.algorithm == e.algorithm }) {
                let at: String
                if case .listLine(let n) = e.source { at = "\(list):\(n)" } else { at = e.source.description }
                errors.append("\(at): \(Console.escaped(item.url)) is given \(e.algorithm.rawValue) \(e.hex), but \(old.source.description) gives the same video \(old.hex); one file cannot have both; line skipped")
                continue
            }
            first[k] = before + item.expected.filter { e in !before.contains { $0.algorithm == e.algorithm } }
            kept.append(item)
        }
        return (kept, errors)
    }

    /// One URL per line, optionally followed by a size (`2M`: the head, and the moov) or seconds
    /// (`10s`: the first seconds of an MP4) and checksums (`md5=HEX`, `sha256=HEX`: the digests the
    /// whole video must have); blank lines and `#` comments ignored. A malformed
    /// line is reported with its number and skipped.
    /// Everything `fd` gives until its end (read(2), EINTR retried).
    private static func readToEnd(_ fd: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                data.append(contentsOf: buffer[..<n])
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }

    static func readInput(_ path: String, defaults: Defaults) throws -> ([PrefetchItem], [String]) {
        let text: Data
        if path == "-" {
            text = readToEnd(0)
        } else {
            // Read as a stream: a FIFO, `<(...)` and /dev/null are lists too.
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                let why = access(path, F_OK) == 0 ? "not readable" : "no such file"
                throw UsageError("cannot read URL list '\(path)': \(why)")
            }
            defer { close(fd) }
            if let st = FileSystem.followingStatus(path), (st.st_mode & S_IFMT) == S_IFDIR {
                throw UsageError("cannot read URL list '\(path)': it is a folder; give a file")
            }
            text = readToEnd(fd)
        }
        var items: [PrefetchItem] = []
        var errors: [String] = []
        // Lists from Windows and spreadsheets: CRLF line ends and a UTF-8 byte-order mark.
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let body = text.starts(with: bom) ? text.dropFirst(3) : text[...]
        // Line by line as bytes: a line ends at LF, CRLF or a lone CR (old Mac lists), and one that
        // is not UTF-8 is refused by its number, never read with U+FFFD in place of its bytes
        // (that would fetch another URL).
        var rawLines: [ArraySlice<UInt8>] = []
        let bytes = Array(body)
        var start = 0, i = 0
        while i < bytes.count {
            if bytes[i] == 0x0A || bytes[i] == 0x0D {
                rawLines.append(bytes[start..<i])
                if bytes[i] == 0x0D && i + 1 < bytes.count && bytes[i + 1] == 0x0A { i += 1 }
                start = i + 1
            }
            i += 1
        }
        if start < bytes.count { rawLines.append(bytes[start...]) }
        for (n, raw) in rawLines.enumerated() {
            guard let decoded = String(validating: raw, as: UTF8.self) else {
                errors.append("\(path == "-" ? "stdin" : path):\(n + 1): not valid UTF-8 (save the list as UTF-8); line skipped")
                continue
            }
            let line = decoded.trimming(.whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            fields[0] = OriginTarget.asciiHost(fields[0])
            let where_ = "\(path == "-" ? "stdin" : path):\(n + 1)"
            guard PrefetchItem.urlProblem(fields[0]) == nil else {
                errors.append("\(where_): not an http(s) URL: '\(Console.escaped(fields[0]))'; line skipped")
                continue
            }
            // `ALGO=VALUE` words are checksums, anywhere after the URL; at most one other word.
            var expected: [ExpectedDigest] = []
            var words: [String] = []
            var bad: String?
            for word in fields.dropFirst() {
                guard word.contains("=") else { words.append(word); continue }
                do {
                    let e = try ExpectedDigest.parse(word, source: .listLine(n + 1))
                    if expected.contains(where: { $0.algorithm == e.algorithm && $0.hex != e.hex }) {
                        bad = bad ?? "two different \(e.algorithm.rawValue) checksums; give one per algorithm"
                    }
                    expected.append(e)
                } catch {
                    bad = bad ?? "\(error)"
                }
            }
            if let bad {
                errors.append("\(where_): \(bad); line skipped")
                continue
            }
            if words.count > 1 {
                errors.append("\(where_): expected 'URL [SIZE|SECONDS] [ALGO=HEX]...', got \(fields.count) fields; line skipped")
                continue
            }
            var item: PrefetchItem
            if let word = words.first {
                if word.lowercased().hasSuffix("s"), let seconds = Units.parseDuration(word), seconds > 0 {
                    item = .seconds(fields[0], seconds)
                } else if let size = Units.parseSize(word), size > 0 {  // 0 asks for nothing, as --bytes 0
                    item = PrefetchItem(url: fields[0], requests: [.head(size)], mp4: defaults.fetchMoov ? .moov : nil)
                } else {
                    errors.append("\(where_): invalid size or seconds '\(word)'; use e.g. 2M or 10s; line skipped")
                    continue
                }
            } else {
                item = defaults.item(fields[0])
            }
            item.expected = expected
            items.append(item)
        }
        return (items, errors)
    }
}

extension PrefetchCommand {
    /// Key rules given on the command line that the cache's config lacks key this run's entries
    /// in a way no other command (ls, info, export, verify, serve: they read the config's rules)
    /// will find them by: a stream then reads partial to them (hostile probe h9b, F7). Said once.
    static func keyRulesNote(given: CacheKeyRules, config: CacheKeyRules) -> String? {
        var options: [String] = []
        var fixes: [String] = []
        if given.ignoreQuery && !config.ignoreQuery {
            options.append("--key-ignore-query")
            fixes.append("'vcache config set key-ignore-query true'")
        }
        let extra = given.stripParameters.subtracting(config.stripParameters).sorted()
        if !given.ignoreQuery && !extra.isEmpty {
            options += extra.map { "--key-strip-param \($0)" }
            fixes.append("'vcache config set key-strip-param \(given.stripParameters.sorted().joined(separator: ","))'")
        }
        guard !options.isEmpty else { return nil }
        return Console.oneLine("note: \(options.joined(separator: " and ")) \(options.count == 1 ? "is" : "are") not in the cache's config: "
            + "ls, info, export, verify and serve key URLs by the config's rules and will not find what this run keys by \(options.count == 1 ? "it" : "them"); "
            + "\(fixes.joined(separator: " and ")) makes \(options.count == 1 ? "it" : "them") every command's")
    }
}
