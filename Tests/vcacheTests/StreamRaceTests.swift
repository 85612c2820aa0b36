#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// A stream is never completed, served or exported from members of two manifest versions,
/// whatever runs at the same time and wherever a process is killed (Docs/dash.md, "A partly
/// cached stream"; hostile probe h2, F7, F8, F13, F15, F16). The origin re-encodes in place
/// (`DASHRevalidationTests.encode`: the same URLs, new bytes, a new MPD) while another vcache
/// process prefetches or exports the stream; every member's SHA-256 is checked against the encode
/// its cached MPD names.
@Suite struct StreamRaceTests {
    let dir = TempDirectory("vcache-streamrace")
    typealias R = DASHRevalidationTests

    /// The origin's encode `seed` with its MPD (ETag `m<seed>`, the video `width` wide).
    static func serve(_ origin: TestOrigin, seed: UInt8, width: Int) -> [String: Data] {
        let bytes = R.encode(origin, seed: seed)
        origin.setResource("/s/manifest.mpd", .init(body: R.mpd(width: width), etag: "\"m\(seed)\"", contentType: R.dashXML))
        return bytes
    }

    /// The stream's first 2 s cached from encode 1 (MPD "m1").
    func partlyCached() throws -> (origin: TestOrigin, old: [String: Data], cache: String, url: String) {
        let origin = try TestOrigin()
        let old = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", url], cacheDir: cache).status == 0)
        return (origin, old, cache, url)
    }

