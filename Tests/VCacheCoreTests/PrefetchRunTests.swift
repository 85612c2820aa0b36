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
