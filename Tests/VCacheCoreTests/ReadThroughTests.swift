import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// ReadThrough in-process: what it keeps per entry stays bounded, and what its readers and jobs leave.
@Suite struct ReadThroughTests {
    /// A web page can make the proxy open endless distinct URLs: the boards kept for them are
    /// forgotten once idle, down to a few hundred.
    @Test
    func boardsDoNotGrowWithEveryURLEverAskedFor() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        for i in 0..<700 {
            // 404s: nothing is stored, but each URL is opened.
            #expect(throws: ReadThrough.OpenError.self) { try readThrough.open(origin.url("/missing-\(i).mp4")) }
        }
        #expect(readThrough.boardCount <= 2 * 256, "\(readThrough.boardCount) boards for 700 URLs")
    }

    /// serve stops a storing job whenever its player leaves: a stopped run must let go of its
    /// fetch loop (a libcurl multi handle, its socket pair, its connections). The jobs it stopped
    /// left a timer behind that held the run itself: a socket pair and a connection lost per job.
    @Test
    func aRunStoppedMidDownloadLetsGoOfItsFetchLoop() throws {
        let origin = try TestOrigin()
        origin.setResource("/s.mp4", .init(body: TestBytes.make(3_000_000, seed: 63), etag: "\"s\""))
        origin.throttle("/s.mp4", to: 1 << 20)
        let cache = try TestCache()
        let flag = Fetcher.StopFlag()
        weak var left: Prefetcher?
        var result: PrefetchResult?
        do {
            let prefetcher = Prefetcher(store: cache.store, options: TestCache.fastOptions(), stopFlag: flag) { event in
                if case .progress = event { flag.stop(reason: SIGTERM) }
            }
            left = prefetcher
            result = prefetcher.run([PrefetchItem(url: origin.url("/s.mp4"))])[0]
        }
        #expect(result?.error == .interrupted)
        #expect(left == nil, "the stopped run is still held")
    }

    /// A storing job that retried once and then went on is not in trouble: a player arriving
    /// just ahead of it waits for its bytes. It was answered 502 ("the origin is not there") for
    /// as long as that job ran, after a single dropped connection.
    @Test
    func aJobThatRetriedAndWentOnIsWaitedFor() throws {
        let origin = try TestOrigin()
        let body = TestBytes.make(2_500_000, seed: 64)
        origin.setResource("/t.mp4", .init(body: body, etag: "\"t\""))
        let cache = try TestCache()
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        let url = origin.url("/t.mp4")
        let video = try readThrough.open(url)  // its head: 64 KiB
        // The storing job's first request is cut after 768 KiB; it retries and goes on, slowly.
        var f = TestOrigin.Faults()
        f.dropAfterBytes = 768 << 10
        f.bytesPerSecond = 256 << 10
        origin.setFaults("/t.mp4", f)
        let first = readThrough.reader(video, range: ByteRange(0, Int64(body.count)))
        let played = Played()
        Thread {
            var got = Data()
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while let n = buffer.withUnsafeMutableBytes({ first.read(at: Int64(got.count), into: $0) }), n > 0 {
                got.append(contentsOf: buffer[0..<n])
            }
            first.finished(completed: true)
            played.set(got)
        }.start()
        // Past the cut, the job went on: 256 KiB of its retry sent.
        #expect(origin.waitUntilServed("/t.mp4", atLeast: (64 << 10) + (768 << 10) + (256 << 10)))
        // A second player 768 KiB ahead of where the job is now: within its reach, not yet written.
        let at = Int64((64 << 10) + (1024 << 10) + (768 << 10))
        let second = readThrough.reader(try readThrough.open(url), range: ByteRange(at, Int64(body.count)))
        defer { second.finished(completed: true) }
        let refused = second.prepare()
        #expect(refused == nil, "\(refused.map { "\($0.status) \($0.reason)" } ?? "")")
        var sent = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while let n = buffer.withUnsafeMutableBytes({ second.read(at: Int64(sent.count), into: $0) }), n > 0 {
            sent.append(contentsOf: buffer[0..<n])
        }
        #expect(sent == body[Int(at)...], "\(second.failure ?? "")")
        #expect(played.wait() == body)
    }

    /// What a player thread read, handed over once it is done.
    final class Played: @unchecked Sendable {
        // @unchecked: `data` is set once, before `done` is signalled, and read after.
        private var data = Data()
        private let done = DispatchSemaphore(value: 0)
        func set(_ d: Data) {
            data = d
            done.signal()
        }
        func wait() -> Data {
            done.wait()
            return data
        }
    }

    /// A reader trusts what the catalog claimed about the very file it holds; a claim about a file
    /// must stay true of it. A video whole again after `verify --fix` that does not hash as at its
    /// first completion has every claim dropped: if its `data` stayed, the next writer, holding no
    /// byte of it, would take the origin's next version into that same file, under the reader.
    /// The interleaving: serve opens a complete video (ETag "a") and a player's response over its
    /// last 2 MB begins, wholly cached; `verify --fix` drops a damaged chunk; the origin changed
    /// that chunk under the same ETag, so the prefetch that makes the video whole again ends in
    /// `notAsCompleted`; the origin publishes "b"; a prefetch stores it. The response must still
    /// send the bytes of "a" its head promised.
    @Test
    func claimsDroppedAtADigestMismatchLeaveNoFileAReaderHoldsToTheNextVersion() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(5_500_000, seed: 61)
        origin.setResource("/v.mp4", .init(body: a, etag: "\"a\""))
        let url = origin.url("/v.mp4")
        #expect(cache.prefetch(url).error == nil)

        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        let video = try readThrough.open(url)
        let span = ByteRange(3_500_000, 5_500_000)
        let reader = readThrough.reader(video, range: span)
        defer { reader.finished(completed: true) }
        #expect(reader.isCached)

        // A damaged byte in chunk 1: verify --fix drops that chunk and keeps the digest's states.
        let path = cache.store.dataPath(video.key)
        let fh = try #require(FileHandle(forUpdatingAtPath: path))
        try fh.seek(toOffset: 1_048_581)
        try fh.write(contentsOf: Data([a[1_048_581] ^ 0x01]))
        try fh.close()
        var fix = Verifier.Options()
        fix.fix = true
        #expect(try Verifier(store: cache.store).verify(keys: [video.key], options: fix).map(\.state) == [.fixed])
        // The origin's chunk 1 is other bytes now, under the same ETag: whole again, it does not hash as it did.
        var a2 = a
        a2[1_200_000] ^= 0xff
        origin.setResource("/v.mp4", .init(body: a2, etag: "\"a\""))
        #expect(cache.prefetch(url).error == .notAsCompleted)
        // The next version: its bytes must not go into the file the reader holds.
        let b = TestBytes.make(6_000_000, seed: 62)
        origin.setResource("/v.mp4", .init(body: b, etag: "\"b\""))
        #expect(cache.prefetch(url).error == nil)
        #expect(try cache.store.catalog.entry(key: video.key)?.etag == "\"b\"")

        var sent = Data()
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while let n = buffer.withUnsafeMutableBytes({ reader.read(at: Int64(sent.count), into: $0) }), n > 0 {
            sent.append(contentsOf: buffer[0..<n])
        }
        #expect(sent.count == Int(span.count))
        let promised = a[Int(span.lowerBound)..<Int(span.upperBound)]
        let wrong = zip(sent, promised).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(wrong == nil, "the response promised \"a\" sent other bytes from offset \(span.lowerBound + Int64(wrong ?? 0)) on")
    }
}
