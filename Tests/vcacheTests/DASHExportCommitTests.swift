import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// The moves that give an export's files their names (`ExportStaging.commit`), stopped half-way:
/// a signal is acted on once every file has its name, a SIGKILL is finished by the next export
/// into the folder, a killed export's hidden copy is removed by the next, and two exports into
/// one folder at once are one too many (hostile probe h2, F4, F5, F6).
@Suite struct DASHExportCommitTests {
    let dir = TempDirectory("vcache-dashcommit")

    /// A warmed stream, a reference export of it, and an earlier export in `out` that differs
    /// from it in every file (so a mix of the two shows).
    func setUp(_ nginx: Nginx, _ name: String) throws -> (url: String, cache: String, out: String, ref: [String: String]) {
        let cache = dir.file("cache-\(name)")
        let url = nginx.url("/tl/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let ref = dir.file("ref-\(name)")
        #expect(try VCacheBinary.run(["export", url, ref], cacheDir: cache).status == 0)
        let out = dir.file("out-\(name)")
        #expect(try VCacheBinary.run(["export", url, out], cacheDir: cache).status == 0)
        for (file, hash) in DASHExportTests.tree(out) where hash != "folder" {
            let h = try FileHandle(forWritingTo: URL(fileURLWithPath: out + "/" + file))
            try h.seekToEnd()
            try h.write(contentsOf: Data("old".utf8))
            try h.close()
        }
        return (url, cache, out, DASHExportTests.tree(ref))
    }

    func nginx() throws -> Nginx {
        let nginx = try Nginx()
        try Fixtures.makeDASHStreams(into: nginx.root)
        return nginx
    }

    /// SIGTERM or SIGINT after the first file of `export --force` took its name: the others take
    /// theirs before vcache stops, so the folder holds the new export whole (before: 1 new file
    /// and the rest of the old export, exit 143, nothing said).
    @Test(.requires(.nginx, .dashTools), arguments: [SIGTERM, SIGINT])
    func aSignalDuringTheMovesIsActedOnOnceEveryFileHasItsName(signal: Int32) throws {
        let nginx = try nginx()
        let (url, cache, out, ref) = try setUp(nginx, "sig\(signal)")
        let pause = PausePoint("stream-export-renaming", in: dir)
        let running = try VCacheBinary.start(["export", "--force", url, out], cacheDir: cache, environment: pause.environment)
        let reached = pause.waitUntilReached()
        #expect(reached)
        running.kill(signal)
        pause.release()
        let r = running.finish()
        #expect(r.signalled || r.status == 0, "exit \(r.status) \(r.stderr)")
        if r.signalled {
            let name = signal == SIGTERM ? "SIGTERM" : "SIGINT"
            #expect(r.stderr == "vcache: stopped by \(name) after the export's files were all moved into '\(out)' (a stop between two moves would have mixed two exports)\n", "\(r.stderr)")
        }
        #expect(DASHExportTests.tree(out) == ref)
    }

    /// SIGKILL between two moves leaves a mix; the next export into the folder finishes the killed
    /// one from its hidden folder and says so, then refuses as usual without --force.
    @Test(.requires(.nginx, .dashTools))
    func anExportKilledBetweenTwoMovesIsFinishedByTheNext() throws {
        let nginx = try nginx()
        let (url, cache, out, ref) = try setUp(nginx, "kill")
        let pause = PausePoint("stream-export-renaming", in: dir)
        let running = try VCacheBinary.start(["export", "--force", url, out], cacheDir: cache, environment: pause.environment)
        let reached = pause.waitUntilReached()
        #expect(reached)
        running.kill(SIGKILL)
        _ = running.finish()
        #expect(DASHExportTests.tree(out) != ref)
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 1, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("note: finished the export into '\(out)' that process ")
                && lines[0].hasSuffix(" files moved to their names, so the folder holds that export whole")
                && lines[1] == "vcache: cannot export to '\(out)': '\(out)/manifest.mpd' already exists; use --force to overwrite it", "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == ref)
    }

    /// The killed export's PID belongs to a live process now (reused, or another PID namespace's):
    /// the next export still finishes it, DIR's lock saying no export holds it, before its own
    /// moves (hostile probe h4, F1: it was "left as it is", the next export committed over it,
    /// and a later one replayed the stale journal over that newer export).
    @Test(.requires(.nginx, .dashTools))
    func aKilledExportWhosePIDIsReusedIsStillFinishedFirst() throws {
        let nginx = try nginx()
        let (url, cache, out, ref) = try setUp(nginx, "reused")
        let pause = PausePoint("stream-export-renaming", in: dir)
        let running = try VCacheBinary.start(["export", "--force", url, out], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        _ = running.finish()
        let hidden = try #require((try FileManager.default.contentsOfDirectory(atPath: out)).first { $0.hasPrefix(".vcache-export-") })
        let live = ".vcache-export-\(getpid())-" + (hidden.split(separator: "-").last.map(String.init) ?? "1")
        try FileManager.default.moveItem(atPath: out + "/" + hidden, toPath: out + "/" + live)
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("note: finished the export into '\(out)' that process \(getpid()) was killed in the middle of: "), "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == ref)
    }

    /// A journal naming a file through a symbolic link in the hidden folder: nothing outside DIR
    /// is moved (hostile probe h4, F2: the link was followed, a file outside DIR moved into it).
    @Test(.requires(.nginx, .dashTools))
    func aJournalThroughALinkMovesNothingFromOutside() throws {
        let nginx = try nginx()
        let (url, cache, out, _) = try setUp(nginx, "link")
        let outside = dir.file("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: outside + "/secret"))
        let hidden = out + "/.vcache-export-\(try Self.deadPID())-1"
        #expect(mkdir(hidden, 0o700) == 0)
        try FileManager.default.createSymbolicLink(atPath: hidden + "/x", withDestinationPath: outside)
        try Data("x/secret\n.\n".utf8).write(to: URL(fileURLWithPath: hidden + "/.vcache-commit"))
        _ = try VCacheBinary.run(["export", "--force", url, out], cacheDir: cache)
        #expect(FileManager.default.contents(atPath: outside + "/secret") == Data("mine".utf8), "a file outside DIR was moved")
        #expect(!FileManager.default.fileExists(atPath: out + "/x/secret"))
    }

    /// A PID no process has: one of a child that ended.
    static func deadPID() throws -> Int32 {
        let child = try Child("/bin/true", [])
        let pid = child.pid
        _ = child.wait()
        return pid
    }

    /// A killed export's hidden copy (killed before any move) is removed by the next export into
    /// the folder, with a line (before: it stayed for ever, a full copy of the stream).
    @Test(.requires(.nginx, .dashTools))
    func theHiddenCopyOfAKilledExportIsRemovedByTheNext() throws {
        let nginx = try nginx()
        let (url, cache, out, ref) = try setUp(nginx, "copy")
        let pause = PausePoint("stream-export-commit", in: dir)
        let running = try VCacheBinary.start(["export", "--force", url, out], cacheDir: cache, environment: pause.environment)
        let reached = pause.waitUntilReached()
        #expect(reached)
        running.kill(SIGKILL)
        _ = running.finish()
        let hidden = (try FileManager.default.contentsOfDirectory(atPath: out)).filter { $0.hasPrefix(".vcache-export-") }
        #expect(hidden.count == 1)
        let r = try VCacheBinary.run(["export", "--force", url, out], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("note: removed '\(out)/\(hidden.first ?? "")': the copy of an export into '\(out)' killed before it moved any file (process "), "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == ref)
    }

    /// A journal cut short at a line's end (a power cut while it was written: it is written and
    /// synced before the first move) names fewer files than the export had: nothing is moved from
    /// it, the copy is removed as one killed before any move, and DIR keeps the earlier export
    /// whole (hostile probe h4, F12: the names it held were moved, mixing two exports).
    @Test(.requires(.nginx, .dashTools))
    func aJournalCutAtALinesEndMovesNothing() throws {
        let nginx = try nginx()
        let (url, cache, out, _) = try setUp(nginx, "cut")
        let before = DASHExportTests.tree(out)
        let pause = PausePoint("stream-export-commit", in: dir)
        let running = try VCacheBinary.start(["export", "--force", url, out], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        _ = running.finish()
        let hidden = try #require((try FileManager.default.contentsOfDirectory(atPath: out)).first { $0.hasPrefix(".vcache-export-") })
        let copied = DASHExportTests.tree(out + "/" + hidden).filter { $0.value != "folder" }.keys.sorted()
        #expect(copied.count > 2, "\(copied)")
        // The first two names of the journal, ending at a line's end, as a cut write leaves them.
        try Data((copied.prefix(2).joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: out + "/" + hidden + "/.vcache-commit"))
        let r = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("note: removed '\(out)/\(hidden)': the copy of an export into '\(out)' killed before it moved any file (process "), "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == before)
    }

    /// Two exports into one folder at once: the second is refused (exit 3, busy) and the first
    /// completes (before: both exit 0, the second replacing the first without --force).
    @Test(.requires(.nginx, .dashTools))
    func aSecondExportIntoAFolderBeingWrittenIsRefused() throws {
        let nginx = try nginx()
        let cache = dir.file("cache-two")
        let url = nginx.url("/tl/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
        let ref = dir.file("ref-two")
        #expect(try VCacheBinary.run(["export", url, ref], cacheDir: cache).status == 0)
        let out = dir.file("out-two")
        let pause = PausePoint("stream-export-commit", in: dir)
        let first = try VCacheBinary.start(["export", url, out], cacheDir: cache, environment: pause.environment)
        let reached = pause.waitUntilReached()
        #expect(reached)
        let second = try VCacheBinary.run(["export", url, out], cacheDir: cache)
        pause.release()
        let r = first.finish()
        #expect(second.status == 3, "\(second.stderr)")
        #expect(second.stderr == "vcache: cannot export to '\(out)': another vcache export is writing into '\(out)' now; wait for it to end, or export into another folder\n")
        #expect(r.status == 0 && !r.signalled, "\(r.stderr)")
        #expect(DASHExportTests.tree(out) == DASHExportTests.tree(ref))
    }
}
