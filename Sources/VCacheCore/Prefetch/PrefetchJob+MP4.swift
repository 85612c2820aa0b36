/// The MP4 side of `PrefetchJob`: once every wanted byte is held, ask `MP4Planner` what the
/// goal (the moov, or the first seconds) still needs, fetch that like any other range, and ask
/// again, until it is met.
extension PrefetchJob {
    func advanceMP4() {
        // An HLS playlist is fetched whole (it is small) and no MP4 goal applies: the run then
        // fetches the stream it names (Docs/hls.md).
        if !entry.isPlaylist, let length = entry.validators.length, let writer, let limit = manifestLimit(writer, length: length) {
            notePlaylist()
            settleMP4()
            var missing = RangeSet([ByteRange(0, length)])
            for r in writer.held.ranges { missing.remove(r) }
            guard length <= Int64(limit), !missing.isEmpty else { return complete() }
            planMP4(missing)
            return nextRequest()
        }
        guard let goal = item.mp4, !plan.mp4Settled else { return complete() }
        guard let length = entry.validators.length, let writer else {
            settleMP4()
            if case .seconds = goal { return finish(.mp4(.notMP4("the origin did not say the video's length, so its boxes cannot be walked"))) }
            return complete()
        }
        let have = writer.held, data = writer.data
        let planner = MP4Planner(goal: goal, length: length, have: have) { offset, count in try data.bytes(count, at: offset) }
        switch planner.next() {
        case .need(let ranges, let reason):
            // The planner only asks for bytes not held; asking again for held ones would loop.
            guard !have.contains(ranges) else { return finish(.mp4(.notMP4("the MP4 walk asked twice for the same bytes"))) }
            if goal == .moov, case .moov(let box) = reason {
                emit(.note(url: item.url, message: "its moov (\(Units.formatSize(box.size)) at offset \(box.offset)) lies outside the requested bytes; fetching it too so playback can start (--no-moov skips it)"))
            }
            trace("MP4 needs \(ranges) (\(reason))")
            planMP4(ranges)
            nextRequest()
        case .done:
            settleMP4()
            complete()
        case .failed(let e):
            settleMP4()
            if case .seconds = goal { return finish(.mp4(e)) }
            // A head of any other file is just a head; only a broken MP4 is worth a note.
            if case .notMP4 = e {} else { emit(.note(url: item.url, message: "no moov fetched: \(e.description)")) }
            complete()
        }
    }

    /// An HLS playlist or a DASH MPD, by its Content-Type, or its first bytes when they are held
    /// (an MPD's root start tag, with its namespace, within its first 4 KiB): the most of it
    /// vcache reads as one (8 MiB, 16 MiB); nil for neither.
    private func manifestLimit(_ writer: EntryWriter, length: Int64) -> Int? {
        let prefix = writer.held.ranges.first { $0.lowerBound == 0 }?.upperBound ?? 0
        let n = min(4096, length, prefix)
        let first = n > 0 ? (try? writer.data.bytes(Int(n), at: 0)) ?? [] : []
        if HLSPlaylist.looksLikePlaylist(firstBytes: first.prefix(16), contentType: entry.contentType) { return HLSPlaylist.maxBytes }
        if MPD.looksLikeMPD(firstBytes: first, contentType: entry.contentType) { return MPD.maxBytes }
        return nil
    }
}
