#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache evict`: remove entries by size cap (least recently used first), age, state or name.
enum EvictCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "evict",
        abstract: "remove least recently used, old, partial or named entries",
        usage: "evict [URL|KEY...] [--lru --max-size SIZE] [--older-than DURATION] [--partial] [--all] [--dry-run]",
        discussion: """
        Filters combine: every given filter must match, and with --max-size entries go, least
        recently used first, only until the cache fits. Pinned entries and entries another vcache
        process is writing or reading are skipped (pinned ones go when named, or with --include-pinned).
        Sizes count real disk use (allocated blocks, as du counts), catalog included.
        """,
        minPositionals: 0, maxPositionals: nil)

    struct Options: OptionGroup {
        var lru = Flag("lru", help: "least recently used first (the default order; says what --max-size does)")
        var maxSize = Option("max-size", .size(), help: "evict until the cache uses at most SIZE")
        var olderThan = Option("older-than", .duration, help: "only entries last used more than DURATION ago")
        var partial = Flag("partial", help: "only incomplete entries")
        var all = Flag("all", help: "every entry (with the other filters)")
        var includePinned = Flag("include-pinned", help: "pinned entries too")
        var dryRun = Flag("dry-run", help: "list what would go and what it frees; change nothing")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        var c = Evictor.Criteria()
        c.maxSize = args.maxSize
        c.olderThan = args.olderThan
        c.partialOnly = args.partial
        c.all = args.all
        c.includePinned = args.includePinned
        if args.lru && c.maxSize == nil {
            console.usage("--lru needs --max-size SIZE (the size to evict down to)")
            return 2
        }
        guard c.maxSize != nil || c.olderThan != nil || c.partialOnly || c.all || !args.positionals.isEmpty else {
            console.usage("nothing selected: give --max-size, --older-than, --partial, --all, or URLs or keys")
            return 2
        }
        guard let store = openStore(args, console: console) else { return StoreOpening.failure }
        if !args.positionals.isEmpty {
            switch EntryLookup.keys(for: args.positionals, store: store) {
            case .success(let keys):
                // An entry named goes with the staging entry of its live refetch, if a killed run
                // left one (vcache's own, not listed by `ls`).
                let staged = keys.map(CacheStore.stagingKey(of:)).filter { ((try? store.catalog.entry(key: $0)) ?? nil) != nil }
                c.keys = Set(keys + staged)
            case .failure(let e): console.error(e); return 1
            }
        }
        // A master's media playlist named goes with what only it named (Docs/hls.md).
        var fallout = Evictor.MemberPlaylistFallout()
        if let keys = c.keys {
            do { fallout = try Evictor(store: store).fallout(ofRemoving: keys, keyRules: Settings.keyRules(store: store)) } catch {
                return console.fail(error, context: "cannot evict from \(store.directory)")
            }
            c.keys = keys.union(fallout.members)
        }
        let dry = args.dryRun
        // Streams as they are before the run (their rows go with them): a stream is one line.
        let streams = (try? store.catalog.streams()) ?? []
        let evictor = Evictor(store: store)
        let out: Evictor.Outcome
        do {
            if !dry { try evictor.sweepOrphans() }
            // Its masters are marked first, so a kill between the deletes leaves them marked.
            let marked = dry ? [] : try fallout.markRootsFirst(in: store.catalog)
            out = try evictor.evict(c, dryRun: dry)
            if !dry { try fallout.unmark(marked, in: store.catalog, unless: out.evicted.map(\.key)) }
        } catch {
            return console.fail(error, context: "cannot evict from \(store.directory)")
        }
        let verb = dry ? "would evict" : "evicted"
        // Over the cap because of entries that stayed is a failure; with every entry gone, what is
        // left is the catalog itself, which no cap can remove. An entry named on the command line
        // and not evicted (in use, say) is a failure too.
        let allCount = (try? store.catalog.allEntries().count) ?? 1
        let entriesLeft = dry ? allCount - out.evicted.count > 0 : allCount > 0
        let over = c.maxSize.map { out.usageAfter > $0 } ?? false
        let overByEntries = over && (!out.skipped.isEmpty || entriesLeft)
        // An entry this user cannot remove is a failure too (whose files they are is for the
        // operator to mend); one merely in use goes next time.
        // A named entry the other filters kept (`evict URL --older-than 1h` on a fresh one) is
        // said, and fails the run as a skipped one does.
        let handled = Set(out.evicted.map(\.key) + out.skipped.map(\.entry.key))
        let unmatched = (c.keys ?? []).subtracting(handled)
        for key in unmatched.sorted() {
            let url = ((try? store.catalog.entry(key: key)) ?? nil)?.latestURL ?? key.hex
            console.err("kept \(url): it does not match the other filters given\n")
        }
        let exitCode: Int32 = overByEntries || (!args.positionals.isEmpty && (!out.skipped.isEmpty || !unmatched.isEmpty)) || out.untouchable > 0 ? 1 : 0
        if args.json {
            for e in out.evicted {
                console.event(dry ? "would_evict" : "evicted", ["key": e.key, "url": e.latestURL, "disk_bytes": e.diskBytes,
                                                                 "last_used": Timestamp.iso8601(e.lastUsed)])
            }
            for (e, why) in out.skipped {
                console.event("skipped", ["key": e.key, "url": e.latestURL, "reason": why])
            }
            var summary: [String: Any] = ["evicted": out.evicted.count, "skipped": out.skipped.count, "freed_bytes": out.freedBytes,
                                          "usage_bytes": out.usageAfter, "dry_run": dry, "exit_code": Int(exitCode)]
            if let cap = c.maxSize { summary["max_size_bytes"] = cap }
            console.event("summary", summary)
        } else {
            if !out.evicted.isEmpty {
                var rows = [["", "DISK", "LAST USED", "URL"]]
                for line in Self.lines(out.evicted, streams: streams) {
                    rows.append([verb, Units.formatSize(line.diskBytes), Table.age(line.lastUsed, now: Date()), line.url])
                }
                console.out(Table.render(rows, rightAligned: [1]))
            }
            for (e, why) in out.skipped { console.err("skipped \(e.latestURL): \(why)\n") }
            var line = "\(verb) \(out.evicted.count) \(out.evicted.count == 1 ? "entry" : "entries"), \(dry ? "freeing" : "freed") \(Units.formatSize(out.freedBytes)); the cache \(dry ? "would use" : "uses") \(Units.formatSize(out.usageAfter))"
            if let cap = c.maxSize { line += " (cap \(Units.formatSize(cap)))" }
            console.out(line + "\n")
        }
        if let cap = c.maxSize, overByEntries {
            console.error("the cache is still over \(Units.formatSize(cap)): the rest is pinned, in use, or cannot be removed by this user (see the skipped lines)", kind: "over_cap")
        } else if over && !args.json {
            console.err("note: no entry is left; the catalog itself uses \(Units.formatSize(out.usageAfter))\n")
        }
        return exitCode
    }

    /// The evicted entries as the table shows them: a stream whose root went is one line (its
    /// members summed, "(HLS stream, N entries)"), every other entry its own.
    static func lines(_ evicted: [CacheEntry], streams: [StreamRecord]) -> [(url: String, diskBytes: Int64, lastUsed: Date)] {
        let gone = Set(evicted.map(\.key))
        // A member several streams name went with one of them whose root went too.
        var rootOf: [CacheKey: StreamRecord] = [:]
        for s in streams where gone.contains(s.root) { for m in s.members where rootOf[m.key] == nil { rootOf[m.key] = s } }
        var out: [(url: String, diskBytes: Int64, lastUsed: Date)] = []
        var folded: [CacheKey: Int] = [:]  // root key -> index in out
        var counts: [CacheKey: Int] = [:]
        for e in evicted {
            guard let s = rootOf[e.key], gone.contains(s.root), let root = evicted.first(where: { $0.key == s.root }) else {
                out.append((e.latestURL, e.diskBytes, e.lastUsed))
                continue
            }
            counts[s.root, default: 0] += 1
            if let i = folded[s.root] {
                out[i].diskBytes += e.diskBytes
                out[i].lastUsed = max(out[i].lastUsed, e.lastUsed)
            } else {
                folded[s.root] = out.count
                out.append((root.latestURL, e.diskBytes, e.lastUsed))
            }
        }
        for (root, i) in folded {
            let format = rootOf[root]?.format.uppercased() ?? "HLS"
            let n = counts[root] ?? 1
            out[i].url += " (\(format) stream, \(n) \(n == 1 ? "entry" : "entries"))"
        }
        return out
    }
}
