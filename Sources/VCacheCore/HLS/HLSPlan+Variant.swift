extension HLSPlan {
    /// Which variants of a master playlist (`--variant`):
    /// `best` (the highest BANDWIDTH), `worst` (the lowest), `all`, `720p` (the best of those
    /// with RESOLUTION height 720), `<=720p` (the best of those at most 720 high), or a BANDWIDTH
    /// number (the variant that declares exactly it). Variants without RESOLUTION never match a
    /// height. Ties go to the higher AVERAGE-BANDWIDTH, the taller RESOLUTION, then the first listed.
    public enum VariantChoice: Hashable, Sendable, CustomStringConvertible {
        case best, worst, all
        case height(Int)
        case atMostHeight(Int)
        case bandwidth(Int)

        /// Reads `best`, `worst`, `all`, `720p`, `<=720p` or `2560000` (any case); nil otherwise.
        public init?(argument: String) {
            let s = argument.lowercased()
            switch s {
            case "best": self = .best
            case "worst": self = .worst
            case "all": self = .all
            default:
                // A height or a bandwidth of 0 names no variant (§4.3.4.2: BANDWIDTH is a bit rate).
                if s.hasPrefix("<="), s.hasSuffix("p"), let h = HLSAttributeList.decimalInteger(s.dropFirst(2).dropLast()), h > 0 {
                    self = .atMostHeight(h)
                } else if s.hasSuffix("p"), let h = HLSAttributeList.decimalInteger(s.dropLast()), h > 0 {
                    self = .height(h)
                } else if let b = HLSAttributeList.decimalInteger(s), b > 0 {
                    self = .bandwidth(b)
                } else {
                    return nil
                }
            }
        }

        public var description: String {
            switch self {
            case .best: return "best"
            case .worst: return "worst"
            case .all: return "all"
            case .height(let h): return "\(h)p"
            case .atMostHeight(let h): return "<=\(h)p"
            case .bandwidth(let b): return "\(b)"
            }
        }

        func choose(from variants: [HLSMasterPlaylist.Variant]) throws(HLSPlanError) -> [HLSMasterPlaylist.Variant] {
            guard !variants.isEmpty else { throw .noVariants }
            let found: [HLSMasterPlaylist.Variant]
            switch self {
            case .all: return variants
            case .best: found = Self.best(variants).map { [$0] } ?? []
            case .worst: found = Self.worst(variants).map { [$0] } ?? []
            case .height(let h): found = Self.best(variants.filter { $0.resolution?.height == h }).map { [$0] } ?? []
            case .atMostHeight(let h): found = Self.best(variants.filter { ($0.resolution?.height).map { $0 <= h } ?? false }).map { [$0] } ?? []
            case .bandwidth(let b): found = variants.first { $0.bandwidth == b }.map { [$0] } ?? []
            }
            guard !found.isEmpty else {
                throw .noSuchVariant(wanted: description, available: variants.map { v in
                    (v.resolution.map { "\($0.height)p " } ?? "") + "\(v.bandwidth)"
                })
            }
            return found
        }

        /// Orders variants by BANDWIDTH, then AVERAGE-BANDWIDTH, then height.
        static func rank(_ v: HLSMasterPlaylist.Variant) -> (Int, Int, Int) {
            (v.bandwidth, v.averageBandwidth ?? 0, v.resolution?.height ?? 0)
        }

        /// The highest rank; the first listed among equals.
        static func best(_ variants: [HLSMasterPlaylist.Variant]) -> HLSMasterPlaylist.Variant? {
            variants.reduce(nil) { kept, v in kept.map { rank(v) > rank($0) ? v : $0 } ?? v }
        }

        /// The lowest rank; the first listed among equals.
        static func worst(_ variants: [HLSMasterPlaylist.Variant]) -> HLSMasterPlaylist.Variant? {
            variants.reduce(nil) { kept, v in kept.map { rank(v) < rank($0) ? v : $0 } ?? v }
        }
    }
}