    /// Every member cached whole holds `encode`'s bytes, and all of them are (the stream complete).
    static func expectCompleteFrom(_ encode: [String: Data], etag: String, cache: String, origin: TestOrigin, url: String,
                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        let got = try R.cachedDigests(cache, origin, Array(encode.keys))
        #expect(got == encode.mapValues { TestBytes.sha256($0) }, sourceLocation: sourceLocation)
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == etag, sourceLocation: sourceLocation)
        #expect(try DASHHostileOriginTests.lsState(cache) == "complete", sourceLocation: sourceLocation)
    }

    /// The SHA-256 of every file an export wrote but its manifest.
    static func exportedDigests(_ folder: String) -> [String] {
        let files = (FileManager.default.enumerator(atPath: folder)?.allObjects as? [String]) ?? []
        return files.sorted().compactMap { f in
            guard f != "manifest.mpd", let d = FileManager.default.contents(atPath: folder + "/" + f), !d.isEmpty else { return nil }
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder + "/" + f, isDirectory: &isDir), !isDir.boolValue else { return nil }
            return TestBytes.sha256(d)
        }
    }

    /// F8: a run completing the stream from a new MPD, and a second run started while the origin
    /// re-encodes again. The second waits for the first (the stream's lock), then finds the
    /// stream complete from one encode; it never drops the first's members under it while the
    /// first goes on storing members of the version it read. The first, asking for the MPD again
    /// at its end, finds it changed meanwhile: what it fetched goes and it fails (exit 3), and the
    /// second completes the stream from the newest encode.
    @Test func aSecondPrefetchOfAStreamWaitsForTheFirstInsteadOfMixingEncodes() throws {
        let (origin, _, cache, url) = try partlyCached()
        _ = Self.serve(origin, seed: 7, width: 640)
        // The first run's last member is held mid-way (one at a time: every other member is of
        // encode 7): the run is between its revalidation and the end of its members.
        origin.hold("/s/a/1.m4s", at: 10)
        let first = try VCacheBinary.start(["prefetch", "-q", "-j", "1", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/a/1.m4s"))
        // The origin re-encodes again; a second run starts. Its wait is bounded by its
        // --max-time; with --no-wait it skips the stream at once.
        let v3 = Self.serve(origin, seed: 13, width: 960)
        let bounded = try VCacheBinary.run(["prefetch", "--max-time", "1s", url], cacheDir: cache)
        #expect(bounded.status == 3, "\(bounded.stderr)")
        #expect(bounded.stderr.contains("stopped \(url) at the --max-time deadline: 0 B fetched and kept"), "\(bounded.stderr)")
        let skipped = try VCacheBinary.run(["prefetch", "--no-wait", url], cacheDir: cache)
        #expect(skipped.status == 3, "\(skipped.stderr)")
        #expect(skipped.stderr.contains("vcache: cannot prefetch \(url): another vcache process is completing this stream; skipped (--no-wait)\n"), "\(skipped.stderr)")
        // The run that cached the head (and asked again at its end), then the first.
        #expect(origin.requests("/s/manifest.mpd").count == 3, "only the first runs asked for the MPD")
        let second = try VCacheBinary.start(["prefetch", "--progress", "lines", url], cacheDir: cache)
        let said = second.process.waitForStderr(timeout: 30) { String(decoding: $0, as: UTF8.self).contains("waiting: another vcache process is writing ") }
        #expect(String(decoding: said, as: UTF8.self).contains("waiting: "), "the second run did not wait")
        origin.release("/s/a/1.m4s")
        let r1 = first.finish()
        let r2 = second.finish()
        #expect(r1.status == 3, "\(r1.stderr)")
        #expect(r1.stderr.contains("vcache: cannot prefetch \(url): its manifest changed on the origin during this run: the 6 entries this run fetched of its stream may be of the new version"), "\(r1.stderr)")
        #expect(r2.status == 0, "\(r2.stderr)")
        // The first's members went; the second completed the stream from encode 13.
        try Self.expectCompleteFrom(v3, etag: "\"m13\"", cache: cache, origin: origin, url: url)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// Two runs of one stream not cached at all, started together (cron overlapping itself): the
    /// second to read the MPD finds the first completing the stream and waits for it, then finds
    /// it complete: both exit 0, each segment asked once (hostile probe h3, F1: the second failed,
    /// exit 3, "another vcache process began completing this stream during this run").
    @Test func twoRunsOfAStreamNotYetCachedBothSucceedTheSecondWaiting() throws {
        let origin = try TestOrigin()
        let encode = Self.serve(origin, seed: 1, width: 320)
        let cache = dir.file("c")
        let url = origin.url("/s/manifest.mpd")
        // The first run's MPD is held, so the second starts before any stream is recorded: it
        // waits for the MPD's entry, then reads it as this run's, as the first did.
        origin.hold("/s/manifest.mpd", at: 10)
        origin.hold("/s/a/1.m4s", at: 10)
        let first = try VCacheBinary.start(["prefetch", "-q", "-j", "1", url], cacheDir: cache)
        #expect(origin.waitUntilHeld("/s/manifest.mpd"))
        let second = try VCacheBinary.start(["prefetch", "--progress", "lines", url], cacheDir: cache)
        func waits(_ n: Int) -> Bool {
            let said = second.process.waitForStderr(timeout: 30) { String(decoding: $0, as: UTF8.self).components(separatedBy: "waiting: ").count > n }
            return String(decoding: said, as: UTF8.self).components(separatedBy: "waiting: ").count > n
        }
        #expect(waits(1), "the second run did not wait for the MPD's entry")
        origin.release("/s/manifest.mpd")
        // The first holds the stream (a member held); the second, its MPD read, waits for it.
        #expect(waits(2), "the second run did not wait for the stream")
        origin.release("/s/a/1.m4s")
        let r1 = first.finish()
        let r2 = second.finish()
        #expect(r1.status == 0, "\(r1.stderr)")
        #expect(r2.status == 0, "\(r2.stderr)")
        try Self.expectCompleteFrom(encode, etag: "\"m1\"", cache: cache, origin: origin, url: url)
        for path in encode.keys { #expect(origin.requests(path).count == 1, "\(path) asked \(origin.requests(path).count) times") }
    }

    /// A run stopped by --max-time while it asks for a partly cached stream's MPD again: the
    /// stream was not completed, so the item is stopped (exit 3), not "ok ... complete", exit 0
    /// (hostile probe h3, F9: "nothing to fetch", the stream still partial).
    @Test func aRunStoppedWhileAskingForTheMPDAgainSaysItStopped() throws {
        let (origin, _, cache, url) = try partlyCached()
        _ = Self.serve(origin, seed: 7, width: 640)
        origin.hold("/s/manifest.mpd", at: 10)
        let r = try VCacheBinary.run(["prefetch", "--max-time", "1s", url], cacheDir: cache)
        origin.release("/s/manifest.mpd")
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("stopped \(url) at the --max-time deadline"), "\(r.stderr)")
        #expect(!r.stderr.contains("nothing to fetch"), "\(r.stderr)")
        #expect(try DASHHostileOriginTests.lsState(cache) == "partial")
    }

    /// F13 and F7: an export reading a member while a prefetch finds the MPD changed. The member
    /// in use cannot be dropped: the prefetch fails (exit 3, naming it) and leaves the stream as it
    /// was (old MPD), so the export writes the old encode only; the next prefetch completes the
    /// new one. (It dropped the others, kept the one in use and took it as cached under the new MPD.)
    @Test func aMemberInUseThatCannotBeDroppedFailsTheRevalidationAndNothingMixes() throws {
        let (origin, old, cache, url) = try partlyCached()
        let pause = PausePoint("export-copying", in: dir)
        let out = dir.file("E")
        let export = try VCacheBinary.start(["export", url, out], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        let v2 = Self.serve(origin, seed: 7, width: 640)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("could not be dropped ("), "\(r.stderr)")
        #expect(r.stderr.contains(": in use by another vcache process): the stream was left as it was, so it is never completed from two versions; run again once it is free"), "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.validators.etag == "\"m1\"")
        pause.release()
        let e = export.finish()
        #expect(e.status == 0, "\(e.stderr)")
        let oldDigests = Set(old.values.map { TestBytes.sha256($0) })
        let exported = Self.exportedDigests(out)
        #expect(exported.count == 4)
        #expect(exported.allSatisfy { oldDigests.contains($0) }, "the export mixes encodes")
        // Free again: the next run replaces the MPD and completes the new encode.
        let again = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        try Self.expectCompleteFrom(v2, etag: "\"m7\"", cache: cache, origin: origin, url: url)
    }

    /// F7: an export planned from the old MPD while a prefetch replaces the whole stream before
    /// it copies a member: the export fails (exit 3, replaced while exported), writing nothing,
    /// instead of an old MPD over new segments.
    @Test func anExportWhoseStreamIsReplacedAfterPlanningFailsAndWritesNothing() throws {
        let (origin, _, cache, url) = try partlyCached()
        let pause = PausePoint("stream-export-planned", in: dir)
        let out = dir.file("E")
        let export = try VCacheBinary.start(["export", url, out], cacheDir: cache, environment: pause.environment)
        let reached = pause.waitUntilReached(timeout: 20)
        #expect(reached, "no pause after planning")
        let v2 = Self.serve(origin, seed: 7, width: 640)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        try Self.expectCompleteFrom(v2, etag: "\"m7\"", cache: cache, origin: origin, url: url)
        pause.release()
        let e = export.finish()
        #expect(e.status == 3, "\(e.stderr)")
        #expect(e.stderr.contains("was replaced while it was being exported; nothing was written; try again"), "\(e.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out + "/manifest.mpd"))
    }

    /// F16: a run killed while it replaces the changed MPD (its old version's rows gone, the new
    /// bytes not yet claimed). The old members went before: the next run fetches the MPD as new
    /// and every member from the new encode.
    @Test func aRunKilledWhileReplacingTheMPDLeavesNoOldMemberForTheNextRun() throws {
        let (origin, _, cache, url) = try partlyCached()
        let v2 = Self.serve(origin, seed: 7, width: 640)
        let pause = PausePoint("drop-all-after-invalidate", in: dir)
        let running = try VCacheBinary.start(["prefetch", "-q", url], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        running.kill(SIGKILL)
        _ = running.finish()
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        try Self.expectCompleteFrom(v2, etag: "\"m7\"", cache: cache, origin: origin, url: url)
    }

    /// F15: `verify --fix` dropped the damaged MPD's bytes; the stream's members stay. The next
    /// run fetches the MPD as new (there is nothing to revalidate) and drops those members first:
    /// nothing says which version they are.
    @Test func membersOfAnMPDWhoseBytesWereDroppedAreDroppedBeforeTheStreamIsCompleted() throws {
        let (origin, _, cache, url) = try partlyCached()
        let key = try #require(try CacheInspector(directory: cache).entry(url)).key
        let data = try CacheStore(directory: cache).dataPath(key)
        let f = try #require(FileHandle(forWritingAtPath: data))
        try f.seek(toOffset: 100)
        f.write(Data("X".utf8))
        try f.close()
        _ = try VCacheBinary.run(["verify", "--fix"], cacheDir: cache)
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete != true)
        let v2 = Self.serve(origin, seed: 7, width: 640)
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(url): its manifest is no longer cached whole while its stream's members were: nothing says which version they are, so the 4 entries cached of them were dropped"), "\(r.stderr)")
        try Self.expectCompleteFrom(v2, etag: "\"m7\"", cache: cache, origin: origin, url: url)
    }
}
