#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 21, items 2-4: a body that cannot be the video is never cached as it, and values out of
/// range are errors, never traps.
@Suite struct NotTheVideoTests {
    let dir = TempDirectory("vcache-notvideo")
    var cache: String { dir.file("cache") }

    @Test func anEncodedBodyIsRefusedAndNeverAskedFor() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 214)
        // An origin that gzips on its own (the bytes here are not even gzip: they must not be kept).
        origin.setResource("/g.mp4", .init(body: body, etag: "\"g\"", extraHeaders: ["Content-Encoding": "gzip"]))
        let r = try VCacheBinary.run(["prefetch", origin.url("/g.mp4")], cacheDir: cache)
        #expect(r.status == 4)
        #expect(r.stderr.contains("Content-Encoding: gzip"), "\(r.stderr)")
        #expect((try CacheInspector(directory: cache).entry(origin.url("/g.mp4"))?.cachedBytes ?? 0) == 0)
        // vcache asks for the identity encoding, and refuses to ask for another.
        #expect(origin.headers("/g.mp4").first?["accept-encoding"] == "identity")
        let asked = try VCacheBinary.run(["prefetch", "-H", "Accept-Encoding: gzip", origin.url("/g.mp4")], cacheDir: cache)
        #expect(asked.status == 2)
        #expect(asked.stderr.contains("asks for no encoding"), "\(asked.stderr)")
    }

    /// Origin options that would put something else on the wire than the user wrote, or that
    /// libcurl would only refuse at run time (retried, exit 3), are usage errors (exit 2), and
    /// no request leaves: a CR/LF or NUL in a header, a header name that is not a token, headers
    /// vcache sets itself, a port out of range in --resolve, a proxy scheme libcurl cannot use.
    @Test func originOptionsThatWouldLieOnTheWireAreUsageErrors() throws {
        let origin = try TestOrigin()
        origin.setResource("/h.mp4", .init(body: TestBytes.make(10_000, seed: 215)))
        let url = origin.url("/h.mp4")
        let file = dir.file("headers.txt")
        try Data("X-A: 1\nX-B: 2\u{0}z\n".utf8).write(to: URL(fileURLWithPath: file))
        let cases: [([String], String)] = [
            (["-H", "X-A: a\r\nInjected: yes"], "invalid header 'X-A: a\\x0D\\x0AInjected: yes' for -H: it holds a control character"),
            (["-H", "@" + file], "invalid header on line 2 of '\(file)' for -H @FILE: it holds a control character (such as NUL or ESC); remove it"),
            (["-H", "Bad Name: x"], "invalid header 'Bad Name: x' for -H; use 'Name: value'"),
            (["-H", "Range: bytes=0-0"], "vcache sets Range itself"),
            (["--user-agent", "ua\r\nX: y"], "invalid value 'ua\\x0D\\x0AX: y' for --user-agent: it holds a control character"),
            (["--resolve", "h:99999:127.0.0.1"], "invalid value 'h:99999:127.0.0.1' for --resolve"),
            (["--proxy", "ftp://x"], "invalid proxy 'ftp://x' for --proxy"),
        ]
        for (args, message) in cases {
            let r = try VCacheBinary.run(["prefetch"] + args + [url], cacheDir: cache)
            #expect(r.status == 2 && r.stderr.contains(message), "\(args): \(r.stderr)")
        }
        #expect(origin.requests("/h.mp4").isEmpty)
        // A tab inside a value is fine, and so is --proxy '' (no proxy).
        #expect(try VCacheBinary.run(["prefetch", "-q", "-H", "X-Ok: a\tb", "--proxy", "", url], cacheDir: cache).status == 0)
    }

    /// nginx with `gzip on` for every type compresses the video for any client that accepts gzip
    /// (the entry was complete at 129 KiB of a 137 KiB file, verify said ok, export wrote gzip).
    @Test func anNginxThatGzipsEverythingStillGivesTheTrueBytes() throws {
        let nginx = try Nginx(gzip: true)
        let body = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("moov-at-front.mp4")))
        try body.write(to: URL(fileURLWithPath: nginx.root + "/z.mp4"))
        let url = "http://127.0.0.1:\(nginx.port)/z.mp4"
        // The same nginx does compress for a client that asks (else this test proves nothing).
        let curl = try Tool.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{size_download}", "-H", "Accept-Encoding: gzip", url])
        let compressed = Int(String(decoding: curl.out, as: UTF8.self)) ?? -1
        #expect(compressed > 0 && compressed < body.count, "curl got \(compressed) bytes of \(body.count)")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        let entry = try #require(try CacheInspector(directory: cache).entry(url))
        #expect(entry.isComplete && entry.sha256 == TestBytes.sha256(body))
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        let asked = try VCacheBinary.run(["prefetch", "-H", "Accept-Encoding: gzip", url], cacheDir: cache)
        #expect(asked.status == 2)
    }

    @Test func anHTMLPageOrANonMP4StartForAVideoURLIsNotKept() throws {
        let origin = try TestOrigin()
        origin.setResource("/page.mp4", .init(body: Data("<html><body>Not found</body></html>".utf8), contentType: "text/html; charset=utf-8"))
        origin.setResource("/junk.mp4", .init(body: Data(String(repeating: "Access denied. ", count: 100).utf8), contentType: "application/octet-stream"))
        for path in ["/page.mp4", "/junk.mp4"] {
            let r = try VCacheBinary.run(["prefetch", origin.url(path)], cacheDir: cache)
            #expect(r.status == 4, "\(path): \(r.stderr)")
            #expect((try CacheInspector(directory: cache).entry(origin.url(path))?.cachedBytes ?? 0) == 0, "\(path)")
        }
        let ls = try VCacheBinary.run(["ls", "--complete"], cacheDir: cache)
        #expect(!ls.stdout.contains("page.mp4") && !ls.stdout.contains("junk.mp4"))
        // A real MP4 still passes.
        let mp4 = try Fixtures.data("moov-at-front.mp4")
        origin.setResource("/real.mp4", .init(body: mp4, etag: "\"r\""))
        #expect(try VCacheBinary.run(["prefetch", origin.url("/real.mp4")], cacheDir: cache).status == 0)
    }

    @Test func rangesPastTheLargestOffsetAreUsageErrors() throws {
        for spec in ["0-9223372036854775807", "0-99999999999999999999", "+5-10", "5--1"] {
            let r = try VCacheBinary.run(["prefetch", "http://127.0.0.1:9/v.mp4", "--range", spec], cacheDir: cache)
            #expect(r.status == 2 && !r.signalledOrCrashed, "\(spec): exit \(r.status) \(r.stderr)")
        }
    }
}

