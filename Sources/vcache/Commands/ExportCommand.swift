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

/// `vcache export URL|KEY DEST`, `vcache export --all DIR`: complete videos out as .mp4 files;
/// `vcache export STREAM DIR`: a stream as a folder that plays from disk.
enum ExportCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "export",
        abstract: "copy complete videos out of the cache, checked against their SHA-256",
        usage: "export URL|KEY DEST | export STREAM DIR | export --all DIR [--force] [--link | --faststart]",
        discussion: """
        DEST is a file, or an existing folder (the name then comes from the URL's last path
        segment, made safe). The copy is written to a temp file beside DEST, checked against the
        SHA-256 stored at completion, fsynced and renamed into place. An entry not known to match a
        checksum expected of it (--checksum, a list line, the origin's) is refused. A stream (the URL of an HLS
        playlist prefetched or played through serve) is written as the folder DIR (made when
        missing): DIR/master.m3u8, each media playlist that plays from the cache in a folder of its
        own with its segments, init sections and keys, every URI a relative local name, so
        'ffmpeg -i DIR/master.m3u8' plays it from disk.
        """,
        minPositionals: 1, maxPositionals: 2)

    struct Options: OptionGroup {
        var all = Flag("all", help: "every complete entry into the folder DIR")
        var force = Flag("force", help: "overwrite an existing file")
        var link = Flag("link", help: "hard-link instead of copying (same filesystem only; the file then shares the cache's inode)")
        var faststart = Flag("faststart", help: "MP4: write the moov in front of the media (as ffmpeg -movflags +faststart), offsets shifted")
    }

    static func run(_ args: ParsedArguments<Options>, console: Console) -> Int32 {
        let all = args.all
        let p = args.positionals
        guard (all && p.count == 1) || (!all && p.count == 2) else {
            console.usage(all ? "'export --all' takes one folder; usage: vcache \(configuration.usage)" : "'export' takes URL|KEY and DEST; usage: vcache \(configuration.usage)")
            return 2
        }
        if args.json && !all && p[1] == "-" {
            console.usage("--json and DEST '-' exclude each other: the video would go into the JSON lines on stdout")
            return 2
        }
        if args.link && args.faststart {
            console.usage("--link and --faststart exclude each other: a rewritten file cannot share the cache's inode")
            return 2
        }
        guard let store = openStore(args, console: console) else { return StoreOpening.failure }
        let exporter = Exporter(store: store)
        // Ctrl-C, SIGTERM, SIGHUP or a closed pipe mid-way: no hidden partial file stays behind.
        let trap = SignalTrap { sig in
            // A stream export moving its files into DIR finishes that first: DIR then holds it whole.
            if let dir = Exporter.removeTemporaries() {
                console.err(Console.oneLine("vcache: stopped by \(SignalTrap.name(sig)) after the export's files were all moved into '\(dir)' (a stop between two moves would have mixed two exports)") + "\n")
            }
            SignalTrap.die(by: sig)
        }
        defer { withExtendedLifetime(trap) {} }
        var jobs: [(key: CacheKey, dest: String)] = []
        if all {
            // The user's folder, reached through a symlink or not.
            guard let st = FileSystem.followingStatus(p[0]), (st.st_mode & S_IFMT) == S_IFDIR else {
                console.error("folder '\(p[0])' does not exist; create it first", kind: "not_found")
                return 1
            }
            do {
                var used = Set<String>()
                for e in try store.catalog.allEntries() where e.isComplete {
                    var name = Exporter.fileName(for: e.latestURL, key: e.key.hex, contentType: e.contentType)
                    if used.contains(name) {
                        let ext = PathText.pathExtension(name)
                        name = PathText.deletingPathExtension(name) + "-" + e.key.hex.prefix(8) + (ext.isEmpty ? "" : "." + ext)
                    }
                    used.insert(name)
                    jobs.append((e.key, PathText.appendingPathComponent(p[0], name)))
                }
            } catch {
                return console.fail(error, context: "cannot list \(store.directory)")
            }
        } else {
            guard let key = EntryLookup.key(for: p[0], store: store) else {
                console.error("not in the cache: \(p[0]); see 'vcache ls'", kind: "not_found")
                return 1
            }
            // A stream's root: the whole stream into the folder DEST (ExportCommand+Stream.swift).
            if ((try? store.catalog.stream(root: key)) ?? nil) != nil { return exportStream(key, to: p[1], args: args, store: store, console: console) }
            jobs.append((key, p[1]))
        }
        var failed = 0
        // The most pressing failure's code, as prefetch's (Docs/cli.md): 5 (the disk, damaged
        // bytes), then 4, then 1 (refused), then 3 (replaced meanwhile: try again).
        var status: Int32 = 0
        for job in jobs {
            do {
                let done = try exporter.export(key: job.key, to: job.dest, force: args.force, link: args.link,
                                               faststart: args.faststart)
                if args.json {
                    var o: [String: Any] = ["path": done.path, "size_bytes": done.bytes, "linked": done.linked, "key": job.key]
                    if let moved = done.movedMoov { o["moved_moov"] = moved }
                    console.event("exported", o)
                } else {
                    let how = done.linked ? "linked (it shares the cache's inode: do not modify it in place)" : "exported"
                    let note = done.movedMoov.map { $0 ? ", moov moved to the front" : ", moov already in front" } ?? ""
                    // Into stdout the video itself goes: the report goes to stderr then.
                    let line = "\(how) \(done.path) (\(Units.formatSize(done.bytes))\(note))\n"
                    if done.streamed { console.err(line) } else { console.out(line) }
                }
            } catch let e as SystemError where e.errno == EPIPE {
                // The reader of a pipe went away (`vcache export URL - | head -c 100`, a FIFO,
                // /dev/stdout): end as cat does, by SIGPIPE, without a message.
                SignalTrap.die(by: SIGPIPE)
            } catch Exporter.ExportError.io(let e) where e.errno == EPIPE {
                SignalTrap.die(by: SIGPIPE)
            } catch {
                // A signal's handler removed the temp file this failed on, and ends the process.
                if Exporter.isStopping { SignalTrap.awaitDeath() }
                failed += 1
                let failure = FailureInfo(error, context: "cannot export to '\(job.dest)'")
                status = ExportCommand.morePressing(status, failure.exitCode)
                console.failureLine(failure)
                console.event("failed", ["path": job.dest, "key": job.key, "error": failure.json])
            }
        }
        if all && jobs.isEmpty && !args.json { console.out("no complete entries to export\n") }
        console.event("summary", ["exported": jobs.count - failed, "failed": failed, "exit_code": status])
        return status
    }

    /// Of two exit codes, the one that asks more of the user: 5, then 4, then 1, then 3, then 0.
    static func morePressing(_ a: Int32, _ b: Int32) -> Int32 {
        let order: [Int32] = [0, 3, 1, 4, 5]
        return (order.firstIndex(of: a) ?? 2) >= (order.firstIndex(of: b) ?? 2) ? a : b
    }
}
