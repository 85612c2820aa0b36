import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// The built binary, run as a user would: stdout, stderr, exit codes.
@Suite struct CLITests {
    let dir = TempDirectory("vcache-cli")
    var cache: String { dir.file("cache") }

    func vcache(_ args: String...) throws -> VCacheRun {
        try VCacheBinary.run(args, cacheDir: cache)
    }

    /// Failures at the C boundary arrive typed, with their cause: a catalog a newer vcache wrote
    /// (it was a DatabaseError with code 0), a port another program holds (errno was read late).
    @Test func aNewerCatalogAndATakenPortSayWhatIsWrong() throws {
        #expect(try vcache("config", "unset", "max-size").status == 0)
        #expect(try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", "PRAGMA user_version = 7"]).status == 0)
        let newer = try vcache("ls", "--json")
        #expect(newer.status == 5)
        #expect(newer.stderr.contains("was written by a newer vcache (schema 7; this one knows \(Catalog.schemaVersion)); upgrade vcache"), "\(newer.stderr)")
        #expect(newer.stdout.contains("\"exit_code\":5"))

        let taken = try TestOrigin()  // listening on its port
        let serve = try VCacheBinary.run(["serve", "--listen", "127.0.0.1:\(taken.port)"], cacheDir: dir.file("other"))
        #expect(serve.status != 0)
        #expect(serve.stderr.contains("cannot listen on 127.0.0.1:\(taken.port): Address already in use"), "\(serve.stderr)")
    }

    /// Found by a hostile review: an empty --cache-dir quietly meant the default cache, `--json
    /// export URL -` mixed the video into the JSON lines, and `--json` before an unknown command
    /// gave no `error` event.
    @Test func emptyPathsJSONIntoAVideoAndUnknownCommandsUnderJSONAreUsageErrors() throws {
        for args in [["--cache-dir", "", "ls"], ["--cache-dir=", "ls"], ["ls", "--cache-dir", ""]] {
            let r = try VCacheBinary.run(args, cacheDir: nil)
            #expect(r.status == 2 && r.stderr.contains("--cache-dir needs a path, not an empty value"), "\(args): \(r.stderr)")
        }
        let mixed = try vcache("export", "--json", "http://127.0.0.1:9/a.mp4", "-")
        #expect(mixed.status == 2 && mixed.stdout.contains("\"kind\":\"usage\"") && mixed.stdout.contains("exclude each other"))
        let unknown = try vcache("--json", "bogus")
        #expect(unknown.status == 2)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(unknown.stdout.utf8)) as? [String: Any])
        #expect(event["event"] as? String == "error" && (event["error"] as? [String: Any])?["kind"] as? String == "usage")
    }

    @Test func helpListsTheCommandsAndExitsZero() throws {
        let r = try vcache("--help")
        #expect(r.status == 0)
        #expect(r.stdout.contains("prefetch"))
        #expect(r.stdout.contains("ls"))
        #expect(r.stderr.isEmpty)
    }

    @Test func commandHelpComesFromTheSameDeclarationAsParsing() throws {
        let a = try vcache("help", "prefetch")
        let b = try vcache("prefetch", "--help")
        #expect(a.status == 0 && b.status == 0)
        #expect(a.stdout == b.stdout)
        #expect(a.stdout.contains("--bytes SIZE"))
        #expect(a.stdout.contains("--range A-B"))
    }

