/// Where a track's first seconds are: sample by sample from the sample tables (`stts` decode
/// times, `stsc` samples per chunk, `stsz`/`stz2` sizes, `stco`/`co64` chunk offsets).
extension MP4Track {
    /// More samples than this in one track is taken as a hostile file (two hours at 60 fps is 432,000).
    static let maxSamples = 5_000_000

    /// The byte ranges of every sample whose decode time, on the presentation timeline (after
    /// the edit list's start and delay), is before `seconds`. A sample decoded before the edit's
    /// start (the frames a later keyframe depends on) is included. Throws when the tables
    /// contradict each other or point outside the file.
    public func sampleRanges(before seconds: Double, fileLength: Int64) throws -> RangeSet {
        var out = RangeSet()
        guard sampleCount > 0 else { return out }
        func bad(_ type: String, _ reason: String) -> MP4Error {
            let at = tableOffsets[type] ?? tableOffsets[type == "stsz" ? "stz2" : type == "stco" ? "co64" : type] ?? -1
            return .malformed(type: type, at: at, reason: reason)
        }
        guard sampleCount <= Self.maxSamples else { throw bad("stsz", "\(sampleCount) samples in one track is more than vcache reads (\(Self.maxSamples))") }
        guard !sampleToChunk.isEmpty, sampleToChunk[0].firstChunk == 1 else { throw bad("stsc", "it does not start at chunk 1") }
        guard !chunkOffsets.isEmpty else { throw bad("stco", "the track has samples but no chunk offsets") }
        guard uniformSize != 0 || sizes.count == sampleCount else { throw bad("stsz", "it lists \(sizes.count) sizes for \(sampleCount) samples") }
        if let i = sampleToChunk.firstIndex(where: { Int($0.firstChunk) > chunkOffsets.count }) {
            throw bad("stsc", "entry \(i + 1) points at chunk \(sampleToChunk[i].firstChunk), past the chunk table (\(chunkOffsets.count) chunks)")
        }

        var sttsIndex = 0
        var sttsLeft = timeToSample.first.map { Int64($0.count) } ?? 0
        var dts: Int64 = 0
        var stscIndex = 0
        var chunk = 0  // 0-based index into chunkOffsets
        var leftInChunk = Int64(sampleToChunk[0].perChunk)
        var offset = chunkOffsets[0]
        let limit = seconds
        for sample in 0..<sampleCount {
            // The next chunk when this one is used up (some chunks may hold no sample).
            while leftInChunk == 0 {
                chunk += 1
                guard chunk < chunkOffsets.count else {
                    throw bad("stsc", "its chunks hold fewer samples than stsz lists (\(sample) of \(sampleCount)); the chunk table (stco) has \(chunkOffsets.count) entries")
                }
                // First-chunk numbers increase (checked when parsed) and lie inside the table.
                if stscIndex + 1 < sampleToChunk.count && Int(sampleToChunk[stscIndex + 1].firstChunk) - 1 == chunk {
                    stscIndex += 1
                }
                leftInChunk = Int64(sampleToChunk[stscIndex].perChunk)
                offset = chunkOffsets[chunk]
            }
            while sttsLeft == 0 {
                sttsIndex += 1
                guard sttsIndex < timeToSample.count else { throw bad("stts", "it gives decode times for fewer samples than stsz lists (\(sample) of \(sampleCount))") }
                sttsLeft = Int64(timeToSample[sttsIndex].count)
            }
            let time = (Double(dts) - Double(mediaStart)) / Double(timescale) + delay
            if time >= limit { break }  // decode times only grow: nothing later is needed
            let size = Int64(uniformSize != 0 ? uniformSize : sizes[sample])
            let (end, overflow) = offset.addingReportingOverflow(size)
            guard offset >= 0, !overflow, end <= fileLength else {
                throw bad("stco", "sample \(sample + 1) at offset \(offset) (\(size) bytes) lies outside the file (\(fileLength) bytes)")
            }
            if size > 0 { out.insert(ByteRange(offset, offset + size)) }
            offset += size
            leftInChunk -= 1
            dts &+= Int64(timeToSample[sttsIndex].delta)  // at most 5M samples of 2^32: no overflow
            sttsLeft -= 1
        }
        return out
    }
}
