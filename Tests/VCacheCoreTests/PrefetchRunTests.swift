#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import VCacheCore

/// `PrefetchRun`'s transitions, without a job, a fetch loop or a disk: what a job's end asks
/// for, which items run again, what joins from a stream, what is said and what a stream adds up to.
@Suite struct PrefetchRunTests {
    static func result(_ url: String, fetched: Int64 = 10, cached: Int64 = 0, error: PrefetchError? = nil, playlist: Bool = false) -> PrefetchResult {
        var r = PrefetchResult(url: url, key: CacheKeyRules().key(for: url), length: fetched + cached, fetchedBytes: fetched,
                               alreadyCachedBytes: cached, requestedBytes: nil, complete: error == nil, elapsed: 0, error: error)
        r.isPlaylist = playlist
        return r
    }
    static let full = PrefetchError.disk(SystemError("write", path: "/c/data", errno: ENOSPC))
    static func run(_ urls: String...) -> PrefetchRun {
        PrefetchRun(urls.map { PrefetchItem(url: $0) }, keyRules: CacheKeyRules())
    }

    @Test func itemsStartInOrderAndRunsAgainGoFirst() {
        var run = Self.run("http://h/a", "http://h/b", "http://h/c")
        #expect(run.nextToStart() == 0)
        #expect(run.nextToStart() == 1)
        #expect(run.jobEnded(0, fetched: 5, result: Self.result("http://h/a", error: Self.full), stopping: false) == .makeRoom)
        #expect(run.roomAsked(for: 0, made: true) == .again)
        #expect(run.nextToStart() == 0, "the item the disk filled for runs again before the next of the list")
        #expect(run.nextToStart() == 2)
        #expect(run.nextToStart() == nil)
        #expect(run.finishedBytes == 5)
    }

    /// A full disk runs the item again at most three times, and only once room was made (by this
    /// end, or for another item since this one started); then its failure stands.
    @Test func aFullDiskRunsAgainAtMostThreeTimesOnceRoomWasMade() {
        var run = Self.run("http://h/a", "http://h/b")
        let a = run.nextToStart()!, b = run.nextToStart()!
        // No room could be made: a's failure stands.
        #expect(run.jobEnded(a, fetched: 0, result: Self.result("http://h/a", error: Self.full), stopping: false) == .makeRoom)
        #expect(run.roomAsked(for: a, made: false) == .settle)
        // Room was made for another item since b started: b runs again without asking.
        var run2 = Self.run("http://h/a", "http://h/b")
        let a2 = run2.nextToStart()!, b2 = run2.nextToStart()!
        #expect(run2.jobEnded(a2, fetched: 0, result: Self.result("http://h/a", error: Self.full), stopping: false) == .makeRoom)
        #expect(run2.roomAsked(for: a2, made: true) == .again)
        #expect(run2.jobEnded(b2, fetched: 0, result: Self.result("http://h/b", error: Self.full), stopping: false) == .again)
        _ = b
        // Three runs again, then it is settled.
        var run3 = Self.run("http://h/a")
        var i = run3.nextToStart()!
        for _ in 0..<3 {
            #expect(run3.jobEnded(i, fetched: 0, result: Self.result("http://h/a", error: Self.full), stopping: false) == .makeRoom)
            #expect(run3.roomAsked(for: i, made: true) == .again)
            i = run3.nextToStart()!
        }
        #expect(run3.jobEnded(i, fetched: 0, result: Self.result("http://h/a", error: Self.full), stopping: false) == .settle)
    }