/// Issue 21, item 5: an origin whose version flips per response is given up after a few
/// changes, with one line and exit 4, not dropped and fetched for ever.
@Suite struct UnstableOriginTests {
    let dir = TempDirectory("vcache-unstable")

    @Test
    func anETagFlippingPerResponseIsGivenUp() throws {
        let origin = try TestOrigin()
        origin.setResource("/flip.mp4", .init(body: try Fixtures.data("moov-at-end.mp4"), etag: "\"a\""))
        var f = TestOrigin.Faults()
        f.rotateETags = ["\"a\"", "\"b\""]
        origin.setFaults("/flip.mp4", f)
        // --seconds asks for the head, then the moov at the end, then samples: each answer another version.
        let again = try VCacheBinary.run(["prefetch", origin.url("/flip.mp4"), "--seconds", "5"], cacheDir: dir.file("c1"))
        #expect(again.status == 4, "\(again.stderr)")
        #expect(again.stderr.contains("version changed 3 times"), "\(again.stderr)")
        #expect(origin.requests("/flip.mp4").count <= 8, "\(origin.requests("/flip.mp4").count) requests")
        #expect(try VCacheBinary.run(["verify"], cacheDir: dir.file("c1")).status == 0)
    }
}

/// Issue 21, item 4: values out of range in the catalog are read as untrusted: a clear answer,
/// never a trap.
@Suite struct UntrustedCatalogTests {
    let dir = TempDirectory("vcache-untrusted")

