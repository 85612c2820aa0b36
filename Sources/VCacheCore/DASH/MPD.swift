#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A DASH Media Presentation Description as vcache reads it (ISO/IEC 23009-1 §5.3): what to
/// fetch, not everything it says. Built by `MPD.parse` with every inherited attribute and
/// segment description resolved onto the Representation, and every BaseURL resolved (RFC 3986)
/// against the MPD's final URL, so a Representation alone says where its segments are.
public struct MPD: Equatable, Sendable {
    /// The URL the MPD answered from (after redirects): the root of every BaseURL.
    public var url: String
    /// `@type="dynamic"`: a live presentation, whose segments change as it goes.
    public var isDynamic: Bool
    /// `@mediaPresentationDuration`, seconds.
    public var duration: Double?
    /// `@minimumUpdatePeriod`, seconds (dynamic).
    public var minimumUpdatePeriod: Double?
    /// `@availabilityStartTime`, seconds since 1970 (dynamic).
    public var availabilityStartTime: Double?
    /// `@timeShiftBufferDepth`, seconds (dynamic).
    public var timeShiftBufferDepth: Double?
    public var periods: [Period]
    /// Representations (or AdaptationSets) left out, each said in a line: one whose BaseURL,
    /// template or SegmentURL resolves to anything but http or https (an id `javascript:x` in
    /// `$RepresentationID$`), as serve's rewrite leaves it out (Docs/dash.md).
    public var leftOut: [String] = []

    public struct Period: Equatable, Sendable {
        public var id: String?
        /// Seconds from the presentation's start (§5.3.2.1: `@start`, else the previous Period's end).
        public var start: Double
        /// Seconds; from `@duration`, the next Period's start, or the presentation's duration.
        public var duration: Double?
        public var adaptationSets: [AdaptationSet]
    }

    public struct AdaptationSet: Equatable, Sendable {
        public var id: String?
        public var kind: Kind
        /// `@lang` (RFC 5646).
        public var language: String?
        /// ContentProtection present (at this level or on a Representation).
        public var isProtected: Bool
        /// Trick-mode, or an EssentialProperty vcache does not know: players skip it, so does vcache.
        public var isSkipped: Bool
        /// Role values of the scheme urn:mpeg:dash:role:2011 (`main`, `alternate`, `commentary`...).
        public var roles: [String] = []
        public var representations: [Representation]
    }

    public enum Kind: String, Equatable, Sendable {
        case video, audio, text, other
    }

    public struct Representation: Equatable, Sendable {
        public var id: String
        public var bandwidth: Int64
        public var width: Int?
        public var height: Int?
        public var codecs: String?
        public var mimeType: String?
        /// The BaseURLs in force, resolved; the first is the one fetched (§5.6.5: alternatives).
        public var baseURLs: [String]
        public var segments: SegmentInfo

        public var baseURL: String { baseURLs.first ?? "" }
    }

    /// How a Representation's segments are addressed (§5.3.9), inherited attributes merged.
    public enum SegmentInfo: Equatable, Sendable {
        /// No SegmentBase, SegmentList or SegmentTemplate: the BaseURL is the one segment.
        case single
        case base(SegmentBase)
        case list(SegmentList)
        case template(SegmentTemplate)
    }

    /// A byte range, first and last byte included (`@range="0-838"`).
    public struct ByteSpan: Equatable, Hashable, Sendable {
        public var first: Int64
        public var last: Int64
        public var count: Int64 { last - first + 1 }
        public init(first: Int64, last: Int64) {
            self.first = first
            self.last = last
        }
    }

    /// A URL and maybe a byte range of it.
    public struct URLRange: Equatable, Hashable, Sendable {
        public var url: String
        public var range: ByteSpan?
        public init(url: String, range: ByteSpan?) {
            self.url = url
            self.range = range
        }
    }

    public struct SegmentBase: Equatable, Sendable {
        public var timescale: Int64
        public var presentationTimeOffset: Int64
        /// Where the `sidx` box is (`@indexRange`).
        public var indexRange: ByteSpan?
        public var initialization: URLRange?
    }

    /// One `S` element: `repeat` -1 repeats to the next `t` or the Period's end.
    public struct TimelineRun: Equatable, Sendable {
        public var time: Int64?
        public var duration: Int64
        public var repeatCount: Int64
    }

    public struct SegmentList: Equatable, Sendable {
        public var timescale: Int64
        public var presentationTimeOffset: Int64
        public var duration: Int64?
        public var startNumber: Int64
        public var timeline: [TimelineRun]?
        public var initialization: URLRange?
        public var segments: [URLRange]
    }

    public struct SegmentTemplate: Equatable, Sendable {
        public var timescale: Int64
        public var presentationTimeOffset: Int64
        public var duration: Int64?
        public var startNumber: Int64
        public var endNumber: Int64?
        public var timeline: [TimelineRun]?
        public var media: DASHTemplate?
        /// Only `$RepresentationID$` and `$Bandwidth$` (§5.3.9.4.2): resolved already.
        public var initialization: String?
        public var mediaBase: String
    }
}

extension MPD {
    /// Every Representation with the Period and AdaptationSet it is in.
    public var representations: [(period: Int, set: Int, representation: Representation)] {
        var out: [(Int, Int, Representation)] = []
        for (p, period) in periods.enumerated() {
            for (a, set) in period.adaptationSets.enumerated() {
                for r in set.representations { out.append((p, a, r)) }
            }
        }
        return out
    }
}
