import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

/// Issue 24, the cache: stream membership in the catalog (migration 3), and a cache written by
/// the vcache before it (schema 1) opening, upgrading in place and keeping every entry.
@Suite struct StreamCatalogTests {
    let dir = TempDirectory("vcache-streamcatalog")

    /// Schema 1 exactly as vcache wrote it before streams (migration 1, verbatim).
    static let schema1 = """
        CREATE TABLE entries (
            key TEXT PRIMARY KEY NOT NULL,
            url TEXT NOT NULL,
            latest_url TEXT NOT NULL,
            length INTEGER,
            etag TEXT,
            last_modified TEXT,
            content_type TEXT,
            created REAL NOT NULL,
            last_used REAL NOT NULL,
            completed REAL,
            sha256 TEXT,
            pinned INTEGER NOT NULL DEFAULT 0,
            cached_bytes INTEGER NOT NULL DEFAULT 0,
            disk_bytes INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX entries_by_last_used ON entries(last_used);
        CREATE TABLE ranges (
            key TEXT NOT NULL REFERENCES entries(key) ON DELETE CASCADE,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            PRIMARY KEY (key, start)
        ) WITHOUT ROWID;
        CREATE TABLE config (
            name TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        );
        """

    /// A schema-1 catalog at `path` holding one complete entry `a`, one partial `b` (pinned) and a setting.
    static func makeSchema1(_ path: String) throws {
        let db = try Database(path: path)
        try db.write { c in
            try c.execute(schema1)
            try c.execute("PRAGMA user_version = 1")
            try c.run("""
                INSERT INTO entries (key, url, latest_url, length, etag, created, last_used, completed, sha256, pinned, cached_bytes, disk_bytes)
                VALUES ('a', 'http://h/a.mp4', 'http://h/a.mp4', 100, '"x"', 1000, 2000, 2000, 'abc', 0, 100, 4096),
                       ('b', 'http://h/b.mp4', 'http://h/b2.mp4', 1000, NULL, 1000, 3000, NULL, NULL, 1, 300, 8192)
                """)
            try c.run("INSERT INTO ranges (key, start, end) VALUES ('a', 0, 100), ('b', 0, 200), ('b', 500, 600)")
            try c.run("INSERT INTO config (name, value) VALUES ('max-size', '1G')")
        }
    }

    @Test func aSchema1CatalogUpgradesInPlaceAndKeepsEveryEntry() throws {
        let path = dir.file("old.db")
        try Self.makeSchema1(path)
        // Read-only (ls, info), it stays schema 1 and reads as before, with no streams.
        let reader = try Catalog(readOnlyPath: path)
        #expect(reader.schema == 1)
        #expect(try reader.allEntries().map(\.key) == ["b", "a"])
        #expect(try reader.streams().isEmpty)
        // Opened to write, it upgrades in place.
        let c = try Catalog(path: path)
        #expect(try c.database.read { try $0.userVersion } == Catalog.schemaVersion)
        #expect(Catalog.schemaVersion == 6)
        #expect(try reader.finalURL(of: "a") == nil)
        #expect(try reader.chunkStates(key: "a") == nil)
        let a = try #require(try c.entry(key: "a"))
        #expect(a.isComplete && a.sha256 == "abc" && a.ranges.ranges == [ByteRange(0, 100)] && a.etag == "\"x\"")
        let b = try #require(try c.entry(key: "b"))
        #expect(!b.isComplete && b.pinned && b.latestURL == "http://h/b2.mp4" && b.ranges.ranges == [ByteRange(0, 200), ByteRange(500, 600)])
        #expect(try c.config("max-size") == "1G")
        #expect(try c.streams().isEmpty)
        // Streams are recorded in the upgraded file, and an old binary refuses it (NewerSchema).
        try c.recordStream(root: "a", format: "hls", members: [.init(key: "b", role: .segment)])
        #expect(try c.streams() == [StreamRecord(root: "a", format: "hls", members: [.init(key: "a", role: .manifest), .init(key: "b", role: .segment)])])
        let again = try Catalog(path: path)
        #expect(try again.allEntries().count == 2)
    }

