/// Several connections for one entry (`--connections N`, `PrefetchOptions.connections`): once the
/// job's own response has established the version (a strong validator and the length), the
/// missing bytes are cut into pieces (`ConnectionSplit`); the job's transfer keeps the first and
/// stops at its end, and a `RangeLane` fetches each other piece into the same `data`. The
/// checkpoints, the cap, the deadline and the response rules are the job's; the job's plan
/// leaves the lanes' bytes to them, and waits for them before it completes the entry (whose
/// SHA-256 is then read back where the bytes did not arrive in order: `Checkpointer`).
/// A lane that gives up hands its bytes back to the job's own transfer; one that meets another
/// version ends every lane and the job drops the version, as one connection would.
extension PrefetchJob {
    /// The job's extra connections, and what it decided about them in this run.
    struct Connections {
        var lanes: [RangeLane] = []
        /// The job's own transfer waits for the lanes: nothing is left that no lane holds.
        var waiting = false
        /// No more splitting in this run: the version has no strong validator (said once), a
        /// lane gave up (the origin ignores ranges, refuses or fails them), or a lane met another
        /// version.
        var refused = false
        var weakNoted = false

        /// The bytes the lanes are to fetch (not for the job's own transfer).
        var reserved: RangeSet {
            var all = RangeSet()
            for lane in lanes { all.formUnion(lane.remaining) }
            return all
        }
    }

    /// Lanes may write now (not while a version is dropped, the entry completes or the job ended).
    var acceptsLaneBytes: Bool {
        switch phase {
        case .fetching, .idle: true
        default: false
        }
    }

    /// Splits what is still missing across connections, once the response in `x` is accepted
    /// (its body goes at `x.offset`) under `v`: the job's transfer is limited to the first piece,
    /// a lane started for each other one. Nothing when splitting is not worth it or not allowed.
    func splitAcrossConnections(_ x: inout Exchange, validators v: Validators) {
        guard options.connections > 1, connections.lanes.isEmpty, !connections.refused, options.sharedLock == nil,
              !x.closeDelimited, let length = v.length, let writer else { return }
        // A manifest is read as one and stopped past its limit by the job's own transfer: never split.
        let type = entry.contentType
        guard !HLSPlaylist.looksLikePlaylist(firstBytes: [UInt8](), contentType: type),
              !MPD.looksLikeMPD(firstBytes: [], contentType: type) else { return }
        let missing = plan.missing(length: length, held: writer.held, stop: stopPoint)
        let pieces = ConnectionSplit.pieces(missing, connections: options.connections)
        guard pieces.count > 1, let first = pieces[0].ranges.first, first.lowerBound == x.offset else { return }
        guard v.hasStrongValidator else {
            if refuseConnections(noting: true) {
                emit(.note(url: item.url, message: "the origin gives no strong validator (its ETag is weak, or it sends neither ETag nor Last-Modified), so pieces fetched apart cannot be proven one version: fetched over one connection, not \(options.connections)"))
            }
            return
        }
        x.limit = min(x.limit ?? .max, first.upperBound)
        trace("split over \(pieces.count) connections: " + pieces.map { $0.ranges.map(\.httpSpec).joined(separator: ",") }.joined(separator: " | "))
        for (i, piece) in pieces.enumerated().dropFirst() {
            let lane = RangeLane(job: self, number: i, piece: piece)
            addLane(lane)
            // Started on the loop's next turn: this may be a libcurl callback, where no handle can be added.
            fetcher.after(0) { lane.send() }
        }
    }

    /// A lane's transfer may not go on until the commits caught up (the job's own back-pressure).
    func laneShouldWait() -> Bool {
        guard overCommitted else { return false }
        checkpoint(wait: false)
        return overCommitted
    }

    /// A lane wrote its piece (`gaveUp` nil), or gives the rest of it back: the job's own
    /// transfer fetches it, and no piece is split off again in this run.
    func laneEnded(_ lane: RangeLane, gaveUp: PrefetchError?) {
        removeLane(lane)
        if gaveUp != nil { refuseConnections(noting: false) }
        if connections.waiting, gaveUp != nil || connections.lanes.isEmpty, stopWaitingForLanes() { nextRequest() }
    }

    /// A lane's response was of another version: every connection stops, and the job drops the
    /// version as it does when its own response shows one (three changes in a run give up).
    /// Nothing is split again in this run: an origin whose servers disagree on the validators
    /// (a load balancer over backends deployed apart: nginx's mtime-size ETags differ) would show
    /// another version to every new connection, and fail a video one connection fetches whole.
    func laneFoundAnotherVersion(_ v: Validators, reason: String) {
        guard !isFinished else { return }
        detachLanes()
        refuseConnections(noting: false)
        switch phase {
        case .fetching(let x):
            fetcher.cancel(x.transfer)
            enter(.idle)
        case .idle:
            break
        default:
            return  // already dropping, or completing
        }
        if let e = versionChangeRefused(reason) { return finish(e) }
        dropVersion(to: v, reason: reason, interrupting: nil, then: .nextRequest)
    }

    /// Lets held lanes go on (the commits caught up).
    func releaseLanes() {
        for lane in connections.lanes { lane.release() }
    }
}
