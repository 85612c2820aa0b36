import Foundation
import Synchronization

/// Playlists serve fetches from the origin: one fetch per URL at a time, shared by every player
/// asking meanwhile, and live media playlists kept a while after (RFC 8216 §6.3.4: a client
/// reloads a live playlist about every target duration). A player asking again, or several
/// players asking at once, within half a target duration get the copy fetched then instead of
/// another origin request; past that it is fetched again, so it is never served staler than half
/// a target duration. VOD playlists and masters are not kept here (they are fetched fresh, and
/// cached like any file for offline play), but players asking for one while it is being fetched
/// share that fetch too.
///
/// Lock order: `state`, then a flight's condition (a flight is finished outside `state`).
public final class LivePlaylists: Sendable {
    public struct Copy: Sendable {
        public var answer: SmallGet.Answer
        public var fetched: ContinuousClock.Instant
        /// How long it stays fresh: half the playlist's target duration.
        public var fresh: Duration
    }

    /// What a caller gets: the origin's outcome, the playlist parsed from it, and whether this
    /// caller fetched it (then it alone acts on it: drops a changed stream, records the final URL).
    public struct Shared: Sendable {
        public var outcome: SmallGet.Outcome
        public var playlist: HLSPlaylist?
        public var fetchedHere: Bool
    }

    /// One fetch in progress: the callers waiting for it sleep on `done` until `result` is set.
    final class Flight: @unchecked Sendable {  // `result` is read and written only under `done`
        private let done = NSCondition()
        private var result: (SmallGet.Outcome, HLSPlaylist?)?

        func finish(_ r: (SmallGet.Outcome, HLSPlaylist?)) {
            done.lock()
            result = r
            done.broadcast()
            done.unlock()
        }

        func wait() -> (SmallGet.Outcome, HLSPlaylist?) {
            done.lock()
            defer { done.unlock() }
            while result == nil { done.wait() }
            return result!
        }
    }

    private struct State {
        var copies: [String: Copy] = [:]
        var flights: [String: Flight] = [:]
    }
    private let state = Locked(State())
    /// At most this many playlists are kept (a box plays a handful of live streams).
    static let capacity = 64

    public init() {}

    /// The copy of `url` still fresh at `now`, if any.
    public func fresh(_ url: String, now: ContinuousClock.Instant = .now) -> SmallGet.Answer? {
        state.withLock { s in
            guard let copy = s.copies[url], now < copy.fetched + copy.fresh else { return nil }
            return copy.answer
        }
    }

    /// The playlist at `url`: a fresh copy; else the fetch of it in progress, waited for; else
    /// `fetch` run by this caller (the origin's outcome and what it parses to), which callers
    /// asking meanwhile share. A live answer is kept before any of them is woken.
    public func answer(_ url: String, fetch: () -> (SmallGet.Outcome, HLSPlaylist?)) -> Shared {
        enum Step { case copy(SmallGet.Answer), wait(Flight), lead(Flight) }
        let step: Step = state.withLock { s in
            if let copy = s.copies[url], ContinuousClock.now < copy.fetched + copy.fresh { return .copy(copy.answer) }
            if let flight = s.flights[url] { return .wait(flight) }
            let flight = Flight()
            s.flights[url] = flight
            return .lead(flight)
        }
        switch step {
        case .copy(let answer):
            return Shared(outcome: .answer(answer), playlist: nil, fetchedHere: false)
        case .wait(let flight):
            let (outcome, playlist) = flight.wait()
            return Shared(outcome: outcome, playlist: playlist, fetchedHere: false)
        case .lead(let flight):
            let (outcome, playlist) = fetch()
            state.withLock { s in
                s.flights[url] = nil
                if case .answer(let a) = outcome, a.status == 200 { Self.keep(&s.copies, url, a, playlist: playlist, now: .now) }
            }
            flight.finish((outcome, playlist))
            return Shared(outcome: outcome, playlist: playlist, fetchedHere: true)
        }
    }

    /// Keeps `answer` for `url` when it is a live media playlist (no EXT-X-ENDLIST) with a target
    /// duration; forgets any older copy otherwise.
    public func keep(_ url: String, _ answer: SmallGet.Answer, playlist: HLSPlaylist?, now: ContinuousClock.Instant = .now) {
        state.withLock { Self.keep(&$0.copies, url, answer, playlist: playlist, now: now) }
    }

    /// Half the target duration, at most `maxFreshness` (a live playlist claiming a target of
    /// 10^20 s is reloaded as if it said 2 hours; NaN is refused by the parser, not here).
    static func freshness(targetDuration target: Double) -> Duration {
        .milliseconds(Checked.int64(target * 500, clampedTo: 0...maxFreshnessMilliseconds) ?? 0)
    }
    static let maxFreshnessMilliseconds: Int64 = 3_600_000

    private static func keep(_ c: inout [String: Copy], _ url: String, _ answer: SmallGet.Answer, playlist: HLSPlaylist?, now: ContinuousClock.Instant) {
        guard case .media(let media)? = playlist, media.isLive, let target = media.targetDuration, target > 0 else {
            c[url] = nil
            return
        }
        if c.count >= Self.capacity { c = c.filter { now < $0.value.fetched + $0.value.fresh } }
        if c.count >= Self.capacity, let oldest = c.min(by: { $0.value.fetched < $1.value.fetched })?.key { c[oldest] = nil }
        c[url] = Copy(answer: answer, fetched: now, fresh: freshness(targetDuration: target))
    }
}