    @Test func outOfRangeRowsGiveAnswersNotTraps() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        func sql(_ s: String) throws { #expect(try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", s]).status == 0) }
        try sql("UPDATE entries SET length = -5")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 1 && !verify.signalledOrCrashed, "\(verify.stderr)")
        try sql("UPDATE entries SET length = (SELECT max(end) FROM ranges), last_used = -1e300, created = 1e300")
        for args in [["ls"], ["info", url], ["ls", "--json"], ["evict", "--older-than", "1d", "--dry-run"]] {
            let r = try VCacheBinary.run(args, cacheDir: cache)
            #expect(r.status == 0 && !r.signalledOrCrashed, "\(args): exit \(r.status) \(r.stderr)")
        }
        // Byte counts whose sum over the catalog would overflow (found by a hostile review).
        try sql("UPDATE entries SET disk_bytes = 9223372036854775807, cached_bytes = 9223372036854775807, last_used = 1700000000")
        for args in [["ls"], ["ls", "--json"], ["evict", "--lru", "--max-size", "1G", "--dry-run"]] {
            let r = try VCacheBinary.run(args, cacheDir: cache)
            #expect(!r.signalledOrCrashed, "\(args): exit \(r.status) \(r.stderr)")
        }
    }
}

/// Issue 21, item 7: a cache directory reached through a symlink (a symlinked ~/.cache, or
/// --cache-dir naming a link) works; it is resolved once.
@Suite struct SymlinkedCacheTests {
    let dir = TempDirectory("vcache-symlink")

    @Test func aCacheReachedThroughASymlinkWorks() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        try FileManager.default.createDirectory(atPath: dir.file("real"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir.file("link"), withDestinationPath: dir.file("real"))
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: dir.file("link/vcache"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: dir.file("link/vcache")).status == 0)
        #expect(try VCacheBinary.run(["ls", "--cache-dir", dir.file("link/vcache")], cacheDir: nil).stdout.contains("f.mp4"))
        #expect(FileManager.default.fileExists(atPath: dir.file("real/vcache/catalog.db")))
    }
}

/// Issue 21, item 8: a page leaked from the catalog's free list ("Page N is never used": every row
/// still reads) is not corruption: verify stays clean and --fix removes nothing.
@Suite struct LeakedCatalogPageTests {
    let dir = TempDirectory("vcache-leak")

    @Test func aLeakedFreePageIsNotCorruption() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        let db = cache + "/catalog.db"
        let script = """
        set -e
        sqlite3 '\(db)' 'PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;' >/dev/null
        sqlite3 '\(db)' "CREATE TABLE junk(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<20) INSERT INTO junk SELECT printf('%.3000c', 'x') FROM n; DROP TABLE junk;"
        printf '\\0\\0\\0\\0\\0\\0\\0\\0' | dd of='\(db)' bs=1 seek=32 conv=notrunc 2>/dev/null
        sqlite3 '\(db)' 'PRAGMA integrity_check; PRAGMA journal_mode=WAL;'
        """
        let made = try Tool.run("/bin/bash", ["-c", script])
        #expect(String(decoding: made.out, as: UTF8.self).contains("is never used"), "the test did not leak a page: \(made.err)")
        let verify = try VCacheBinary.run(["verify"], cacheDir: cache)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(try VCacheBinary.run(["verify", "--fix"], cacheDir: cache).status == 0)
        #expect(try CacheInspector(directory: cache).entry(url)?.isComplete == true)
    }
}

/// Issue 21, item 10: export writes into streams and devices and never replaces anything that
/// is not a regular file.
@Suite struct ExportDestinationTests {
    let dir = TempDirectory("vcache-exportdest")