    @Test func aLonePlaylistJoinsTheMasterThatNamesItAndAStreamGoesWithItsRoot() throws {
        let c = try Catalog(path: dir.file("s.db"))
        for k: CacheKey in ["p1", "m"] { try c.commit(update(k)) }
        // The media playlist prefetched alone first: a stream of its own.
        try c.recordStream(root: "p1", format: "hls", members: [.init(key: "s1", role: .segment), .init(key: "s2", role: .segment)])
        #expect(try c.streams().map(\.root) == ["p1"])
        // Then its master: one stream, its segments in it.
        try c.recordStream(root: "m", format: "hls", members: [.init(key: "p1", role: .playlist), .init(key: "p2", role: .playlist)])
        // The media playlist recorded again, alone (a player fetched it directly): it stays in the master's.
        #expect(try c.recordStream(root: "p1", format: "hls", members: [.init(key: "s3", role: .segment)]) == "m")
        let s = try #require(try c.streams().first)
        #expect(try c.streams().count == 1 && s.root == "m")
        #expect(s.members.map(\.key) == ["m", "p1", "p2", "s1", "s2", "s3"])
        #expect(s.members.first { $0.key == "p1" }?.role == .playlist)
        // Recording what is known already writes nothing (the same answer).
        #expect(try c.recordStream(root: "m", format: "hls", members: [.init(key: "p1", role: .playlist)]) == "m")
        // A member removed: its row stays (the stream still names it, not cached); the root
        // removed: its stream's rows go.
        for k: CacheKey in ["s1"] { try c.commit(update(k)) }
        let t = try #require(try c.entry(key: "s1")).lastUsed
        #expect(try c.removeEntries([("s1", t)], evenIfPinned: false) == ["s1"])
        #expect(try c.streams().first?.members.map(\.key) == ["m", "p1", "p2", "s1", "s2", "s3"])
        let tm = try #require(try c.entry(key: "m")).lastUsed
        #expect(try c.removeEntries([("m", tm)], evenIfPinned: false) == ["m"])
        #expect(try c.streams().isEmpty)
        #expect(try c.database.read { c in var n: Int64 = -1; try c.query("SELECT count(*) FROM stream_members") { n = $0.int(0) }; return n } == 0)
    }

    /// Two masters naming one audio playlist and its segment: a member of both. A stream is
    /// recorded only for a root the catalog holds (one evicted meanwhile leaves no stream).
    @Test func anEntryTwoStreamsNameIsAMemberOfEachAndAStreamNeedsItsRoot() throws {
        let c = try Catalog(path: dir.file("shared.db"))
        for k: CacheKey in ["m", "n"] { try c.commit(update(k)) }
        try c.recordStream(root: "m", format: "hls", members: [.init(key: "v1", role: .playlist), .init(key: "a", role: .playlist)])
        try c.recordStream(root: "n", format: "hls", members: [.init(key: "v2", role: .playlist), .init(key: "a", role: .playlist)])
        // The audio playlist answered alone: what it names joins both.
        #expect(try c.recordStream(root: "a", format: "hls", members: [.init(key: "a1", role: .segment)]) == "m")
        #expect(try c.streams().map(\.keys) == [["m", "a", "a1", "v1"], ["n", "a", "a1", "v2"]])
        #expect(try c.playlists(naming: "a1")?.playlists == ["m", "n", "a", "v1", "v2"])
        // The root gone: nothing is recorded for it.
        #expect(try c.recordStream(root: "gone", format: "hls", members: [.init(key: "x", role: .segment)]) == nil)
        #expect(try c.streams().count == 2)
        // n removed: its rows go, m's stay whole.
        let t = try #require(try c.entry(key: "n")).lastUsed
        #expect(try c.removeEntries([("n", t)], evenIfPinned: false) == ["n"])
        #expect(try c.streams().map(\.keys) == [["m", "a", "a1", "v1"]])
    }