    /// An item run again after a full disk finds its first attempts' bytes held: they are this
    /// run's, said as fetched, never as cached before (before, "0 B fetched, 289 KiB already
    /// cached" for a video this run downloaded, and a refused stream kept it past the cap).
    @Test func bytesOfAnAttemptEndedByAFullDiskAreThisRunsNotCachedBefore() {
        var run = Self.run("http://h/a.m3u8")
        let root = run.nextToStart()!
        _ = run.settle(root, Self.result("http://h/a.m3u8", fetched: 3, playlist: true), expandStreams: true)
        _ = run.joinMember(PrefetchItem(url: "http://h/1.ts"), of: root, refusal: nil)
        let one = run.nextToStart()!
        // 40 bytes were held before the run; the first attempt fetched 60 and claimed them, then the disk filled.
        #expect(run.jobEnded(one, fetched: 60, result: Self.result("http://h/1.ts", fetched: 60, cached: 40, error: Self.full), stopping: false) == .makeRoom)
        #expect(run.roomAsked(for: one, made: true) == .again)
        #expect(run.nextToStart() == one)
        let second = Self.result("http://h/1.ts", fetched: 20, cached: 100)
        #expect(run.jobEnded(one, fetched: 20, result: second, stopping: false) == .settle)
        _ = run.settle(one, second, expandStreams: true)
        guard case .finished(let r)? = run.said(one) else { Issue.record("not said"); return }
        #expect(r.fetchedBytes == 80 && r.alreadyCachedBytes == 40)
        // Refused for the cap, the member's bytes are this run's: given back.
        let (keys, _) = run.refuse(root, error: .noRoom(cap: 100, needs: 500))
        #expect(keys.contains(CacheKeyRules().key(for: "http://h/1.ts")) == false, "held before the run: stays")
        var fresh = Self.run("http://h/b.m3u8")
        let b = fresh.nextToStart()!
        _ = fresh.settle(b, Self.result("http://h/b.m3u8", fetched: 3, playlist: true), expandStreams: true)
        _ = fresh.joinMember(PrefetchItem(url: "http://h/2.ts"), of: b, refusal: nil)
        let two = fresh.nextToStart()!
        _ = fresh.jobEnded(two, fetched: 60, result: Self.result("http://h/2.ts", fetched: 60, error: Self.full), stopping: false)
        _ = fresh.roomAsked(for: two, made: true)
        _ = fresh.nextToStart()
        let again = Self.result("http://h/2.ts", fetched: 40, cached: 60)
        _ = fresh.jobEnded(two, fetched: 40, result: again, stopping: false)
        _ = fresh.settle(two, again, expandStreams: true)
        let (giveBack, _) = fresh.refuse(b, error: .noRoom(cap: 100, needs: 500))
        #expect(giveBack.contains(CacheKeyRules().key(for: "http://h/2.ts")), "all this run's: given back")
    }

    /// A checksum mismatch runs the item again whole, once; the second end stands, with the
    /// first attempt's bytes counted and the error saying it was fetched again.
    @Test func aChecksumMismatchIsFetchedWholeOnceMoreAndCountsBoth() {
        var run = PrefetchRun([PrefetchItem(url: "http://h/a", requests: [.span(first: 0, last: 99)])], keyRules: CacheKeyRules())
        let i = run.nextToStart()!
        let mismatch = PrefetchError.checksumMismatch(ChecksumMismatch(DigestCheck(expected: ExpectedDigest(algorithm: .md5, hex: "00112233445566778899aabbccddeeff", source: .option), computed: "ff")))
        run.hold(.finished(Self.result("http://h/a", fetched: 100, error: mismatch)), of: i)
        #expect(run.jobEnded(i, fetched: 100, result: Self.result("http://h/a", fetched: 100, error: mismatch), stopping: false) == .again)
        #expect(run.items[i].requests.isEmpty, "fetched whole")
        #expect(run.nextToStart() == i)
        #expect(run.jobEnded(i, fetched: 100, result: Self.result("http://h/a", fetched: 100, error: mismatch), stopping: false) == .settle)
        #expect(run.settle(i, Self.result("http://h/a", fetched: 100, error: mismatch), expandStreams: true) == [])
        let said = run.said(i)
        guard case .finished(let r)? = said, case .checksumMismatch(let m)? = r.error else {
            Issue.record("said \(String(describing: said))")
            return
        }
        #expect(m.refetched)
        #expect(r.fetchedBytes == 200)
        // Stopping: no second fetch.
        var stopping = Self.run("http://h/a")
        let j = stopping.nextToStart()!
        #expect(stopping.jobEnded(j, fetched: 1, result: Self.result("http://h/a", error: mismatch), stopping: true) == .settle)
    }

