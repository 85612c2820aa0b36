#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache verify [URL|KEY...]`: is every claimed byte there and right?
enum VerifyCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "verify",
        abstract: "check the catalog, the data files, checksums and MP4 structure",
        usage: "verify [URL|KEY...] [--origin] [--fix] [--json]",
        discussion: """
        Checks every entry (or those named): its ranges are sane, data holds every claimed byte,
        a complete entry matches the SHA-256 stored at completion (and every checksum expected of
        it: --checksum, a list line, the origin's digest header) and walks cleanly as MP4, and the
        catalog passes SQLite's integrity check. Exit 0 when all is well, 1 when a problem was
        found (even if fixed), so cron can alert; 5 when the catalog is damaged and --fix was not given.
        A fix that cannot be made says why in one line and exits with its code (5: the disk or the catalog).
        """,
        minPositionals: 0, maxPositionals: nil)

    struct Options: OptionGroup {
        var origin = Flag("origin", help: "also ask each origin whether the video changed (one-byte ranged GET)")
        var fix = Flag("fix", help: "drop what is wrong so the cache is true again, and say what was dropped")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        let dir = CacheLocation.resolve(explicit: args.common.cacheDir)
        let fix = args.fix
        var catalogNote: String?
        var store: CacheStore
        do {
            store = try CacheStore(directory: dir, readOnly: !fix)
            do {
                if let problem = try store.catalog.integrityProblem() {
                    // Only an index damaged: rebuilding it loses nothing.
                    if fix, try store.catalog.repairIndexes(problem: problem) {
                        catalogNote = "the catalog's indexes were damaged (\(problem)): rebuilt them (REINDEX); no entry was lost"
                    } else {
                        throw CacheStore.OpenError.corruptCatalog(path: dir + "/catalog.db", reason: problem)
                    }
                }
            } catch let e as DatabaseError where e.isCorrupt {
                throw CacheStore.OpenError.corruptCatalog(path: dir + "/catalog.db", reason: e.message)
            }
        } catch let e as CacheStore.OpenError {
            let reason: String
            switch e {
            case .corruptCatalog(let path, let why):
                guard fix else {
                    console.error("the catalog '\(path)' is corrupt (\(why)); 'vcache verify --fix' sets it aside and starts a new one", kind: "corrupt_catalog", exitCode: 5)
                    return 5
                }
                reason = why
            case .repairInterrupted(_, let aside) where fix:
                reason = "an earlier repair was interrupted; its rows are in '\(aside)'"
            default:
                let failure = FailureInfo(e)
                console.error(failure)
                return failure.exitCode
            }
            do {
                // Marked under way until every row that reads is back (a kill or a failed write
                // midway leaves the mark: nothing is swept, and the next --fix finishes it).
                let aside = try CacheStore.setAsideCorruptCatalog(directory: dir)
                store = try CacheStore(directory: dir, repairing: true)
                // Every row that still reads is kept (and checked below like any entry); only the
                // folders of rows that could not be read go.
                let saved: Catalog.Salvage
                var unreadable: String?
                do { saved = try store.catalog.salvage(from: aside) } catch let e as Catalog.SalvageWriteFailed {
                    return console.fail(e.error, context: "cannot copy the rows that still read from '\(aside)' into a new catalog (the repair stays under way; run 'vcache verify --fix' again)")
                } catch {
                    unreadable = "\(error)"
                    saved = Catalog.Salvage()
                }
                try CacheStore.finishRepair(directory: dir)
                let removed = try Evictor(store: store).sweepOrphans()
                func n(_ count: Int, _ one: String, _ many: String) -> String { "\(count) \(count == 1 ? one : many)" }
                if let unreadable {
                    catalogNote = "the catalog was corrupt (\(reason)): moved it to '\(aside)'; not one row of it could be read (\(unreadable)), "
                        + "so the new catalog is empty and the \(n(removed.count, "data folder", "data folders")) it described \(removed.count == 1 ? "was" : "were") removed"
                } else {
                    catalogNote = "the catalog was corrupt (\(reason)): moved it to '\(aside)' and started a new one with the "
                        + "\(n(saved.kept, "entry", "entries")) that could still be read (each checked below"
                        + (saved.rangesLost > 0 ? "; \(saved.rangesLost) of them without their ranges, a complete one then checked whole" : "") + "); "
                        + "\(n(saved.lost, "unreadable row", "unreadable rows")) lost, \(n(removed.count, "data folder", "data folders")) with no row removed"
                }
            } catch {
                return console.fail(error, context: "cannot set the corrupt catalog aside")
            }
        } catch {
            let failure = FailureInfo(error)
            console.error(failure)
            return failure.exitCode
        }
        var keys: [CacheKey]?
        if !args.positionals.isEmpty {
            switch EntryLookup.keys(for: args.positionals, store: store) {
            case .success(let k): keys = k
            case .failure(let e): console.error(e); return 1
            }
        }
        var options = Verifier.Options()
        options.fix = fix
        options.checkOrigin = args.origin
        options.keyRules = Settings.keyRules(store: store)
        let reports: [Verifier.EntryReport]
        var orphans: [CacheKey] = []
        do {
            reports = try Verifier(store: store).verify(keys: keys, options: options)
            if fix && keys == nil { orphans = try Evictor(store: store).sweepOrphans() }
        } catch {
            return console.fail(error, context: "cannot verify \(dir)")
        }
        let bad = reports.filter { $0.state == .problem || $0.state == .fixed }
        var code: Int32 = bad.isEmpty && catalogNote == nil && orphans.isEmpty ? 0 : 1
        // A fix that failed says why, one line each; the first one's code is the exit code.
        let fixFailures = reports.compactMap { r in r.fixFailure.map { FailureInfo($0, context: "cannot fix \(r.url)") } }
        if let first = fixFailures.first { code = first.exitCode }
        if args.json {
            for r in reports {
                console.event("checked", ["key": r.key, "url": r.url, "state": r.state.rawValue, "problems": r.problems, "actions": r.actions])
            }
            var summary: [String: Any] = ["entries": reports.count, "problems": bad.count, "fixed": reports.filter { $0.state == .fixed }.count,
                                          "orphans_removed": orphans.count, "exit_code": Int(code)]
            if let catalogNote { summary["catalog"] = catalogNote }
            console.event("summary", summary)
        } else {
            if let catalogNote { console.out(catalogNote + "\n") }
            if !reports.isEmpty {
                var rows = [["STATE", "URL", "DETAIL"]]
                for r in reports {
                    let detail = (r.problems + r.actions.map { "-> " + $0 }).joined(separator: "; ")
                    rows.append([r.state.rawValue, r.url, detail.isEmpty ? "" : detail])
                }
                console.out(Table.render(rows))
            }
            if !orphans.isEmpty { console.out("removed \(orphans.count) orphan \(orphans.count == 1 ? "folder" : "folders") with no catalog row\n") }
            let fixedCount = reports.filter { $0.state == .fixed }.count
            console.out("\(reports.count) \(reports.count == 1 ? "entry" : "entries") checked, \(bad.count) with problems" + (fix ? ", \(fixedCount) fixed" : "") + "\n")
        }
        for failure in fixFailures { console.error(failure) }
        return code
    }
}
