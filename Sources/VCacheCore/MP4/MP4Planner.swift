/// What an MP4-aware prefetch wants cached.
public enum MP4Goal: Equatable, Sendable {
    /// The index (`moov`), wherever it is, so a cached head can start playback (`--bytes`).
    case moov
    /// `ftyp`, `moov` and every sample a player decodes for the first N seconds (`--seconds N`);
    /// for a fragmented file, the fragments that cover them.
    case seconds(Double)
}

/// Decides, one step at a time, which bytes an MP4-aware prefetch needs next, from the bytes
/// already held: top-level box headers one hop at a time (read a header, skip by its size), then
/// the whole `moov`, then the samples (or fragments) of the first seconds. Pure: it reads only
/// bytes `have` says are held, through `read`, and answers what to fetch; the prefetch job
/// fetches it with the same writer, checkpoints and response rules as any other range, and
/// asks again.
public struct MP4Planner {
    public enum Step: Equatable, Sendable {
        /// Fetch these, then ask again.
        case need(RangeSet, Reason)
        case done(Found)
        case failed(MP4Error)
    }

    public enum Reason: Equatable, Sendable {
        case header(at: Int64)
        case moov(MP4Box)
        case samples
        case fragment(at: Int64)
    }

    /// What the walk found, for reporting.
    public struct Found: Equatable, Sendable {
        public var moov: MP4Box?
        public var fragmented = false
        /// Bytes the goal needs in all: boxes before the media, the moov, samples or fragments.
        public var neededBytes: Int64 = 0
    }

    public let goal: MP4Goal
    public let length: Int64
    public let have: RangeSet
    public let read: MP4Walker.Read

    public init(goal: MP4Goal, length: Int64, have: RangeSet, read: @escaping MP4Walker.Read) {
        self.goal = goal
        self.length = length
        self.have = have
        self.read = read
    }

    /// Top-level boxes a file may start with; anything else is not ISO BMFF.
    static let firstTypes: Set<String> = ["ftyp", "styp", "moov", "mdat", "free", "skip", "wide", "pdin", "sidx", "moof", "uuid", "junk", "pnot"]
    static let maxTopLevelBoxes = 100_000

    /// The byte ranges of the segments a `sidx` (ISO/IEC 14496-12 §8.16.3) lists as starting
    /// before `seconds` (counted from its earliest presentation time); nil when it points at
    /// other sidx boxes (a hierarchy: the moof walk is used instead).
    static func segments(sidx: MP4Box, bytes: [UInt8], before seconds: Double, length: Int64) throws -> RangeSet? {
        var c = ByteCursor(Array(bytes[Int(sidx.headerSize)...]), box: sidx)
        let (version, _) = try c.fullBox()
        try c.skip(4)  // reference_ID
        let timescale = try c.u32()
        try c.skip(version == 0 ? 4 : 8)  // earliest_presentation_time
        let firstOffset = version == 0 ? UInt64(try c.u32()) : try c.u64()
        try c.skip(2)
        let count = Int(try c.u16())
        guard count * 12 <= c.remaining else { throw c.error("its reference count \(count) cannot fit in the box") }
        guard timescale > 0 else { throw c.error("its timescale is 0") }
        // Differences, not sums: the file's length is the origin's word and may be near 2^63.
        guard sidx.end <= length, firstOffset <= UInt64(length - sidx.end) else { throw c.error("its first offset \(firstOffset) lies past the file") }
        var anchor = sidx.end + Int64(firstOffset)
        var elapsed: UInt64 = 0
        var out = RangeSet()
        for _ in 0..<count {
            let word = try c.u32()
            let duration = try c.u32()
            try c.skip(4)
            if word >> 31 == 1 { return nil }
            let size = Int64(word & 0x7fff_ffff)
            guard size <= length - anchor else { throw c.error("a segment of \(size) bytes at offset \(anchor) lies past the file") }
            if Double(elapsed) / Double(timescale) < seconds { out.insert(ByteRange(anchor, anchor + size)) }
            anchor += size
            elapsed += UInt64(duration)
        }
        return out
    }

    public func next() -> Step {
        do {
            return try walk()
        } catch let e as MP4Error {
            return .failed(e)
        } catch {
            return .failed(.notMP4("\(error)"))
        }
    }

    private func held(_ r: ByteRange) -> Bool { have.contains(r) }

    private func missing(_ want: RangeSet) -> RangeSet {
        var out = RangeSet()
        for r in want.ranges { for g in have.missing(in: r) { out.insert(g) } }
        return out
    }

