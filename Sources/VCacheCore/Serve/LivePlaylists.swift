#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
        private let done = MonotonicCondition()
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
    /// MPDs' segment totals, counted once per version.
    let mpdTotals = MPDTotals()
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
        shared(url) {
            let (outcome, playlist) = fetch()
            return (outcome, playlist, Self.freshness(of: playlist))
        }
    }

    /// A DASH MPD at `url`, as `answer`: `fetch` also says how long its answer stays fresh (a
    /// dynamic MPD's `minimumUpdatePeriod`, `freshness(minimumUpdatePeriod:)`; nil: not kept).
    public func answerMPD(_ url: String, fetch: () -> (SmallGet.Outcome, Duration?)) -> Shared {
        shared(url) {
            let (outcome, fresh) = fetch()
            return (outcome, nil, fresh)
        }
    }

    private func shared(_ url: String, fetch: () -> (SmallGet.Outcome, HLSPlaylist?, Duration?)) -> Shared {
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
            let (outcome, playlist, fresh) = fetch()
            state.withLock { s in
                s.flights[url] = nil
                if case .answer(let a) = outcome, a.status == 200 { Self.keep(&s.copies, url, a, fresh: fresh, now: .now) } else { s.copies[url] = nil }
            }
            flight.finish((outcome, playlist))
            return Shared(outcome: outcome, playlist: playlist, fetchedHere: true)
        }
    }

    /// Keeps `answer` for `url` when it is a live media playlist (no EXT-X-ENDLIST) with a target
    /// duration; forgets any older copy otherwise.
    public func keep(_ url: String, _ answer: SmallGet.Answer, playlist: HLSPlaylist?, now: ContinuousClock.Instant = .now) {
        state.withLock { Self.keep(&$0.copies, url, answer, fresh: Self.freshness(of: playlist), now: now) }
    }

    /// How long a live media playlist stays fresh; nil for anything else (not kept).
    static func freshness(of playlist: HLSPlaylist?) -> Duration? {
        guard case .media(let media)? = playlist, media.isLive, let target = media.targetDuration, target > 0 else { return nil }
        return freshness(targetDuration: target)
    }

    /// A dynamic MPD's `minimumUpdatePeriod` as a freshness: a player may not ask more often, so
    /// neither does serve; at most `maxFreshnessMilliseconds` (NaN, negative, zero or past
    /// 2^63 ms: not kept, or the most), so it is never served staler than that.
    public static func freshness(minimumUpdatePeriod seconds: Double?) -> Duration? {
        guard let seconds, !seconds.isNaN, seconds > 0 else { return nil }
        // Under a millisecond (1e-300 s, found by the fuzzer): not kept, as zero is.
        let ms = Checked.int64(seconds * 1000, clampedTo: 0...maxFreshnessMilliseconds) ?? maxFreshnessMilliseconds
        return ms > 0 ? .milliseconds(ms) : nil
    }

    /// Half the target duration, at most `maxFreshness` (a live playlist claiming a target of
    /// 10^20 s is reloaded as if it said 2 hours; NaN is refused by the parser, not here).
    static func freshness(targetDuration target: Double) -> Duration {
        .milliseconds(Checked.int64(target * 500, clampedTo: 0...maxFreshnessMilliseconds) ?? 0)
    }
    static let maxFreshnessMilliseconds: Int64 = 3_600_000

    private static func keep(_ c: inout [String: Copy], _ url: String, _ answer: SmallGet.Answer, fresh: Duration?, now: ContinuousClock.Instant) {
        guard let fresh, fresh > .zero else {
            c[url] = nil
            return
        }
        if c.count >= Self.capacity { c = c.filter { now < $0.value.fetched + $0.value.fresh } }
        if c.count >= Self.capacity, let oldest = c.min(by: { $0.value.fetched < $1.value.fetched })?.key { c[oldest] = nil }
        c[url] = Copy(answer: answer, fetched: now, fresh: fresh)
    }
}
