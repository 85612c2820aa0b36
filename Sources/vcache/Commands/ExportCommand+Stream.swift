#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

extension ExportCommand {
    /// `vcache export STREAM DIR`: the stream whose root is `key` as a folder that plays from disk.
    static func exportStream(_ key: CacheKey, to dir: String, args: ParsedArguments<Options>, store: CacheStore, console: Console) -> Int32 {
        if args.link || args.faststart {
            console.usage("--link and --faststart apply to one video, not to a stream")
            return 2
        }
        do {
            let done = try StreamExporter(store: store, keyRules: Settings.keyRules(store: store)).export(root: key, to: dir, force: args.force) { line in
                console.err(Console.oneLine("note: " + line) + "\n")
            }
            if args.json {
                console.event("exported", ["path": done.master, "size_bytes": done.bytes, "linked": false, "key": key,
                                           "files": done.files, "playlists": done.playlists, "dropped": done.dropped])
            } else {
                console.out("exported \(done.master) (\(done.files) files, \(Units.formatSize(done.bytes)), \(done.playlists) \(done.playlists == 1 ? "playlist" : "playlists"))\n")
                for url in done.dropped { console.err(Console.oneLine("left out \(url): it does not play from the cache") + "\n") }
            }
            console.event("summary", ["exported": 1, "failed": 0, "exit_code": 0])
            return 0
        } catch {
            // A signal's handler removed the hidden folder this failed on, and ends the process.
            if Exporter.isStopping { SignalTrap.awaitDeath() }
            let failure = FailureInfo(error, context: "cannot export to '\(dir)'")
            console.failureLine(failure)
            console.event("failed", ["path": dir, "key": key, "error": failure.json])
            console.event("summary", ["exported": 0, "failed": 1, "exit_code": failure.exitCode])
            return failure.exitCode
        }
    }
}
