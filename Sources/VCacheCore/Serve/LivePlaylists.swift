import Foundation
import Synchronization

/// Live media playlists fetched lately (RFC 8216 §6.3.4: a client reloads a live playlist about
/// every target duration). A player asking again, or several players asking at once, within half
/// a target duration get the copy fetched then instead of another origin request; past that it is
/// fetched again, so it is never served staler than half a target duration. VOD playlists and
/// masters are not kept here (they are fetched fresh, and cached like any file for offline play).
public final class LivePlaylists: Sendable {
    public struct Copy: Sendable {
        public var answer: SmallGet.Answer
        public var fetched: ContinuousClock.Instant
        /// How long it stays fresh: half the playlist's target duration.
        public var fresh: Duration
    }

    private let copies = Mutex<[String: Copy]>([:])
    /// At most this many playlists are kept (a box plays a handful of live streams).
    static let capacity = 64

    public init() {}

    /// The copy of `url` still fresh at `now`, if any.
    public func fresh(_ url: String, now: ContinuousClock.Instant = .now) -> SmallGet.Answer? {
        copies.withLock { c in
            guard let copy = c[url], now < copy.fetched + copy.fresh else { return nil }
            return copy.answer
        }
    }

    /// Keeps `answer` for `url` when it is a live media playlist (no EXT-X-ENDLIST) with a target
    /// duration; forgets any older copy otherwise.
    public func keep(_ url: String, _ answer: SmallGet.Answer, playlist: HLSPlaylist?, now: ContinuousClock.Instant = .now) {
        guard case .media(let media)? = playlist, media.isLive, let target = media.targetDuration, target > 0 else {
            copies.withLock { $0[url] = nil }
            return
        }
        let copy = Copy(answer: answer, fetched: now, fresh: .milliseconds(Int64(target * 500)))
        copies.withLock { c in
            if c.count >= Self.capacity { c = c.filter { now < $0.value.fetched + $0.value.fresh } }
            if c.count >= Self.capacity, let oldest = c.min(by: { $0.value.fetched < $1.value.fetched })?.key { c[oldest] = nil }
            c[url] = copy
        }
    }
}
