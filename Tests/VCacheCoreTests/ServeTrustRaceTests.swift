import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// What a serve reader trusts about the file it holds, under the interleavings the stress run can
/// only meet by chance (Docs/reliability.md, "Four processes"), made exact with pause points.
/// Each reader must send only bytes of the version its response promised.
@Suite struct ServeTrustRaceTests {
    /// Reads a reader to its end (or until it is cut).
    static func drain(_ reader: RangeReader) -> Data {
        var sent = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while let n = buffer.withUnsafeMutableBytes({ reader.read(at: Int64(sent.count), into: $0) }), n > 0 {
            sent.append(contentsOf: buffer[0..<n])
        }
        return sent
    }

    /// The first offset (in the video) where `sent` differs from `version`'s bytes from `start`.
    static func firstWrong(_ sent: Data, _ version: Data, from start: Int) -> Int? {
        let expected = version[start..<min(version.count, start + sent.count)]
        guard sent.count <= expected.count else { return start + expected.count }
        return zip(sent, expected).enumerated().first { $0.element.0 != $0.element.1 }.map { start + $0.offset }
    }

    /// Creates empty files in `folder` until one gets an inode number above `file`'s (at most
    /// 20,000): on ext4 the free numbers below it in its group are then taken. Returns their paths.
    static func takeFreeInodes(below file: FileID, in folder: String) -> [String] {
        var made: [String] = []
        for i in 0..<20_000 {
            let path = folder + "/filler-\(i)"
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard fd >= 0 else { break }
            close(fd)
            made.append(path)
            guard let id = FileSystem.identity(path), id.device == file.device, id.inode < file.inode else { break }
        }
        return made
    }

    /// A storing job's writes are of the version its readers were promised. When the origin
    /// changes version under the job, the job drops it: catalog rows first (now naming the new
    /// version), then a new `data`. A player opening the video between the two finds the old
    /// file still named `data` and the catalog promising the new version; what the job wrote
    /// into that file (the old version) must not go out under the new version's head.
    @Test
    func aReaderOpenedWhileAJobDropsItsVersionSendsNoneOfTheOldVersionsWrites() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let v1 = TestBytes.make(3_000_000, seed: 71), v2 = TestBytes.make(3_100_000, seed: 72)
        origin.setResource("/d.mp4", .init(body: v1, etag: "W/\"d1\""))
        var stall = TestOrigin.Faults()
        stall.stallAfterBytes = 400_000
        origin.setFaults("/d.mp4", stall)
        let url = origin.url("/d.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        // A player reads [1 MB, 2 MB): its job gets 400 kB of "d1", then the origin stalls.
        let first = try readThrough.open(url)
        let key = first.key
        let r1 = readThrough.reader(first, range: ByteRange(1_000_000, 2_000_000))
        var got = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while got < 400_000, let n = buffer.withUnsafeMutableBytes({ r1.read(at: Int64(got), into: $0) }), n > 0 { got += n }
        #expect(got == 400_000)
        // The player leaves; the job (less than 1 MiB left) goes on. The origin publishes "d2":
        // the job's retry meets it and drops "d1".
        r1.finished(completed: false)
        origin.setResource("/d.mp4", .init(body: v2, etag: "W/\"d2\""))
        origin.setFaults("/d.mp4", TestOrigin.Faults())
        origin.throttle("/d.mp4", to: 400_000)  // the job stays on the entry for a while after the drop

        // Between the drop's catalog rows and its new `data`: another player opens the video.
        let opened = DispatchSemaphore(value: 0)
        let box = Box<RangeReader>()
        TestSeam.setHook("drop-after-invalidate", key: key) { dropping in
            guard dropping == key else { return }
            if let video = try? readThrough.open(url) {
                box.value = readThrough.reader(video, range: ByteRange(1_000_000, 1_400_000))
            }
            opened.signal()
        }
        defer { TestSeam.setHook("drop-after-invalidate", key: key, nil) }
        #expect(opened.wait(timeout: .now() + 30) == .success)
        let r2 = try #require(box.value)
        #expect(r2.video.validators.etag == "W/\"d2\"")
        let sent = Self.drain(r2)
        r2.finished(completed: sent.count == 400_000)
        let wrong = Self.firstWrong(sent, v2, from: 1_000_000)
        #expect(wrong == nil, "the response promised \"d2\" sent other bytes from offset \(wrong ?? 0) on (\(sent.count) bytes sent)")
        #expect(sent.count == 400_000, "\(r2.failure ?? "")")
    }