    /// A character device of the test's own (what /dev/null is; mknod needs root), with --force:
    /// written into, and still a device.
    @Test(.requires(.root))
    func aDeviceIsWrittenIntoWithForceAndStaysADevice() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        let null = dir.file("null")
        #expect(try Tool.run("/usr/bin/mknod", ["-m", "666", null, "c", "1", "3"]).status == 0)
        #expect(try VCacheBinary.run(["export", url, null, "--force"], cacheDir: cache).status == 0)
        #expect((FileSystem.status(null)!.st_mode & S_IFMT) == S_IFCHR)
    }

    @Test func streamsAndDevicesAreWrittenIntoAndOnlyRegularFilesReplaced() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-front.mp4")
        let url = try nginx.publish("f.mp4", body)
        let cache = dir.file("cache")
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        // stdout
        let out = try VCacheBinary.run(["export", url, "-"], cacheDir: cache)
        #expect(out.status == 0 && Data(out.stdout.utf8).count > 0)
        let piped = try Tool.run("/bin/bash", ["-c", "VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' export '\(url)' - | sha256sum"])
        #expect(String(decoding: piped.out, as: UTF8.self).hasPrefix(TestBytes.sha256(body)))
        // A reader that stops early: export ends as cat does, by SIGPIPE (141 in bash), silently.
        for dest in ["-", "/dev/stdout", "/dev/fd/1"] {
            let early = try Tool.run("/bin/bash", ["-c", "VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' export '\(url)' \(dest) | head -c 10 >/dev/null; echo ${PIPESTATUS[0]}"])
            #expect(String(decoding: early.out, as: UTF8.self) == "141\n" && early.err.isEmpty, "\(dest): \(early.err)")
        }
        // a FIFO
        let fifo = dir.file("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = try Tool.run("/bin/bash", ["-c", "cat '\(fifo)' > '\(dir.file("from-fifo"))' & VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' export '\(url)' '\(fifo)'; wait"])
        #expect(reader.status == 0, "\(reader.err)")
        #expect(TestBytes.sha256(file: dir.file("from-fifo")) == TestBytes.sha256(body))
        // a symlink is refused, even with --force, and stays a symlink
        let target = try dir.write("target.mp4", Data("keep".utf8))
        try FileManager.default.createSymbolicLink(atPath: dir.file("link.mp4"), withDestinationPath: target)
        let link = try VCacheBinary.run(["export", url, dir.file("link.mp4"), "--force"], cacheDir: cache)
        #expect(link.status == 1 && link.stderr.contains("is a symbolic link"), "\(link.stderr)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep")
    }
}

/// Issue 21, item 13: malformed URLs are usage errors (exit 2, not 3 for cron to retry for
/// ever) with the URL escaped; an internationalised host is converted; bytes that are not UTF-8
/// are refused.
@Suite struct MalformedURLTests {
    let dir = TempDirectory("vcache-badurl")

    @Test func malformedURLsAreUsageErrorsAndIDNHostsAreConverted() throws {
        let cache = dir.file("cache")
        for url in ["http://127.0.0.1:9/a b.mp4", "http://127.0.0.1:9/a\nb.mp4", "http://127.0.0.1:99999/x.mp4", "http://127.0.0.1:0/x.mp4"] {
            let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache)
            #expect(r.status == 2, "\(url.debugDescription): exit \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr.debugDescription)")
        }
        let idn = try VCacheBinary.run(["prefetch", "http://bücher.invalid/x.mp4", "--retries", "0", "--timeout", "2s", "-v"], cacheDir: cache)
        #expect(idn.stderr.contains("http://xn--bcher-kva.invalid/x.mp4"), "\(idn.stderr)")
        #expect(idn.status == 3)
        let bytes = try Tool.run("/bin/bash", ["-c", "VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' prefetch $'http://127.0.0.1:9/\\xff.mp4'"])
        #expect(bytes.status == 2 && bytes.err.contains("not valid UTF-8"), "\(bytes.err)")
    }
}