    /// A playlist's members join once per key, under the playlist; a member refused for its host
    /// is decided at once and said; the stream adds up to one result for its root.
    @Test func aStreamsMembersJoinOnceAndAddUpToItsRoot() {
        var run = Self.run("http://h/master.m3u8", "http://h/other.mp4")
        let root = run.nextToStart()!
        _ = run.nextToStart()
        #expect(run.jobEnded(root, fetched: 3, result: Self.result("http://h/master.m3u8", fetched: 3, playlist: true), stopping: false) == .settle)
        let master = Self.result("http://h/master.m3u8", fetched: 3, playlist: true)
        #expect(run.settle(root, master, expandStreams: true) == [.stream(master)])
        #expect(run.streamHosts(of: root, answered: "http://cdn/master.m3u8") == ["h", "cdn"])
        #expect(run.joinMember(PrefetchItem(url: "http://h/s1.ts"), of: root, refusal: nil) == nil)
        #expect(run.joinMember(PrefetchItem(url: "http://h/s1.ts"), of: root, refusal: nil) == nil)  // once
        #expect(run.joinMember(PrefetchItem(url: "http://h/other.mp4"), of: root, refusal: nil) == nil)  // already in the run
        let refused = run.joinMember(PrefetchItem(url: "http://evil/s2.ts"), of: root, refusal: .refusedHost(host: "evil", own: ["h"]))
        #expect(refused?.refusedMembers == 1)
        #expect(run.items.count == 4)
        #expect(run.root(of: 2) == root && run.root(of: 3) == root)
        let s1 = run.nextToStart()!
        #expect(run.items[s1].url == "http://h/s1.ts")
        #expect(run.nextToStart() == nil, "the refused member is never started")
        #expect(run.jobEnded(s1, fetched: 7, result: Self.result("http://h/s1.ts", fetched: 7), stopping: false) == .settle)
        #expect(run.settle(s1, Self.result("http://h/s1.ts", fetched: 7), expandStreams: true) == [])
        #expect(run.jobEnded(1, fetched: 4, result: Self.result("http://h/other.mp4", fetched: 4), stopping: false) == .settle)
        _ = run.settle(1, Self.result("http://h/other.mp4", fetched: 4), expandStreams: true)
        let out = run.outcome()
        #expect(out.count == 2)
        #expect(out[0].fetchedBytes == 10)
        #expect(out[0].refusedMembers == 1)
        #expect(out[0].error == .refusedHost(host: "evil", own: ["h"]))
        #expect(!out[0].complete)
        #expect(out[1].fetchedBytes == 4 && out[1].error == nil)
    }

    /// A member two streams name is fetched once, for the stream that named it first; its
    /// failure fails the other stream too (before, that one added up as complete).
    @Test func aMemberTwoStreamsNameFailsBoth() {
        var run = Self.run("http://h/a.m3u8", "http://h/b.m3u8", "http://h/s2.ts")
        let a = run.nextToStart()!, b = run.nextToStart()!, given = run.nextToStart()!
        for (i, url) in [(a, "http://h/a.m3u8"), (b, "http://h/b.m3u8")] {
            _ = run.jobEnded(i, fetched: 3, result: Self.result(url, fetched: 3, playlist: true), stopping: false)
            _ = run.settle(i, Self.result(url, fetched: 3, playlist: true), expandStreams: true)
        }
        for url in ["http://h/s1.ts", "http://h/s2.ts"] {
            #expect(run.joinMember(PrefetchItem(url: url), of: a, refusal: nil) == nil)
            #expect(run.joinMember(PrefetchItem(url: url), of: b, refusal: nil) == nil)
        }
        #expect(run.items.count == 4, "s1 joins once; s2 is an item given")
        let s1 = run.nextToStart()!
        #expect(run.nextToStart() == nil)
        #expect(run.roots(of: s1) == [a, b] && run.roots(of: given) == [given, b, a])
        let gone = PrefetchError.http(status: 404, reason: "Not Found")
        _ = run.settle(s1, Self.result("http://h/s1.ts", fetched: 7), expandStreams: true)
        _ = run.settle(given, Self.result("http://h/s2.ts", fetched: 0, error: gone), expandStreams: true)
        let out = run.outcome()
        #expect(out[a].fetchedBytes == 10 && out[b].fetchedBytes == 3, "the shared member's bytes count once")
        #expect(out[a].error == gone && !out[a].complete)
        #expect(out[b].error == gone && !out[b].complete)
        #expect(out[given].error == gone)
    }

