#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 23: the documented box setup works. A cache folder with the set-group-ID bit is shared
/// by its group: a warm-up run as root and a serve run as the service user use one cache, and
/// the served user plays what root warmed, offline too.
@Suite struct BoxSetupTests {
    let dir = TempDirectory("vcache-box")

    @Test(.requires(.runuser))
    func aGroupSharedCacheIsUsedByRootsWarmUpAndTheServiceUsersServe() throws {
        let binary = try VCacheBinary.copy(into: dir)
        // As the package makes it: `install -d -m 2770 -g vcache /var/cache/vcache` (nobody's
        // group stands in for vcache's here).
        let cache = dir.file("cache")
        #expect(try Tool.run("/usr/bin/install", ["-d", "-m", "2770", "-o", "nobody", "-g", "nogroup", cache]).status == 0)
        let origin = try TestOrigin()
        let warm = TestBytes.make(700_000, seed: 231), later = TestBytes.make(300_000, seed: 232)
        origin.setResource("/warm.mp4", .init(body: warm, etag: "\"w\""))
        origin.setResource("/later.mp4", .init(body: later, etag: "\"l\""))
        // root warms (with root's usual umask, which would narrow the group's modes).
        let warmed = try Tool.run("/bin/bash", ["-c", "umask 022; VCACHE_DIR='\(cache)' '\(binary)' prefetch -q '\(origin.url("/warm.mp4"))'"])
        #expect(warmed.status == 0, "\(warmed.err)")
        for path in try FileManager.default.subpathsOfDirectory(atPath: cache) {
            let st = try #require(FileSystem.status(cache + "/" + path))
            let isDir = (st.st_mode & S_IFMT) == S_IFDIR
            #expect(st.st_mode & 0o7777 == (isDir ? 0o2770 : 0o660), "\(path): \(String(st.st_mode & 0o7777, radix: 8))")
            #expect(st.st_gid == 65534, "\(path) group \(st.st_gid)")
        }
        // nobody serves it, offline: every byte root warmed comes from the cache.
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, user: "nobody", binary: binary)
        origin.stop()
        let refused = RefusingPort(origin.port)
        defer { withExtendedLifetime(refused) {} }
        let out = dir.file("warm.out")
        let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, "-w", "%{http_code}", serve.url(origin.url("/warm.mp4"))])
        #expect(String(decoding: r.out, as: UTF8.self) == "200" && TestBytes.sha256(file: out) == TestBytes.sha256(warm))
        _ = serve.stop()
        // And the other way: what the service user stores, root verifies and evicts.
        let origin2 = try TestOrigin()
        origin2.setResource("/later.mp4", .init(body: later, etag: "\"l\""))
        let asNobody = try Tool.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "VCACHE_DIR=\(cache)", binary, "prefetch", "-q", origin2.url("/later.mp4")])
        #expect(asNobody.status == 0, "\(asNobody.err)")
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
        let evict = try Tool.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "VCACHE_DIR=\(cache)", binary, "evict", "--all"])
        #expect(evict.status == 0, "\(evict.err)")
        #expect(try CacheInspector(directory: cache).store.catalog.allEntries().isEmpty)
    }

    /// Without the set-group-ID bit a cache stays private to its owner, whatever the umask.
    @Test func aPlainCacheStaysPrivate() throws {
        let cache = dir.file("private")
        let origin = try TestOrigin()
        origin.setResource("/p.mp4", .init(body: TestBytes.make(100_000, seed: 233), etag: "\"p\""))
        let r = try Tool.run("/bin/bash", ["-c", "umask 000; VCACHE_DIR='\(cache)' '\(VCacheBinary.path)' prefetch -q '\(origin.url("/p.mp4"))'"])
        #expect(r.status == 0)
        for path in try FileManager.default.subpathsOfDirectory(atPath: cache) {
            let st = try #require(FileSystem.status(cache + "/" + path))
            #expect(st.st_mode & 0o077 == 0, "\(path): \(String(st.st_mode & 0o7777, radix: 8))")
        }
    }

    /// serve reports readiness to systemd (Type=notify) and on SIGHUP reads the cache's settings
    /// again: a cap set meanwhile holds for what it stores next (it died of SIGHUP, exit 129).
    @Test
    func serveNotifiesSystemdAndReloadsTheCapOnSIGHUP() throws {
        let notify = try NotifySocket(path: dir.file("notify.sock"))
        let cache = dir.file("hup")
        let origin = try TestOrigin()
        let body = TestBytes.make(2 << 20, seed: 234)
        origin.setResource("/big.mp4", .init(body: body, etag: "\"big\""))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        #expect(try VCacheBinary.run(["config", "set", "max-size", "600K"], cacheDir: cache).status == 0)
        kill(serve.process.pid, SIGHUP)
        #expect(notify.receive()?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true)
        #expect(notify.receive() == "READY=1")
        let out = dir.file("big.out")
        let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, "-w", "%{http_code}", serve.url(origin.url("/big.mp4"))])
        #expect(String(decoding: r.out, as: UTF8.self) == "200" && TestBytes.sha256(file: out) == TestBytes.sha256(body))
        #expect(serve.process.isRunning)
        let stopped = serve.stop()
        #expect(stopped.signalled && stopped.status == SIGTERM)
        #expect(notify.receive() == "STOPPING=1")
        #expect(serve.log.contains { $0.contains("reloaded the settings (SIGHUP): cap 600 KiB") }, "\(serve.log)")
        #expect(!serve.log.contains { $0.contains("key rules") }, "\(serve.log)")
        let store = try CacheInspector(directory: cache).store
        let usage = Evictor(store: store).footprint().total(try store.catalog.allEntries())
        let du = String(decoding: try Tool.run("/usr/bin/du", ["-ab", cache]).out, as: UTF8.self)
        #expect(usage <= 600 << 10, "the cache uses \(usage): \(du)")
    }

    /// Key rules changed in the config while serve runs are not taken by SIGHUP (every cached
    /// video would get another key), and serve says so with what to do (hostile probe h10b, F1).
    @Test
    func aKeyRuleChangedWhileServeRunsIsSaidOnSIGHUP() throws {
        let notify = try NotifySocket(path: dir.file("notify-keys.sock"))
        let cache = dir.file("keys")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        #expect(try VCacheBinary.run(["config", "set", "key-strip-param", "token"], cacheDir: cache).status == 0)
        kill(serve.process.pid, SIGHUP)
        #expect(notify.receive()?.hasPrefix("RELOADING=1") == true)
        #expect(notify.receive() == "READY=1")
        _ = serve.stop()
        #expect(serve.log.contains { $0.hasSuffix("vcache serve: the key rules in the cache's config changed (key-ignore-query, key-strip-param); a running serve keeps the ones it started with: restart it (systemctl restart vcache-serve) to key URLs by the new ones") }, "\(serve.log)")
    }

    /// A box whose file system went read-only can still be inspected (ls, info, verify, status
    /// refused with "Read-only file system"); storing says what is wrong with exit 5.
    @Test(.requires(.tmpfsMount))
    func inspectionWorksOnAReadOnlyCache() throws {
        let disk = try SmallDisk(size: "16m", in: dir)
        defer { disk.unmount() }
        let cache = disk.path + "/cache"
        let origin = try TestOrigin()
        let body = TestBytes.make(500_000, seed: 235)
        origin.setResource("/ro.mp4", .init(body: body, etag: "\"ro\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", origin.url("/ro.mp4")], cacheDir: cache).status == 0)
        #expect(try disk.remount(readOnly: true))
        for args in [["ls"], ["ls", "--json"], ["info", origin.url("/ro.mp4")], ["verify"], ["status"]] {
            let r = try VCacheBinary.run(args, cacheDir: cache)
            #expect(r.status == 0, "\(args): \(r.stderr)")
        }
        #expect(try VCacheBinary.run(["ls"], cacheDir: cache).stdout.contains("ro.mp4"))
        let store = try VCacheBinary.run(["prefetch", origin.url("/other.mp4")], cacheDir: cache)
        #expect(store.status == 5 && store.stderr.contains("Read-only file system"), "\(store.stderr)")
        #expect(try disk.remount(readOnly: false))
    }

    /// A mistyped VCACHE_DIR is not an empty cache: a command that only reads says there is none
    /// there (exit 1) and makes nothing.
    @Test func aCommandThatOnlyReadsFindsNoCacheWhereThereIsNone() throws {
        let typo = dir.file("vcahce")
        for args in [["ls"], ["ls", "--json"], ["info", "http://127.0.0.1:9/x.mp4"], ["verify"], ["status"], ["config", "get"], ["check", "http://127.0.0.1:9/x.mp4"]] {
            let r = try VCacheBinary.run(args, cacheDir: typo)
            #expect(r.status == 1, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("there is no cache at '\(typo)'") || r.stdout.contains("\"kind\":\"no_cache\""), "\(args): \(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: typo))
    }

    /// A full disk is a reason to make room before failing: the least recently used videos go
    /// and the download goes on (it failed with "No space left on device").
    @Test(.requires(.tmpfsMount))
    func aFullDiskMakesRoomInsteadOfFailing() throws {
        let disk = try SmallDisk(size: "8m", in: dir)
        defer { disk.unmount() }
        let cache = disk.path + "/cache"
        let origin = try TestOrigin()
        for i in 0..<5 { origin.setResource("/old\(i).mp4", .init(body: TestBytes.make(1 << 20, seed: UInt64(240 + i)))) }
        let big = TestBytes.make(4 << 20, seed: 246)
        origin.setResource("/big.mp4", .init(body: big, etag: "\"big\""))
        #expect(try VCacheBinary.run(["prefetch", "-q", "-j", "1"] + (0..<5).map { origin.url("/old\($0).mp4") }, cacheDir: cache).status == 0)
        let r = try VCacheBinary.run(["prefetch", origin.url("/big.mp4")], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try CacheInspector(directory: cache).entry(origin.url("/big.mp4"))?.sha256 == TestBytes.sha256(big))
        #expect(try CacheInspector(directory: cache).entry(origin.url("/old0.mp4")) == nil)  // the least recently used went
    }

    /// `min-free` keeps room on the disk (nginx's min_free): the cache gives way before the disk fills.
    @Test(.requires(.tmpfsMount))
    func minFreeKeepsRoomOnTheDisk() throws {
        let disk = try SmallDisk(size: "12m", in: dir)
        defer { disk.unmount() }
        let cache = disk.path + "/cache"
        let origin = try TestOrigin()
        for i in 0..<8 { origin.setResource("/m\(i).mp4", .init(body: TestBytes.make(1 << 20, seed: UInt64(250 + i)))) }
        #expect(try VCacheBinary.run(["config", "set", "min-free", "5M"], cacheDir: cache).status == 0)
        for i in 0..<8 {
            let r = try VCacheBinary.run(["prefetch", "-q", origin.url("/m\(i).mp4")], cacheDir: cache)
            #expect(r.status == 0, "\(r.stderr)")
        }
        var fs = statvfs()
        #expect(statvfs(disk.path, &fs) == 0)
        #expect(Int64(fs.f_bavail) * Int64(fs.f_frsize) >= 5 << 20)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/m7.mp4"))?.isComplete == true)
    }

    /// serve keeps config min-free too, as set when SIGHUP reloads the settings: what it stores
    /// for players evicts least recently used videos to keep the space free, and the newest
    /// played video is kept whole.
    @Test(.requires(.tmpfsMount))
    func serveKeepsTheMinFreeSIGHUPReloads() throws {
        let disk = try SmallDisk(size: "12m", in: dir)
        defer { disk.unmount() }
        let cache = disk.path + "/cache"
        let notify = try NotifySocket(path: dir.file("notify3.sock"))
        let origin = try TestOrigin()
        let bodies = (0..<8).map { TestBytes.make(1 << 20, seed: UInt64(270 + $0)) }
        for (i, b) in bodies.enumerated() { origin.setResource("/f\(i).mp4", .init(body: b, etag: "\"f\(i)\"")) }
        #expect(try VCacheBinary.run(["config", "unset", "min-free"], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        #expect(try VCacheBinary.run(["config", "set", "min-free", "5M"], cacheDir: cache).status == 0)
        kill(serve.process.pid, SIGHUP)
        #expect(notify.receive()?.hasPrefix("RELOADING=1") == true && notify.receive() == "READY=1")
        for (i, b) in bodies.enumerated() {
            let out = dir.file("f\(i).out")
            let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, serve.url(origin.url("/f\(i).mp4"))])
            #expect(r.status == 0 && TestBytes.sha256(file: out) == TestBytes.sha256(b), "f\(i)")
        }
        serve.stop()
        var fs = statvfs()
        #expect(statvfs(disk.path, &fs) == 0)
        #expect(Int64(fs.f_bavail) * Int64(fs.f_frsize) >= 5 << 20)
        #expect(try CacheInspector(directory: cache).entry(origin.url("/f7.mp4"))?.isComplete == true)
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }

    /// With no room at all (min-free larger than the disk, or a 1 KiB cap), a video still plays
    /// through serve, streamed and not stored; it is never a 502.
    @Test
    func withNoRoomAtAllVideosStillPlayThroughServe() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(300_000, seed: 280)
        origin.setResource("/n.mp4", .init(body: body, etag: "\"n\""))
        for (name, setting) in [("nofree", ["min-free", "1000T"]), ("tinycap", ["max-size", "1K"])] {
            let cache = dir.file(name)
            #expect(try VCacheBinary.run(["config", "set"] + setting, cacheDir: cache).status == 0)
            let serve = try ServeProcess(cacheDir: cache, logDir: dir)
            let out = dir.file("\(name).out")
            let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, "-w", "%{http_code}", serve.url(origin.url("/n.mp4"))])
            #expect(String(decoding: r.out, as: UTF8.self) == "200" && TestBytes.sha256(file: out) == TestBytes.sha256(body), "\(name): \(serve.log)")
            serve.stop()
            let stored = try CacheInspector(directory: cache).store.catalog.allEntries().reduce(Int64(0)) { $0 + $1.cachedBytes }
            #expect(stored == 0, "\(name)")
        }
        // prefetch says why it stored nothing, in one line naming min-free.
        let p = try VCacheBinary.run(["prefetch", origin.url("/n.mp4")], cacheDir: dir.file("nofree"))
        #expect(p.status == 5 && p.stderr.contains("does not fit while keeping min-free 1000 TiB free on the cache's disk"), "\(p.stderr)")
    }

    /// A cap raised by SIGHUP holds for what is stored next, including the head a new video's
    /// first request fetches (it evicted down to the cap serve started with).
    @Test
    func aCapRaisedBySIGHUPIsTheOneStoringKeepsTo() throws {
        let notify = try NotifySocket(path: dir.file("notify2.sock"))
        let cache = dir.file("raise")
        let origin = try TestOrigin()
        let bodies = (0..<3).map { TestBytes.make(1_500_000, seed: UInt64(260 + $0)) }
        for (i, b) in bodies.enumerated() { origin.setResource("/r\(i).mp4", .init(body: b, etag: "\"r\(i)\"")) }
        #expect(try VCacheBinary.run(["config", "set", "max-size", "1M"], cacheDir: cache).status == 0)
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        #expect(try VCacheBinary.run(["config", "set", "max-size", "6M"], cacheDir: cache).status == 0)
        kill(serve.process.pid, SIGHUP)
        #expect(notify.receive()?.hasPrefix("RELOADING=1") == true && notify.receive() == "READY=1")
        for (i, b) in bodies.enumerated() {
            let out = dir.file("r\(i).out")
            let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, serve.url(origin.url("/r\(i).mp4"))])
            #expect(r.status == 0 && TestBytes.sha256(file: out) == TestBytes.sha256(b))
        }
        serve.stop()
        let store = try CacheInspector(directory: cache).store
        let entries = try store.catalog.allEntries()
        #expect(entries.filter(\.isComplete).count == 3, "\(entries.map { ($0.latestURL, $0.cachedBytes) })")
        #expect(Evictor(store: store).footprint().total(entries) <= 6 << 20)
    }

    /// Two downloads that fill the disk at once: room is made and both end stored, with no
    /// failure said for the item that then succeeded (the whole cache went, and one still failed).
    @Test(.requires(.tmpfsMount))
    func twoDownloadsFillingTheDiskAtOnceBothEndStored() throws {
        let disk = try SmallDisk(size: "14m", in: dir)
        defer { disk.unmount() }
        let cache = disk.path + "/cache"
        let origin = try TestOrigin()
        for i in 0..<3 { origin.setResource("/o\(i).mp4", .init(body: TestBytes.make(3 << 20, seed: UInt64(270 + i)))) }
        let new = (0..<2).map { TestBytes.make(3 << 20, seed: UInt64(280 + $0)) }
        for (i, b) in new.enumerated() { origin.setResource("/n\(i).mp4", .init(body: b, etag: "\"n\(i)\"")) }
        #expect(try VCacheBinary.run(["prefetch", "-q", "-j", "1"] + (0..<3).map { origin.url("/o\($0).mp4") }, cacheDir: cache).status == 0)
        let r = try VCacheBinary.run(["prefetch", "-j", "2", origin.url("/n0.mp4"), origin.url("/n1.mp4")], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("cannot prefetch"), "\(r.stderr)")
        let inspector = try CacheInspector(directory: cache)
        for (i, b) in new.enumerated() { #expect(try inspector.entry(origin.url("/n\(i).mp4"))?.sha256 == TestBytes.sha256(b)) }
        #expect(try inspector.store.catalog.allEntries().count >= 3, "only what was needed went")
    }

    /// `serve --limit-rate` holds each origin transfer to the rate (it let a 20 MB video through
    /// in 0.03 s). A lower bound only: nothing can make it faster than the rate allows.
    @Test
    func serveLimitRateHoldsEachOriginTransfer() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(3 << 20, seed: 290)
        origin.setResource("/lr.mp4", .init(body: body, etag: "\"lr\""))
        let serve = try ServeProcess(cacheDir: dir.file("lr"), logDir: dir, arguments: ["--limit-rate", "1M"])
        let out = dir.file("lr.out")
        let start = ContinuousClock.now
        let r = try Tool.run("/usr/bin/curl", ["-s", "-o", out, serve.url(origin.url("/lr.mp4"))])
        let elapsed = (ContinuousClock.now - start).inSeconds
        #expect(r.status == 0 && TestBytes.sha256(file: out) == TestBytes.sha256(body))
        #expect(elapsed >= 2.5, "3 MiB at 1 MiB/s took \(elapsed) s")
        serve.stop()
    }
}