/// Issue 21 item 14 and issue 23's lists: a FIFO, `<(...)` and /dev/null are lists; lists with
/// CRLF line ends and a byte-order mark (Windows, Excel) read as their lines.
@Suite struct URLListTests {
    let dir = TempDirectory("vcache-lists")

    @Test func fifosDevNullAndWindowsListsAreRead() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let cache = dir.file("cache")
        let empty = try VCacheBinary.run(["prefetch", "-i", "/dev/null"], cacheDir: cache)
        #expect(empty.status == 0, "\(empty.stderr)")
        let fifo = try Tool.run("/bin/bash", ["-c", "VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' prefetch -q -i <(echo '\(url) 1K')"])
        #expect(fifo.status == 0, "\(fifo.err)")
        let windows = try dir.write("list.txt", Data("\u{FEFF}\(url) 2K\r\n# a comment\r\n\r\n\(url) 4K\r\n".utf8))
        let r = try VCacheBinary.run(["prefetch", "-i", windows], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        // One URL twice (2K and 4K): one entry, counted once (issue 32).
        #expect(r.stderrLines.last?.hasPrefix("1 done, 0 failed, 1 duplicate URL merged") == true, "\(r.stderr)")
        let folder = try VCacheBinary.run(["prefetch", "-i", dir.path], cacheDir: cache)
        #expect(folder.status == 2 && folder.stderr.contains("is a folder"))
        // A Latin-1 line is refused by number (read as U+FFFD it would fetch another URL); a
        // lone CR ends a line; the good lines are still fetched.
        var latin1 = Data("\(url) 1K\n".utf8)
        latin1.append(contentsOf: Array("\(url.dropLast(4))\u{e9}.mp4\n".utf8).map { $0 == 0xC3 ? 0xE9 : $0 }.filter { $0 != 0xA9 })
        latin1.append(Data("\(url) 2K\r\(url) 3K\n".utf8))
        let mixed = try VCacheBinary.run(["prefetch", "-i", try dir.write("latin1.txt", latin1)], cacheDir: cache)
        #expect(mixed.status == 1, "\(mixed.stderr)")
        #expect(mixed.stderr.contains("latin1.txt:2: not valid UTF-8"), "\(mixed.stderr)")
        #expect(mixed.stderrLines.last?.hasPrefix("1 done, 0 failed, 1 bad input line, 2 duplicate URLs merged") == true, "\(mixed.stderr)")
        // A list with lone CRs only: numbered by those line ends, the bad line alone refused.
        var crOnly = Data("\(url) 5K\r".utf8)
        crOnly.append(contentsOf: [0x68, 0xFF, 0x0D])
        crOnly.append(Data("not-a-url\r\(url) 6K\r".utf8))
        let cr = try VCacheBinary.run(["prefetch", "-i", try dir.write("cr.txt", crOnly)], cacheDir: cache)
        #expect(cr.stderr.contains("cr.txt:2: not valid UTF-8") && cr.stderr.contains("cr.txt:3: not an http(s) URL"), "\(cr.stderr)")
        #expect(cr.stderrLines.last?.hasPrefix("1 done, 0 failed, 2 bad input lines, 1 duplicate URL merged") == true, "\(cr.stderr)")
    }
}

/// Issue 21, item 12: a password in a URL is never printed (log lines, ls, ls --json, info,
/// verify), as curl and rclone do.
@Suite struct PasswordRedactionTests {
    let dir = TempDirectory("vcache-redact")