    /// A stream names whole an item the run asked with less: it is fetched whole, as it starts
    /// when it has not, once its job ends when it runs, again at once when it ended; the bytes of
    /// every attempt count once, as this run's (before: the stream counted done with a 10 KiB head).
    @Test func anItemAskedWithLessIsFetchedWholeWhenAStreamNamesIt() {
        let head = [RangeRequest.head(10 << 10)]
        var run = PrefetchRun([PrefetchItem(url: "http://h/p.m3u8"), PrefetchItem(url: "http://h/ended.ts", requests: head),
                               PrefetchItem(url: "http://h/running.ts", requests: head), PrefetchItem(url: "http://h/later.ts", requests: head)],
                              keyRules: CacheKeyRules())
        let p = run.nextToStart()!, ended = run.nextToStart()!, running = run.nextToStart()!
        _ = run.jobEnded(ended, fetched: 10, result: Self.result("http://h/ended.ts", fetched: 10), stopping: false)
        _ = run.settle(ended, Self.result("http://h/ended.ts", fetched: 10), expandStreams: true)
        _ = run.said(ended)
        _ = run.settle(p, Self.result("http://h/p.m3u8", fetched: 3, playlist: true), expandStreams: true)
        for url in ["http://h/ended.ts", "http://h/running.ts", "http://h/later.ts"] {
            #expect(run.joinMember(PrefetchItem(url: url), of: p, refusal: nil) == nil)
        }
        #expect(run.items.count == 4, "nothing joins twice")
        #expect(run.items[1...].allSatisfy { $0.requests.isEmpty && $0.mp4 == nil }, "all whole now")
        // The ended one runs again at once, then the one not started; the running one once it ends.
        #expect(run.nextToStart() == ended)
        #expect(run.nextToStart() == 3)
        #expect(run.jobEnded(running, fetched: 10, result: Self.result("http://h/running.ts", fetched: 10), stopping: false) == .again)
        #expect(run.nextToStart() == running)
        let whole = Self.result("http://h/ended.ts", fetched: 90, cached: 10)
        #expect(run.jobEnded(ended, fetched: 90, result: whole, stopping: false) == .settle)
        _ = run.settle(ended, whole, expandStreams: true)
        guard case .finished(let r)? = run.said(ended) else { Issue.record("not said"); return }
        #expect(r.fetchedBytes == 100 && r.alreadyCachedBytes == 0 && r.complete)
    }

    /// A refused root: every part gets the error, the parts this run stored are given back,
    /// one event says it, and none of its parts is started or said after.
    @Test func aRefusedRootStopsItsPartsAndIsSaidOnce() {
        var run = Self.run("http://h/a.m3u8")
        let root = run.nextToStart()!
        _ = run.jobEnded(root, fetched: 3, result: Self.result("http://h/a.m3u8", fetched: 3, playlist: true), stopping: false)
        _ = run.settle(root, Self.result("http://h/a.m3u8", fetched: 3, playlist: true), expandStreams: true)
        _ = run.joinMember(PrefetchItem(url: "http://h/1.ts"), of: root, refusal: nil)
        _ = run.joinMember(PrefetchItem(url: "http://h/2.ts"), of: root, refusal: nil)
        let one = run.nextToStart()!
        let needs = PrefetchError.noRoom(cap: 100, needs: 500)
        let verdicts = run.verdicts(fixed: 0, perPart: 0, limit: 100)
        #expect(verdicts.count == 1 && verdicts[0].verdict == .undecided(holds: 3))
        run.refusing(root)
        // A running part stopped now: its end is not said (the refusal is, once).
        #expect(run.jobEnded(one, fetched: 0, result: Self.result("http://h/1.ts", fetched: 4, error: needs), stopping: false) == .settle)
        _ = run.settle(one, Self.result("http://h/1.ts", fetched: 4, error: needs), expandStreams: true)
        #expect(run.said(one) == nil)
        let (keys, said) = run.refuse(root, error: needs)
        #expect(keys == [CacheKeyRules().key(for: "http://h/a.m3u8"), CacheKeyRules().key(for: "http://h/1.ts")], "what this run stored is given back")
        guard case .finished(let r) = said else { Issue.record("said \(said)"); return }
        #expect(r.error == needs)
        #expect(run.nextToStart() == nil, "no part of a refused root starts")
        #expect(run.verdicts(fixed: 0, perPart: 0, limit: 100).isEmpty)
        #expect(run.neverStarted(.interrupted).isEmpty)
        #expect(run.outcome()[0].error == needs)
    }

    /// Stopped: items without a result are said as not started (or with the stop's own reason).
    @Test func itemsNeverStartedGetTheStopsReason() {
        var run = Self.run("http://h/a", "http://h/b", "http://h/c")
        let a = run.nextToStart()!
        _ = run.jobEnded(a, fetched: 1, result: Self.result("http://h/a", fetched: 1), stopping: false)
        _ = run.settle(a, Self.result("http://h/a", fetched: 1), expandStreams: true)
        #expect(run.neverStarted(.interrupted) == [1, 2])
        #expect(run.outcome().map(\.error) == [nil, .notStarted, .notStarted])
        var stopped = Self.run("http://h/a")
        #expect(stopped.neverStarted(.deadline) == [0])
        #expect(stopped.outcome()[0].error == .deadline)
    }
}
