import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// A stream evicted while another process records streams (serve answering a player's playlist),
/// each race made exact with a pause point: the catalog stays consistent (no stream without its
/// root, no member row of no stream, no folder without a row) and no member another stream names
/// is lost.
@Suite struct StreamEvictionRaceTests {
    let origin: TestOrigin
    let cache: TestCache
    let names = ["m", "n", "v1", "v2", "a", "a1"]

    init() throws {
        origin = try TestOrigin()
        cache = try TestCache()
        for (i, n) in names.enumerated() {
            origin.setResource("/\(n)", .init(body: TestBytes.make(20_000, seed: UInt64(300 + i))))
            #expect(cache.prefetch(origin.url("/\(n)")).error == nil)
        }
    }

    func key(_ name: String) -> CacheKey { CacheKeyRules().key(for: URL(string: origin.url("/\(name)"))!) }
    func member(_ name: String, _ role: StreamRole = .segment) -> StreamRecord.Member { .init(key: key(name), role: role) }
    func cached() throws -> Set<String> {
        let keys = Set(try cache.store.catalog.allEntries().map(\.key))
        return Set(names.filter { keys.contains(key($0)) })
    }

    /// serve read the stream's rows, then `evict STREAM` took the stream, then serve wrote what
    /// the playlist names: no stream is recorded for a root that is gone.
    @Test func aPlaylistRecordedWhileItsStreamIsEvictedLeavesNoStreamBehind() throws {
        let store = cache.store
        try store.catalog.recordStream(root: key("m"), format: "hls", members: [member("v1", .playlist), member("a1")])
        let m = key("m")
        TestSeam.setHook("record-stream", key: m) { root in
            guard root == m else { return }
            var c = Evictor.Criteria()
            c.keys = [m]
            #expect((try? Evictor(store: store).evict(c, dryRun: false))?.evicted.count == 3)
        }
        defer { TestSeam.setHook("record-stream", key: m, nil) }
        // The player's next reload names one segment more.
        let recorded = try store.catalog.recordStream(root: m, format: "hls", members: [member("v1", .playlist), member("a1"), member("a")])
        #expect(recorded == nil)
        #expect(try cache.inspector.consistencyProblems() == [])
        #expect(try store.catalog.streams().isEmpty)
        #expect(try cached() == ["n", "v2", "a"])
    }

    /// `evict m` chose m's members; before its rows went, a player's playlist recorded stream n
    /// naming m's audio segment: that segment stays, for n.
    @Test func aMemberAnotherStreamNamedSinceTheChoiceStays() throws {
        let store = cache.store
        try store.catalog.recordStream(root: key("m"), format: "hls", members: [member("v1", .playlist), member("a1")])
        let (m, n, a1) = (key("m"), key("n"), key("a1"))
        TestSeam.setHook("evict-before-delete", key: m) { k in
            guard k == m else { return }
            _ = try? store.catalog.recordStream(root: n, format: "hls", members: [.init(key: a1, role: .segment)])
        }
        defer { TestSeam.setHook("evict-before-delete", key: m, nil) }
        var c = Evictor.Criteria()
        c.keys = [m]
        let out = try Evictor(store: store).evict(c, dryRun: false)
        #expect(Set(out.evicted.map(\.key)) == [m, key("v1")])
        #expect(out.skipped.map(\.reason) == ["kept: another stream names it now"])
        #expect(try cached() == ["n", "v2", "a", "a1"])
        #expect(try store.catalog.streams().map(\.keys) == [[n, a1]])
        #expect(try cache.inspector.consistencyProblems() == [])
    }
}