    @Test func passwordsInURLsAreNeverShown() throws {
        let nginx = try Nginx()
        let plain = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let url = plain.replacingOccurrences(of: "http://", with: "http://alice:s3cret@")
        let cache = dir.file("cache")
        var everything = ""
        for args in [["prefetch", url, "--bytes", "1K"], ["ls"], ["ls", "--json"], ["info", url], ["info", url, "--json"], ["verify"], ["prefetch", url, "--json"]] {
            let r = try VCacheBinary.run(args, cacheDir: cache)
            everything += r.stdout + r.stderr
        }
        // A URL refused for a space in its credentials, one without a scheme, an `@` in the password.
        for bad in [url.replacingOccurrences(of: "alice:", with: "al ice:"), "alice:s3cret@127.0.0.1/x.mp4",
                    url.replacingOccurrences(of: "s3cret", with: "s3c ret")] {
            let r = try VCacheBinary.run(["prefetch", bad, "--json"], cacheDir: cache)
            everything += r.stdout + r.stderr
        }
        #expect(!everything.contains("s3cret") && !everything.contains("s3c ret"), "\(everything)")
        #expect(everything.contains("alice:***@"))
    }
}

/// Issue 21, item 9: an entry another user made inside a user's cache (root ran a prefetch on
/// it) does not block eviction: it is skipped and named, the rest is freed, and only what went
/// counts as freed; verify names the real cause.
@Suite struct ForeignEntryTests {
    let dir = TempDirectory("vcache-foreign")

    @Test(.requires(.runuser))
    func anEntryThisUserCannotTouchIsSkippedAndNamedAndTheRestEvicted() throws {
        let nobodys = try NobodysCache(in: dir)
        let cache = nobodys.cache
        let nginx = try Nginx()
        let mine = try nginx.publish("mine.mp4", try Fixtures.data("moov-at-front.mp4"))
        let roots = try nginx.publish("roots.mp4", try Fixtures.data("moov-at-end.mp4"))
        let asNobody = nobodys.run
        #expect(try asNobody(["prefetch", mine]).status == 0)
        #expect(try VCacheBinary.run(["prefetch", roots], cacheDir: cache).status == 0)  // as root
        // The dry run finds what the run will: root's entry cannot go.
        let dry = try asNobody(["evict", "--max-size", "0", "--dry-run"])
        #expect(dry.status == 1 && dry.err.contains("roots.mp4") && dry.err.contains("Permission denied"), "\(dry.out)\(dry.err)")
        #expect(dry.out.contains("mine.mp4") && !dry.out.contains("roots.mp4"), "\(dry.out)")
        let evict = try asNobody(["evict", "--max-size", "0"])
        #expect(evict.out.contains("mine.mp4") && evict.out.contains("evicted"), "\(evict.out)\(evict.err)")
        #expect(evict.err.contains("skipped") && evict.err.contains("roots.mp4") && evict.err.contains("Permission denied"), "\(evict.out)\(evict.err)")
        let inspector = try CacheInspector(directory: cache)
        #expect(try inspector.entry(mine) == nil)
        #expect(try inspector.entry(roots)?.isComplete == true)
        let verify = try asNobody(["verify", "--fix"])
        #expect(!verify.out.contains("another vcache process"), "\(verify.out)")
        // Root's files are not readable to this user: that is said, never called "missing",
        // and --fix leaves root's entry as it is; evict --all says it failed.
        let check = try asNobody(["verify"])
        #expect(!check.out.contains("missing") && check.out.contains("Permission denied"), "\(check.out)")
        #expect(try inspector.entry(roots)?.isComplete == true)
        let all = try asNobody(["evict", "--all"])
        #expect(all.status == 1 && all.err.contains("roots.mp4"), "\(all.out)\(all.err)")
    }
}

/// Issue 21, item 11: SIGINT, SIGTERM or SIGHUP during an export leaves no hidden partial file.
@Suite struct InterruptedExportTests {
    let dir = TempDirectory("vcache-intexport")