    @Test func versionPrintsTheVersionAndTheLibrariesItRunsOn() throws {
        let r = try vcache("--version")
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("vcache 0.") == true)
        #expect(lines.contains { $0.hasPrefix("  libcurl: libcurl/") })
        #expect(lines.contains { $0.hasPrefix("  SQLite: 3.") })
        #expect(lines.contains { $0.hasPrefix("  crypto: OpenSSL 3") })
        #expect(lines.contains { $0.hasPrefix("  libmicrohttpd: 0.9.") })
        #expect(lines.contains { $0.hasPrefix("  libxml2: 2.") })
    }

    @Test func originRequestsGoThroughAProxyWhenAskedTo() throws {
        let proxy = try TestOrigin()  // answers absolute-form requests as a forward proxy would
        let body = TestBytes.make(40_000, seed: 9)
        proxy.setResource("/p.mp4", .init(body: body, etag: "\"p\""))
        let url = "http://origin.invalid/p.mp4"  // never resolved: the proxy is asked instead
        let r = try vcache("prefetch", "-q", url, "--proxy", proxy.baseURL)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }

    @Test func verboseShowsTheHeadsAndTheDecisions() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 10)
        origin.setResource("/v.mp4", .init(body: body, etag: "\"v1\""))
        let url = origin.url("/v.mp4")
        #expect(try vcache("prefetch", "-q", url, "--bytes", "100000").status == 0)
        let r = try VCacheBinary.run(["-v", "prefetch", "-q", url], cacheDir: cache)
        #expect(r.status == 0)
        #expect(r.stderr.contains("\(url): > GET Range: bytes=100000-299999 If-Range: \"v1\"\n"))
        #expect(r.stderr.contains("\(url): < 206 Partial Content Content-Range: bytes 100000-299999/300000 Content-Length: 200000 ETag: \"v1\"\n"))
        #expect(r.stderr.contains("\(url): accepted: bytes go at offset 100000 up to 300000\n"))
    }

    @Test func globalOptionsMayComeBeforeTheCommand() throws {
        #expect(try VCacheBinary.run(["--cache-dir", dir.file("other"), "config", "unset", "max-size"], cacheDir: nil).status == 0)
        let r = try VCacheBinary.run(["--cache-dir", dir.file("other"), "ls"], cacheDir: nil)
        #expect(r.status == 0)
        #expect(r.stdout == "the cache at \(dir.file("other")) is empty; add videos with 'vcache prefetch URL'\n")
    }

    /// Issue 32: `-q`, `-v`, `--cache-dir`, `--json` and `--no-color` are taken before or after
    /// every command (`vcache -q evict ...` exited 2), and -q leaves stderr to errors.
    @Test func theGlobalFlagsAreTakenBeforeOrAfterEveryCommand() throws {
        let origin = try TestOrigin()
        origin.setResource("/g.mp4", .init(body: TestBytes.make(20_000, seed: 6), etag: "\"g\""))
        let url = origin.url("/g.mp4")
        #expect(try vcache("prefetch", "-q", url).status == 0)
        let out = dir.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let commands: [[String]] = [["evict", "--lru", "--max-size", "20G"], ["ls"], ["verify"], ["pin", url], ["unpin", url], ["check", url],
                                    ["info", url], ["status"], ["url", url], ["config", "get", "max-size"], ["export", url, out]]
        for c in commands {
            for args in [["-q"] + c, c + ["-q"], ["-v", "--no-color"] + c, c + ["--verbose", "--no-color"], ["--json"] + c, ["--cache-dir", cache] + c] {
                if c[0] == "export" { try? FileManager.default.removeItem(atPath: out + "/g.mp4") }
                let r = try VCacheBinary.run(args, cacheDir: args.contains("--cache-dir") ? nil : cache)
                #expect(r.status == 0, "\(args): \(r.stderr)")
                if args.contains("-q") { #expect(r.stderr == "", "\(args): \(r.stderr)") }
            }
        }
        // An error still shows under -q, and --json makes it an error event for any command.
        let missing = try vcache("-q", "pin", "http://127.0.0.1:9/none.mp4", "--json")
        #expect(missing.status == 1)
        #expect(missing.stderr == "vcache: not in the cache: http://127.0.0.1:9/none.mp4; see 'vcache ls'\n")
        #expect(missing.stdout.contains("\"event\":\"error\"") && missing.stdout.contains("\"kind\":\"not_found\""))
    }

    /// Issue 32: `/%20.mp4` was exported as the hidden file `.mp4.mp4`.
    @Test func aNameOfBlanksAndAnExtensionExportsUnderTheKeyNotAsAHiddenFile() throws {
        let origin = try TestOrigin()
        origin.setResource("/%20.mp4", .init(body: TestBytes.make(10_000, seed: 7), etag: "\"b\""))
        let url = origin.url("/%20.mp4")
        #expect(try vcache("prefetch", "-q", url).status == 0)
        let out = dir.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let r = try vcache("export", url, out)
        #expect(r.status == 0, "\(r.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: out)
        #expect(files.count == 1 && files[0].hasPrefix("video-") && files[0].hasSuffix(".mp4"), "\(files)")
        #expect(r.stdout == "exported \(out)/\(files[0]) (9.8 KiB)\n")
    }

    @Test func headersFromAFileAndResolveReachTheOriginAsCurlWouldSendThem() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(50_000, seed: 8)
        origin.setResource("/r.mp4", .init(body: body, etag: "\"r\""))
        try dir.write("headers.txt", Data("# secrets stay out of ps\nAuthorization: Bearer s3cret\n\nX-Device: kiosk-7\n".utf8))
        // A name no DNS knows, pinned to the test origin: no traffic leaves 127.0.0.1.
        let url = "http://video.test:\(origin.port)/r.mp4"
        let r = try vcache("prefetch", "-q", url, "-H", "@" + dir.file("headers.txt"), "--resolve", "video.test:\(origin.port):127.0.0.1", "-4")
        #expect(r.status == 0, "\(r.stderr)")
        let sent = try #require(origin.headers("/r.mp4").first)
        #expect(sent["authorization"] == "Bearer s3cret")
        #expect(sent["x-device"] == "kiosk-7")
        #expect(sent["host"] == "video.test:\(origin.port)")
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
        let missing = try vcache("prefetch", url, "-H", "@" + dir.file("nope.txt"))
        #expect(missing.status == 2)
        #expect(missing.stderr == "vcache: cannot read headers from '\(dir.file("nope.txt"))' for -H @FILE: no such file or not readable\n")
        let bad = try vcache("prefetch", url, "--resolve", "video.test")
        #expect(bad.status == 2)
        #expect(bad.stderr == "vcache: invalid value 'video.test' for --resolve; use HOST:PORT:ADDR, e.g. cdn.example:443:10.0.0.5\n")
    }

    @Test func aMistypedOptionSuggestsTheClosestAndExitsTwo() throws {
        let r = try vcache("prefetch", "http://127.0.0.1:9/x.mp4", "--byts", "2M")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: unknown option '--byts' for 'prefetch'; did you mean '--bytes'?\n")
        #expect(r.stdout.isEmpty)
    }

    @Test func aMistypedCommandSuggestsTheClosest() throws {
        let r = try vcache("prefech", "x")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: unknown command 'prefech'; did you mean 'prefetch'?\n")
    }

    @Test func aBadSizeNamesTheValueAndTheFix() throws {
        let r = try vcache("prefetch", "http://127.0.0.1:9/x.mp4", "--bytes", "2X")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: invalid size '2X' for --bytes; use e.g. 2M, 512K, 1.5G\n")
    }

    @Test func aBadRangeNamesTheValueAndTheFix() throws {
        let r = try vcache("prefetch", "http://127.0.0.1:9/x.mp4", "--range", "9-3")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: invalid range '9-3' for --range; use A-B, A- or -N (bytes, inclusive)\n")
    }

    @Test func prefetchWithoutAURLIsAUsageError() throws {
        let r = try vcache("prefetch")
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("vcache: 'prefetch' needs a URL"))
    }

    @Test(arguments: [
        ("ftp://127.0.0.1/x.mp4", "scheme 'ftp' is not supported; only http and https"),
        ("file:///etc/passwd", "scheme 'file' is not supported; only http and https"),
        ("not-a-url", "not a valid URL; give an absolute http:// or https:// URL"),
    ])
    func aBadURLOnTheCommandLineIsAUsageError(url: String, why: String) throws {
        let r = try vcache("prefetch", url, "http://127.0.0.1:9/fine.mp4")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: cannot prefetch \(url): \(why)\n")
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir.file("cache/entries"))) ?? []
        #expect(entries.isEmpty)
    }

    @Test func aBadURLInAListIsOneFailedLineAndTheOthersAreDone() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(100_000, seed: 3)
        origin.setResource("/ok.mp4", .init(body: body, etag: "\"ok\""))
        let r = try VCacheBinary.run(["prefetch", "-i", "-", "-q"], cacheDir: cache, stdin: "ftp://127.0.0.1/x.mp4\n\(origin.url("/ok.mp4"))\n")
        #expect(r.status == 1)
        #expect(r.stderr.contains("stdin:1: not an http(s) URL: 'ftp://127.0.0.1/x.mp4'; line skipped"))
        #expect(try CacheInspector(directory: dir.file("cache")).entry(origin.url("/ok.mp4"))?.sha256 == TestBytes.sha256(body))
    }

    @Test(arguments: ["--max-time", "--timeout", "--connect-timeout"])
    func anAbsurdDurationIsAUsageErrorNotACrash(option: String) throws {
        let r = try vcache("prefetch", "http://127.0.0.1:9/x.mp4", option, "1e300")
        #expect(r.status == 2)
        #expect(r.stderr == "vcache: invalid duration '1e300' for \(option); use e.g. 30s, 5m, 2h (at most 3650d)\n")
    }

    @Test func aRefusedConnectionIsOneLineAndExitThreeTryLater() throws {
        let r = try vcache("prefetch", "http://127.0.0.1:9/x.mp4", "--retries", "0", "-q")
        #expect(r.status == 3)
        #expect(r.stderr.hasPrefix("vcache: cannot prefetch http://127.0.0.1:9/x.mp4: cannot connect ("))
        #expect(r.stderr.split(separator: "\n").count == 1)
    }

    @Test func anUnusableCacheDirectoryIsReported() throws {
        try dir.write("file", Data("x".utf8))
        let r = try VCacheBinary.run(["ls", "--cache-dir", dir.file("file/cache")], cacheDir: nil)
        #expect(r.status == 5)  // fix this machine (Docs/cron.md), as the JSON error says
        #expect(r.stderr == "vcache: cache directory '\(dir.file("file/cache"))' is not usable: Not a directory; choose another with --cache-dir or VCACHE_DIR\n")
    }

    @Test func lsOnAnEmptyCacheSaysSo() throws {
        #expect(try vcache("config", "unset", "max-size").status == 0)  // makes the cache
        let r = try vcache("ls")
        #expect(r.status == 0)
        #expect(r.stdout == "the cache at \(cache) is empty; add videos with 'vcache prefetch URL'\n")
    }

    /// Every file and folder under the cache, with its permission bits.
    func modes(under root: String) -> [String: mode_t] {
        var out: [String: mode_t] = [:]
        if let st = FileSystem.status(root) { out["."] = st.st_mode }
        let e = FileManager.default.enumerator(atPath: root)
        while let name = e?.nextObject() as? String {
            if let st = FileSystem.status(root + "/" + name) { out[name] = st.st_mode }
        }
        return out
    }

    @Test func everyFileIsPrivateWhateverTheUmaskEvenTheCatalogAndItsWAL() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(6 << 20, seed: 77)
        origin.setResource("/m.mp4", .init(body: body, etag: "\"m\""))
        origin.throttle("/m.mp4", to: 3 << 20)
        // umask 000: nothing but vcache's own modes decides.
        let running = try VCacheBinary.start(["-c", "umask 000; exec \"$0\" prefetch \"$1\" -q", VCacheBinary.path, origin.url("/m.mp4")],
                                             cacheDir: cache, executable: "/bin/sh")
        // Past the first checkpoint the catalog's -wal and -shm exist: look while they do.
        #expect(origin.waitUntilServed("/m.mp4", atLeast: 5 << 20))
        let during = modes(under: cache)
        #expect(running.finish().status == 0)
        let after = modes(under: cache)
        #expect(during.keys.contains("catalog.db-wal") && during.keys.contains("catalog.db-shm"))
        #expect(during.keys.contains { $0.hasSuffix("/data") })
        for (name, mode) in during.merging(after, uniquingKeysWith: { a, _ in a }) {
            let isDir = mode & S_IFMT == S_IFDIR
            #expect(mode & 0o777 == (isDir ? 0o700 : 0o600), "\(name) has mode \(String(mode & 0o777, radix: 8))")
        }
    }
}