    /// A schema-4 catalog (members of one stream each) upgrades to 5 keeping every member row.
    @Test func aSchema4CatalogKeepsItsStreamsWhenMembersMayBeShared() throws {
        let path = dir.file("four.db")
        do {
            let c = try Catalog(path: path)
            try c.commit(update("m"))
            try c.database.write { c in
                try c.execute("""
                    DROP TABLE expected_digests;
                    DROP TABLE stream_members;
                    CREATE TABLE stream_members (key TEXT PRIMARY KEY NOT NULL, root TEXT NOT NULL, role TEXT NOT NULL);
                    CREATE INDEX stream_members_by_root ON stream_members(root);
                    INSERT INTO streams (root, format) VALUES ('m', 'hls');
                    INSERT INTO stream_members (key, root, role) VALUES ('m', 'm', 'manifest'), ('a', 'm', 'playlist');
                    PRAGMA user_version = 4;
                    """)
            }
        }
        #expect(try Catalog(readOnlyPath: path).streams().map(\.keys) == [["m", "a"]])
        let c = try Catalog(path: path)
        #expect(try c.streams().map(\.keys) == [["m", "a"]])
        try c.commit(update("n"))
        try c.recordStream(root: "n", format: "hls", members: [.init(key: "a", role: .playlist)])
        #expect(try c.streams().map(\.keys) == [["m", "a"], ["n", "a"]])
    }

    /// A group (a stream's members) goes whole or not at all: one used since the choice keeps all.
    @Test func aGroupIsRemovedWholeOrNotAtAll() throws {
        let c = try Catalog(path: dir.file("g.db"))
        for k: CacheKey in ["a", "b", "c"] { try c.commit(update(k)) }
        let t = try #require(try c.entry(key: "a")).lastUsed
        #expect(try c.removeEntries(groups: [[("a", t), ("b", t.addingTimeInterval(-60))], [("c", try #require(try c.entry(key: "c")).lastUsed)]], evenIfPinned: false) == ["c"])
        #expect(try c.allEntries().map(\.key).sorted() == ["a", "b"])
    }

    @Test func pinningARootPinsEveryCachedMember() throws {
        let c = try Catalog(path: dir.file("p.db"))
        for k: CacheKey in ["m", "p", "s"] { try c.commit(update(k)) }
        try c.recordStream(root: "m", format: "hls", members: [.init(key: "p", role: .playlist), .init(key: "s", role: .segment)])
        #expect(try c.setPinned(key: "m", true))
        #expect(try c.allEntries().allSatisfy(\.pinned))
        #expect(try c.setPinned(key: "m", false))
        #expect(try c.allEntries().allSatisfy { !$0.pinned })
    }

    @Test func salvageKeepsTheStreamsOfRootsItKept() throws {
        let old = try Catalog(path: dir.file("old.db"))
        for k: CacheKey in ["m", "s"] { try old.commit(update(k)) }
        try old.recordStream(root: "m", format: "hls", members: [.init(key: "s", role: .segment), .init(key: "t", role: .segment)])
        try old.recordStream(root: "gone", format: "hls", members: [.init(key: "u", role: .segment)])
        let new = try Catalog(path: dir.file("new.db"))
        #expect(try new.salvage(from: dir.file("old.db")).kept == 2)
        #expect(try new.streams().map(\.root) == ["m"])
        #expect(try new.streams().first?.keys == ["m", "s", "t"])
    }

    /// The stream model knows no HLS: a manifest of another format (a DASH MPD, say) folds the
    /// same, complete when every member it names is cached complete.
    @Test func aStreamOfAnotherFormatFoldsTheSame() throws {
        let store = try CacheStore(directory: dir.file("cache"))
        for k: CacheKey in ["mpd", "init", "s1", "x"] {
            var u = update(k)
            u.added = RangeSet([ByteRange(0, 10)])
            u.sha256 = "h"
            try store.catalog.commit(u)
        }
        try store.catalog.recordStream(root: "mpd", format: "dash", members: [.init(key: "init", role: .initSection), .init(key: "s1", role: .segment)])
        let inventory = StreamInventory(store: store, keyRules: CacheKeyRules())
        let (streams, alone) = try inventory.fold(try store.catalog.allEntries())
        #expect(alone.map(\.key) == ["x"])
        #expect(streams.count == 1 && streams[0].entries.map(\.key) == ["mpd", "init", "s1"] && streams[0].isComplete)
        #expect(streams[0].cachedBytes == 30 && streams[0].playlists.isEmpty)
        // A member named and not cached: partial.
        try store.catalog.recordStream(root: "mpd", format: "dash", members: [.init(key: "s2", role: .segment)])
        #expect(try inventory.stream(root: "mpd")?.isComplete == false)
    }

    func update(_ key: CacheKey) -> Catalog.Update {
        Catalog.Update(key: key, url: "http://h/\(key)", validators: Validators(length: 10, etag: nil, lastModified: nil))
    }
}
