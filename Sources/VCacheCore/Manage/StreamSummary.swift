#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stream as one thing to the user (`ls`, `info`, `verify`, `export`): its members folded,
/// what of it is cached. Format-neutral; what a manifest says of its playlists and seconds comes
/// from the format's reader (`StreamSummary+HLS.swift`), and a format without one still folds.
public struct StreamSummary: Sendable {
    public var record: StreamRecord
    /// The members cached (an entry exists), root first, each with its ranges.
    public var entries: [CacheEntry]
    /// Each media playlist the root names (a lone media playlist: itself), with what is cached.
    public var playlists: [Playlist] = []

    public struct Playlist: Sendable, Equatable {
        public var url: String
        public var key: CacheKey
        /// "variant" or the rendition's type ("audio", "subtitles", ...); "playlist" for a lone one.
        public var kind: String
        /// What the manifest says of it: bandwidth and resolution, or the rendition's name and language.
        public var label: String
        /// The playlist itself cached (complete).
        public var cached: Bool
        public var segments: Int = 0
        /// Segments whose own bytes are cached (their byte range, or their file whole).
        public var segmentsCached: Int = 0
        /// Segments that play from the cache: their init section and key cached too.
        public var segmentsPlaying: Int = 0
        public var seconds: Double = 0
        /// Seconds that play from the start with nothing missing.
        public var secondsCached: Double = 0
        public var isWhole: Bool { cached && segments > 0 && segmentsPlaying == segments }
    }

    public var root: CacheKey { record.root }
    public var rootEntry: CacheEntry? { entries.first { $0.key == record.root } }
    public var url: String { rootEntry?.latestURL ?? record.root.hex }
    public var cachedBytes: Int64 { entries.reduce(0) { $0 + $1.cachedBytes } }
    public var diskBytes: Int64 { entries.reduce(0) { $0 + $1.diskBytes } }
    public var lastUsed: Date { entries.map(\.lastUsed).max() ?? .distantPast }
    public var pinned: Bool { entries.contains(where: \.pinned) }
    public var variants: [Playlist] { playlists.filter { $0.kind == "variant" || $0.kind == "playlist" } }
    /// DASH: the stream's counts over its Periods and chosen Representations (nil: HLS).
    public var dash: DASHTotals?

    /// A DASH stream's counts (Docs/dash.md, "Counts"): of the Representations its runs chose,
    /// the segments and those that play (their init cached too); the presentation's seconds over
    /// every Period, and those that play from its start with video and audio both.
    public struct DASHTotals: Sendable, Equatable {
        public var segments = 0
        public var segmentsPlaying = 0
        public var seconds: Double = 0
        public var secondsCached: Double = 0
    }

    public var segments: Int { dash?.segments ?? playlists.reduce(0) { $0 + $1.segments } }
    /// HLS: segments whose bytes are cached; DASH: segments that play (their init cached too).
    public var segmentsCached: Int { dash?.segmentsPlaying ?? playlists.reduce(0) { $0 + $1.segmentsCached } }
    /// The longest a variant plays from its start, from the cache (DASH: over every Period).
    public var secondsCached: Double { dash?.secondsCached ?? variants.map(\.secondsCached).max() ?? 0 }
    public var seconds: Double { dash?.seconds ?? variants.map(\.seconds).max() ?? 0 }
    /// Complete: every member cached is complete, and every playlist cached holds all its segments
    /// (a variant never fetched, `--variant worst`, does not make it partial).
    /// A format with no reader here (no `playlists`): complete when every member named is cached complete.
    /// DASH: the stream names the Representations its runs chose and each of their members, so
    /// every one of them must be cached (audio whole beside a video whose segments were all
    /// refused is not a complete stream).
    /// A root marked to be asked for again (`StreamRole.manifestToAsk`: a media playlist of it
    /// changed on the origin, was evicted or dropped by `verify --fix`), or unconfirmed
    /// (`manifestUnconfirmed`: a run fetched members and has not found its manifest unchanged
    /// at their end), is partial too.
    public var isComplete: Bool {
        guard entries.allSatisfy(\.isComplete) else { return false }
        if record.members.first?.role.isMarked == true { return false }
        if playlists.isEmpty || record.format == "dash" {
            guard entries.count == Set(record.keys).count else { return false }
            // An MPD naming no Representation (a bad deploy) is no complete stream: the next run
            // asks for it again, and completes the stream from the MPD the origin has then.
            if playlists.isEmpty { return record.format != "dash" || dash == nil }
        }
        return playlists.allSatisfy { !$0.cached || $0.isWhole } && playlists.contains(where: \.isWhole)
    }
}

/// Folds a catalog's entries into streams and the entries of no stream.
public struct StreamInventory {
    public let store: CacheStore
    /// How URLs a manifest names map to keys (the cache's `strip-query` rules).
    public let keyRules: CacheKeyRules
    public init(store: CacheStore, keyRules: CacheKeyRules) {
        self.store = store
        self.keyRules = keyRules
    }

    /// Every stream with a cached member, most recently used first, and the entries of no stream.
    public func fold(_ entries: [CacheEntry]) throws -> (streams: [StreamSummary], alone: [CacheEntry]) {
        let records = try store.catalog.streams()
        var inStream = Set<CacheKey>()
        var streams: [StreamSummary] = []
        let present = Set(entries.map(\.key))
        var names: Set<String>??
        for r in records {
            let keys = r.keys.filter { present.contains($0) }
            guard !keys.isEmpty else { continue }
            inStream.formUnion(keys)
            if names == nil, r.format == "dash" { names = .some(CachedURLIndex.names(in: store.catalog)) }
            streams.append(try summary(r, names: names ?? nil))
        }
        streams.sort { ($0.lastUsed, $1.root) > ($1.lastUsed, $0.root) }
        return (streams, entries.filter { !inStream.contains($0.key) })
    }

    /// The stream `key` is the root of, or nil.
    public func stream(root key: CacheKey) throws -> StreamSummary? {
        try store.catalog.stream(root: key).map { try summary($0) }
    }

    public func summary(_ r: StreamRecord) throws -> StreamSummary {
        try summary(r, names: r.format == "dash" ? CachedURLIndex.names(in: store.catalog) : nil)
    }

    /// `names`: `CachedURLIndex.names`, read once for all the streams of one `fold`.
    func summary(_ r: StreamRecord, names: Set<String>?) throws -> StreamSummary {
        let byKey = try store.catalog.memberEntries(root: r.root)
        var s = StreamSummary(record: r, entries: r.keys.compactMap { byKey[$0] })
        if r.format == "hls" { s.playlists = hlsPlaylists(s, byKey) }
        if r.format == "dash" {
            (s.playlists, s.dash) = dashRepresentations(s, CachedURLIndex(keyRules: keyRules, catalog: store.catalog, byKey: byKey, names: names))
        }
        return s
    }
}