    private func walk() throws -> Step {
        let walker = MP4Walker(length: length, read: read)
        var at: Int64 = 0
        var count = 0
        var movie: MP4Movie?
        var found = Found()
        var want = RangeSet()  // everything the goal needs, as found so far
        // Fragmented files: the decode time each track has reached, and whether the mdat after
        // the last moof belongs to the first seconds.
        var reached: [UInt32: Int64] = [:]
        var takeNextMdat = false
        var indexed = false  // a sidx has listed the fragments
        while at < length {
            // A header is 8 bytes, 16 with a 64-bit size (size field 1): fetch what it takes.
            let short = ByteRange(at, at + min(8, length - at))
            if !held(short) { return .need(RangeSet([short]), .header(at: at)) }
            if short.count == 8, try read(at, 4) == [0, 0, 0, 1] {
                let long = ByteRange(at, at + min(16, length - at))
                if !held(long) { return .need(RangeSet([long]), .header(at: at)) }
            }
            if count == 0, length >= 8 {
                let first = String(decoding: try read(0, 8).map { $0 >= 32 && $0 < 127 ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
                if !Self.firstTypes.contains(String(first.suffix(4))) {
                    throw MP4Error.notMP4("its first bytes '\(first)' are not an ISO BMFF box header (ftyp, moov, mdat...)")
                }
            }
            let box = try walker.box(at: at, end: length)
            count += 1
            guard count <= Self.maxTopLevelBoxes else { throw MP4Error.tooManyBoxes }
            let whole = ByteRange(box.offset, box.end)
            switch box.type {
            case "moov" where movie == nil:
                guard box.size <= MP4Movie.maxMoovSize else {
                    throw MP4Error.malformed(type: "moov", at: box.offset, reason: "its size \(box.size) is larger than vcache reads (\(MP4Movie.maxMoovSize))")
                }
                if !held(whole) { return .need(RangeSet([whole]), .moov(box)) }
                let m = try MP4Movie(moov: box, bytes: try read(box.offset, Int(box.size)))
                movie = m
                found.moov = box
                found.fragmented = m.fragmented
                want.insert(whole)
                guard case .seconds(let seconds) = goal else { return .done(found) }
                if !m.fragmented {
                    for t in m.tracks { want.formUnion(try t.sampleRanges(before: seconds, fileLength: length)) }
                    found.neededBytes = want.count
                    let gaps = missing(want)
                    return gaps.isEmpty ? .done(found) : .need(gaps, .samples)
                }
            case "ftyp", "styp":
                want.insert(whole)
            case "sidx":
                guard movie?.fragmented == true, case .seconds(let seconds) = goal else { break }
                // The segment index, and the header after it (another sidx, or the first moof).
                if !held(whole) { return .need(RangeSet([ByteRange(box.offset, box.end + min(8, length - box.end))]), .fragment(at: box.offset)) }
                if let segments = try Self.segments(sidx: box, bytes: try read(box.offset, Int(box.size)), before: seconds, length: length) {
                    want.formUnion(segments)
                    indexed = true
                }
            case _ where indexed:
                // Every sidx read: they said which fragments the first seconds need.
                found.neededBytes = want.count
                let gaps = missing(want)
                return gaps.isEmpty ? .done(found) : .need(gaps, .fragment(at: box.offset))
            case "moof":
                guard let m = movie, case .seconds(let seconds) = goal else { break }
                if !held(whole) {
                    // The moof and the header of what follows it (its mdat), in one request.
                    return .need(RangeSet([ByteRange(box.offset, box.end + min(16, length - box.end))]), .fragment(at: box.offset))
                }
                let fragment = try MP4Fragment(moof: box, bytes: try read(box.offset, Int(box.size)), movie: m)
                var start = Double.infinity
                for run in fragment.runs {
                    guard let t = m.tracks.first(where: { $0.id == run.track }), t.timescale > 0 else { continue }
                    let base = run.baseDecodeTime ?? reached[run.track] ?? 0
                    start = min(start, (Double(base) - Double(t.mediaStart)) / Double(t.timescale) + t.delay)
                    reached[run.track] = MP4Fragment.add(base, (run.duration, false))
                }
                if start >= seconds {
                    found.neededBytes = want.count
                    let gaps = missing(want)
                    return gaps.isEmpty ? .done(found) : .need(gaps, .fragment(at: box.offset))
                }
                want.insert(whole)
                takeNextMdat = true
            case "mdat" where takeNextMdat:
                want.insert(whole)
                takeNextMdat = false
                // The fragment's media, and the next header, in one request.
                if !held(whole) { return .need(RangeSet([ByteRange(box.offset, box.end + min(16, length - box.end))]), .fragment(at: box.offset)) }
            default:
                break
            }
            at = box.end
        }
        guard movie != nil else {
            throw MP4Error.notMP4("no 'moov' box among its \(count) top-level boxes")
        }
        _ = indexed
        found.neededBytes = want.count
        let gaps = missing(want)
        return gaps.isEmpty ? .done(found) : .need(gaps, .samples)
    }
}
