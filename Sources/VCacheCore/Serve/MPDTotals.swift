#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// serve's count of an MPD's segments against `DASHLimits.maxTotalSegments` (Docs/dash.md,
/// "limits"), once per version of an MPD: a player reloads a static MPD on every start and the
/// count plans every Representation (100 Representations of 10,000 segments is a million
/// segments counted per request). A version is its bytes (their count and hash) at its URL; a
/// dynamic MPD's count grows with the clock, so its verdict holds `dynamicFor` only.
public final class MPDTotals: Sendable {
    private struct Verdict {
        var count: Int
        var hash: Int
        var refusal: DASHError?
        /// Its segments in all Representations (0 when refused).
        var segments: Int
        /// Nil: a static MPD's verdict, for good.
        var until: ContinuousClock.Instant?
    }
    private let verdicts = Locked<[String: Verdict]>([:])
    /// At most this many versions are remembered (then all are forgotten and counted again).
    static let capacity = 256
    static let dynamicFor: Duration = .seconds(2)

    public init() {}

    /// Why the MPD `bytes` at `url` is refused for its segment total, or nil when it is not.
    /// `mpd`: the bytes already parsed (without the count); else they are parsed here when the
    /// version is not known (a version that does not parse is no business of this count: nil).
    func refusal(_ url: String, bytes: [UInt8], base: String, mpd: MPD? = nil, now: ContinuousClock.Instant = .now) -> DASHError? {
        let hash = bytes.hashValue
        if let known = verdicts.withLock({ $0[url] }), known.count == bytes.count, known.hash == hash, known.until.map({ now < $0 }) ?? true {
            return known.refusal
        }
        guard let mpd = mpd ?? (try? MPD.parse(bytes, url: base, checkingTotal: false)) else { return nil }
        var refusal: DASHError?, segments = 0
        do { segments = try mpd.checkSegmentTotal(now: nil, perRepresentation: true) } catch { refusal = error }
        let verdict = Verdict(count: bytes.count, hash: hash, refusal: refusal, segments: segments, until: mpd.isDynamic ? now + Self.dynamicFor : nil)
        verdicts.withLock { v in
            if v.count >= Self.capacity && v[url] == nil { v.removeAll() }
            v[url] = verdict
        }
        return refusal
    }

    /// The segments in all Representations of the version of the MPD at `url` last counted by
    /// `refusal`; 0 when none was.
    func segments(_ url: String) -> Int { verdicts.withLock { $0[url]?.segments ?? 0 } }
}