    /// serve starts a weak-ETag video over when its cached bytes came from another run: rows
    /// first, then a new `data`, then it reads the entry again. Another writer may come in between
    /// and, finding no byte, take the origin's next version into that new file: what the reader
    /// then reads of the entry is about another version and must not go out under the promised one.
    @Test
    func aStartOverSendsNothingOfAVersionStoredMeanwhile() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let v1 = TestBytes.make(3_000_000, seed: 73), v2 = TestBytes.make(3_100_000, seed: 74)
        origin.setResource("/s.mp4", .init(body: v1, etag: "W/\"s1\""))
        let url = origin.url("/s.mp4")
        // Another run cached the first megabyte of "s1".
        #expect(cache.prefetch(url, [.span(first: 0, last: 999_999)]).error == nil)
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }
        let video = try readThrough.open(url)
        #expect(video.fromCatalog && video.validators.etag == "W/\"s1\"")

        // Right after the start-over: the origin publishes "s2" and a prefetch stores it whole.
        let key = video.key, store = cache.store
        TestSeam.setHook("serve-start-over-after-drop", key: key) { starting in
            guard starting == key else { return }
            origin.setResource("/s.mp4", .init(body: v2, etag: "W/\"s2\""))
            _ = Prefetcher(store: store, options: TestCache.fastOptions()).run([PrefetchItem(url: url)])
        }
        defer { TestSeam.setHook("serve-start-over-after-drop", key: key, nil) }
        let reader = readThrough.reader(video, range: ByteRange(0, 3_000_000))
        #expect(try cache.store.catalog.entry(key: key)?.etag == "W/\"s2\"")
        let sent = Self.drain(reader)
        reader.finished(completed: false)
        let wrong = Self.firstWrong(sent, v1, from: 0)
        #expect(wrong == nil, "the response promised \"s1\" sent other bytes from offset \(wrong ?? 0) on (\(sent.count) bytes sent)")
    }

    /// Parts under a weak ETag are combined only within one run: nothing proves two responses
    /// with the same weak ETag carry the same bytes (RFC 9110 §8.8.1). A player opens a new video
    /// while another process writes it (serve asks the origin for its length and holds no file);
    /// that process stores [1 MB, 2 MB); the origin then serves other bytes under the same weak
    /// ETag. The player's response must be one run's bytes: never the first run's middle between
    /// the second's.
    @Test
    func aWeakReaderCombinesNoBytesOfAnotherRun() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(3_000_000, seed: 76), b = TestBytes.make(3_000_000, seed: 77)
        origin.setResource("/w.mp4", .init(body: a, etag: "W/\"w\""))
        let url = origin.url("/w.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }
        let key = CacheKeyRules().key(for: URL(string: url)!)
        let busy = try #require(try cache.store.tryLockWriter(key: key))
        let video = try readThrough.open(url)
        busy.release()
        #expect(video.snapshot.fileID == nil && video.validators.etag == "W/\"w\"")
        #expect(cache.prefetch(url, [.span(first: 1_000_000, last: 1_999_999)]).error == nil)
        origin.setResource("/w.mp4", .init(body: b, etag: "W/\"w\""))

        let reader = readThrough.reader(video, range: ByteRange(0, 3_000_000))
        let sent = Self.drain(reader)
        reader.finished(completed: sent.count == 3_000_000)
        let one = [a, b].first { Self.firstWrong(sent, $0, from: 0) == nil }
        #expect(one != nil, "the response mixed two runs: it differs from the first from \(Self.firstWrong(sent, a, from: 0) ?? -1) and from the second from \(Self.firstWrong(sent, b, from: 0) ?? -1)")
        #expect(sent.count == 3_000_000, "\(reader.failure ?? "")")
    }

    /// An origin with no validator at all (no ETag, no Last-Modified) proves nothing about two of
    /// its responses, so this process's own run is no proof either: its storing jobs are separate
    /// origin responses, and the origin may change its bytes (same length) between them. A player
    /// reads [1 MB, 2 MB) of a new video (stored by this process) and keeps the file open; the
    /// origin then serves other bytes; a second player reads the whole video. It must get one
    /// version: before, it got the first version's head and middle around the second's bytes.
    @Test
    func aReaderWithoutAValidatorCombinesNoTwoOriginResponses() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(3_000_000, seed: 80), b = TestBytes.make(3_000_000, seed: 81)
        origin.setResource("/n.mp4", .init(body: a))
        let url = origin.url("/n.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        let first = readThrough.reader(try readThrough.open(url), range: ByteRange(1_000_000, 2_000_000))
        let middle = Self.drain(first)
        #expect(Self.firstWrong(middle, a, from: 1_000_000) == nil && middle.count == 1_000_000, "\(first.failure ?? "")")
        origin.setResource("/n.mp4", .init(body: b))

        let second = try readThrough.open(url)
        #expect(second.validators.etag == nil && second.validators.lastModified == nil)
        let reader = readThrough.reader(second, range: ByteRange(0, 3_000_000))
        let sent = Self.drain(reader)
        reader.finished(completed: sent.count == 3_000_000)
        first.finished(completed: true)
        let one = [a, b].first { Self.firstWrong(sent, $0, from: 0) == nil }
        #expect(one != nil, "the response mixed two origin responses: it differs from the first version from \(Self.firstWrong(sent, a, from: 0) ?? -1) and from the second from \(Self.firstWrong(sent, b, from: 0) ?? -1)")
        #expect(sent.count == 3_000_000, "\(reader.failure ?? "")")
    }

    /// Without a validator serve sends cached bytes only on their own, and fetches anything else
    /// as one origin response it does not store: a player reads the video whole (from the origin),
    /// `prefetch` then stores it in one response, and later players read it from the cache,
    /// whole or in part, with no origin request.
    @Test
    func aVideoWithoutAValidatorIsReadFromTheCacheOrFromOneOriginResponse() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(3_000_000, seed: 82)
        origin.setResource("/n.mp4", .init(body: a))
        let url = origin.url("/n.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }
        let cold = readThrough.reader(try readThrough.open(url), range: ByteRange(0, 3_000_000))
        let sent = Self.drain(cold)
        cold.finished(completed: sent.count == 3_000_000)
        #expect(sent == a, "\(cold.failure ?? "")")
        #expect(try cache.store.catalog.entry(key: cold.video.key)?.ranges == RangeSet([ByteRange(0, 65_536)]), "only the head open fetched is stored")

        #expect(cache.prefetch(url).complete)
        let asked = origin.requests("/n.mp4").count
        for span in [ByteRange(0, 3_000_000), ByteRange(1_234_567, 2_345_678)] {
            let cached = readThrough.reader(try readThrough.open(url), range: span)
            #expect(cached.isCached)
            let got = Self.drain(cached)
            cached.finished(completed: true)
            #expect(got == a[Int(span.lowerBound)..<Int(span.upperBound)])
        }
        #expect(origin.requests("/n.mp4").count == asked)
    }

    /// A drop of every claim replaces `data` (rows, then the file). Should the file stay all the
    /// same (its unlink failed; or bytes a crash left unclaimed), a reader may still hold it and
    /// trust what was claimed of it: the next writer, finding no claim, must not write the origin's
    /// next version into that file, but give the entry a new one first.
    @Test
    func aWriterFindingBytesButNoClaimWritesIntoANewFile() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let a = TestBytes.make(3_000_000, seed: 78), b = TestBytes.make(3_000_000, seed: 79)
        origin.setResource("/k.mp4", .init(body: a, etag: "\"k1\""))
        let url = origin.url("/k.mp4")
        #expect(cache.prefetch(url).complete)
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }
        let video = try readThrough.open(url)
        let reader = readThrough.reader(video, range: ByteRange(0, 3_000_000))
        #expect(reader.isCached)
        // Every claim dropped, the file kept (as a drop whose unlink failed leaves it).
        try cache.store.catalog.invalidate(key: video.key, validators: video.validators)
        origin.setResource("/k.mp4", .init(body: b, etag: "\"k2\""))
        #expect(cache.prefetch(url).complete)
        #expect(try cache.inspector.dataSHA256(url) == TestBytes.sha256(b))

        let sent = Self.drain(reader)
        reader.finished(completed: sent.count == 3_000_000)
        #expect(Self.firstWrong(sent, a, from: 0) == nil, "the response promised \"k1\" sent other bytes from offset \(Self.firstWrong(sent, a, from: 0) ?? 0) on")
        #expect(sent.count == 3_000_000)
    }

    /// `open` fetches a new video's head and records it as this process's own writes into the file
    /// it went into. A record must not outlive that file: once it is gone, a new `data` may get the
    /// same inode number (ext4 gives a freed one out again at once), and a reader of that file
    /// would take the record for bytes the file holds.
    @Test(.requires(.reusesInodeNumbers))
    func theHeadsRecordDoesNotOutliveItsFile() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let v = TestBytes.make(3_000_000, seed: 75)
        origin.setResource("/h.mp4", .init(body: v, etag: "\"h1\""))
        let url = origin.url("/h.mp4")
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        defer { readThrough.shutdown() }

        // A player's request opens the video (its head fetched into `data`), then ends before any
        // byte is read (a 416, a HEAD answered from the catalog): the file is let go.
        let (key, headFile, version): (CacheKey, FileID, Validators) = try {
            let opened = try readThrough.open(url)
            #expect(!opened.fromCatalog)
            return (opened.key, try #require(opened.snapshot.fileID), opened.validators)
        }()  // the video is released here, and its file closed with it
        // The entry is dropped (verify --fix, a start-over): a new, empty `data`. A prefetch then
        // stores [1 MB, 2 MB) in it; its first bytes are a hole. (ext4 gives a new file the lowest
        // free inode number of its group: the free ones below the head's are taken first, so
        // that the new `data` gets the head's number, as it does whenever none is free below.)
        // The trait checked that this file system gives a freed number out again; another
        // process may still take it first, so up to three tries, then the test fails.
        for _ in 0..<3 where FileSystem.identity(cache.store.dataPath(key)) != headFile {
            let fillers = Self.takeFreeInodes(below: headFile, in: cache.store.entryDirectory(key))
            let lock = try #require(try cache.store.tryLockWriter(key: key))
            try cache.store.dropVersion(key: key, validators: version).close()
            lock.release()
            for f in fillers { unlink(f) }
            #expect(cache.prefetch(url, [.span(first: 1_000_000, last: 1_999_999)]).error == nil)
        }
        try #require(FileSystem.identity(cache.store.dataPath(key)) == headFile,
                     "the new data did not get the head's inode number again in three tries: the test proves nothing")

        // A player reads [2 MB, 3 MB): its job holds the entry while the next player reads the head.
        origin.throttle("/h.mp4", to: 1_000_000)
        let far = readThrough.reader(try readThrough.open(url), range: ByteRange(2_000_000, 3_000_000))
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        #expect((buffer.withUnsafeMutableBytes { far.read(at: 0, into: $0) } ?? 0) > 0)
        let reader = readThrough.reader(try readThrough.open(url), range: ByteRange(0, 65_536))
        let sent = Self.drain(reader)
        reader.finished(completed: sent.count == 65_536)
        far.finished(completed: false)
        let wrong = Self.firstWrong(sent, v, from: 0)
        #expect(wrong == nil, "the head sent other bytes (a hole's zeros?) from offset \(wrong ?? 0) on")
        #expect(sent.count == 65_536, "\(reader.failure ?? "")")
    }
}

/// A value set on one thread and read on another after a semaphore.
final class Box<T>: @unchecked Sendable {
    var value: T?
}