    @Test(arguments: [SIGINT, SIGTERM, SIGHUP])
    func aSignalMidExportLeavesNoPartialFile(signal: Int32) throws {
        let origin = try TestOrigin()
        origin.setResource("/big.mp4", .init(body: TestBytes.make(6 << 20, seed: 216), etag: "\"big\""))
        let cache = dir.file("cache-\(signal)")
        #expect(try VCacheBinary.run(["prefetch", origin.url("/big.mp4")], cacheDir: cache).status == 0)
        let out = dir.file("out-\(signal)")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let pause = PausePoint("export-copying", in: dir)
        let running = try VCacheBinary.start(["export", origin.url("/big.mp4"), out + "/big.mp4"], cacheDir: cache, environment: pause.environment)
        #expect(pause.waitUntilReached())
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).count == 1)  // the temp file, mid-copy
        running.kill(signal)
        let r = running.finish()
        #expect(r.signalled, "exit \(r.status)")
        let left = try FileManager.default.contentsOfDirectory(atPath: out)
        #expect(left.isEmpty, "\(left)")
        try? FileManager.default.removeItem(atPath: pause.prefix + ".reached")
    }
}

/// Issue 21, item 6: on a full disk, eviction (which frees space), ls and verify still work:
/// the cache keeps a small reserve it gives back when the catalog cannot be opened.
@Suite struct FullDiskCatalogTests {
    let dir = TempDirectory("vcache-fullcat")

    @Test(.requires(.tmpfsMount)) func onAFullDiskEvictLsAndVerifyStillWork() throws {
        let disk = try SmallDisk(size: "4m", in: dir)
        defer { disk.unmount() }
        let mount = disk.path
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        let cache = mount + "/cache"
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        // Fill the rest of the file system.
        _ = try Tool.run("/bin/sh", ["-c", "head -c 10000000 /dev/zero > '\(mount)/fill'"])
        let ls = try VCacheBinary.run(["ls"], cacheDir: cache)
        #expect(ls.status == 0 && ls.stdout.contains("f.mp4"), "\(ls.stderr)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        let evict = try VCacheBinary.run(["evict", "--all"], cacheDir: cache)
        #expect(evict.status == 0 && evict.stdout.contains("evicted 1 entry"), "\(evict.stdout)\(evict.stderr)")
    }
}

/// Issue 22: the bench-only switches do nothing in the binary users get: an environment cannot
/// turn off the digest (or, the same way, the fsyncs).
@Suite struct BenchSwitchTests {
    let dir = TempDirectory("vcache-benchswitch")

    @Test func theBenchSwitchesAreIgnoredByTheShippedBinary() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-front.mp4")
        let url = try nginx.publish("f.mp4", body)
        let cache = dir.file("cache")
        let r = try VCacheBinary.run(["prefetch", url], cacheDir: cache, environment: ["VCACHE_BENCH_NO_SHA": "1", "VCACHE_BENCH_NO_FSYNC": "1"])
        #expect(r.status == 0)
        #expect(try CacheInspector(directory: cache).entry(url)?.sha256 == TestBytes.sha256(body))
    }
}

/// Issue 21, items 15 and 16: exit codes and small edges of evict, info --probe, --bytes 0,
/// export --all into a symlinked folder, and no empty shard folder left by a failed first fetch.
@Suite struct EdgeTests {
    let dir = TempDirectory("vcache-edges")
    var cache: String { dir.file("cache") }

    @Test func evictInfoBytesAndExportEdges() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("f.mp4", try Fixtures.data("moov-at-front.mp4"))
        #expect(try VCacheBinary.run(["prefetch", url], cacheDir: cache).status == 0)
        // info --probe is not use.
        let before = try #require(try CacheInspector(directory: cache).entry(url)).lastUsed
        #expect(try VCacheBinary.run(["evict", "--older-than", "1d", "--dry-run"], cacheDir: cache).status == 0)
        _ = try Tool.run("/usr/bin/sqlite3", [cache + "/catalog.db", "UPDATE entries SET last_used = last_used - 86400"])
        let aged = try #require(try CacheInspector(directory: cache).entry(url)).lastUsed
        #expect(aged < before)
        #expect(try VCacheBinary.run(["info", url, "--probe"], cacheDir: cache).status == 0)
        #expect(abs(try #require(try CacheInspector(directory: cache).entry(url)).lastUsed.timeIntervalSince(aged)) < 0.01)
        // --bytes 0 is a usage error, not an empty entry.
        #expect(try VCacheBinary.run(["prefetch", nginx.url("/other.mp4"), "--bytes", "0"], cacheDir: cache).status == 2)
        // export --all into a folder reached through a symlink.
        try FileManager.default.createDirectory(atPath: dir.file("real"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir.file("link"), withDestinationPath: dir.file("real"))
        #expect(try VCacheBinary.run(["export", "--all", dir.file("link")], cacheDir: cache).status == 0)
        #expect(FileManager.default.fileExists(atPath: dir.file("real/f.mp4")))
        // An entry named and in use is not evicted: exit 1.
        let data = try CacheInspector(directory: cache).store.dataPath(try #require(try CacheInspector(directory: cache).entry(url)).key)
        let holder = try Tool.run("/bin/bash", ["-c", "exec 3<'\(data)'; flock -s 3; VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' evict '\(url)'; echo \"exit=$?\""])
        #expect(String(decoding: holder.out, as: UTF8.self).contains("exit=1"), "\(String(decoding: holder.out, as: UTF8.self)) \(holder.err)")
        // Everything asked to go, and gone: exit 0 even though the catalog itself stays.
        let all = try VCacheBinary.run(["evict", "--max-size", "0", "--include-pinned"], cacheDir: cache)
        #expect(all.status == 0, "\(all.stdout)\(all.stderr)")
        // A failed first fetch leaves no empty shard folder.
        #expect(try VCacheBinary.run(["prefetch", nginx.url("/missing.mp4")], cacheDir: cache).status == 4)
        let shards = try FileManager.default.contentsOfDirectory(atPath: cache + "/entries")
        #expect(shards.isEmpty, "\(shards)")
    }
}

/// Issue 23: exit 5 ("fix this machine") on `$?` and in the JSON error alike, from one source.
@Suite struct ExitFiveTests {
    let dir = TempDirectory("vcache-exit5")

    @Test func anUnusableCacheDirectoryExitsFiveEverywhere() throws {
        let file = try dir.write("not-a-folder", Data("x".utf8))
        for args in [["ls"], ["ls", "--json"], ["verify"], ["evict", "--all"], ["info", "http://127.0.0.1:9/x.mp4"], ["prefetch", "http://127.0.0.1:9/x.mp4"]] {
            let r = try VCacheBinary.run(args, cacheDir: file + "/cache")
            #expect(r.status == 5, "\(args): exit \(r.status) \(r.stderr)")
            if args.contains("--json") { #expect(r.stdout.contains("\"exit_code\":5"), "\(r.stdout)") }
        }
    }
}

/// Issue 21, item 11: `prefetch --json | head -1` (SIGPIPE) checkpoints what arrived before dying
/// by the signal, as SIGINT and SIGTERM do.
@Suite struct BrokenPipeTests {
    let dir = TempDirectory("vcache-pipe")

    @Test
    func aClosedPipeCheckpointsWhatArrived() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(8 << 20, seed: 218)
        origin.setResource("/p.mp4", .init(body: body, etag: "\"p\""))
        origin.throttle("/p.mp4", to: 2 << 20)
        let cache = dir.file("cache")
        let r = try Tool.run("/bin/bash", ["-c", "VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' prefetch --json '\(origin.url("/p.mp4"))' | head -1 >/dev/null; echo \"${PIPESTATUS[0]}\""])
        #expect(String(decoding: r.out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "141", "\(String(decoding: r.out, as: UTF8.self)) \(r.err)")
        let claims = try CacheInspector(directory: cache).verifyClaims(origin.url("/p.mp4"), origin: body)
        #expect(claims.mismatch == nil)
        #expect(claims.claimed > 0, "nothing was checkpointed")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}
