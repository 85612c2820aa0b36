// libFuzzer target (issue 32): past the parsers. Values a parser accepted (a Retry-After, a
// Content-Range, a playlist's target duration, byte ranges and segment durations, an MP4's
// duration and box sizes, sizes and durations from options) fed through the decisions and the
// formatting that use them: RetryPolicy and the reporter's durations, LivePlaylists' freshness,
// the HLS plan for --seconds, Readiness (check's missing bytes, info's playable seconds),
// MP4Facts (info), ItemFit (the cap), RangeRequest, Units and Checked. Built by `make fuzz-build`
// against VCacheCore. Properties: no trap anywhere (the class of issue 32), a delay inside
// [0, maxDelay], a freshness inside [0, 1 h], sums that saturate instead of wrapping.
// Input: text lines (see FuzzInput); line 0 a Retry-After, 1 a Content-Range, 2 a duration, 3 a
// size; lines 4 on a playlist; the raw bytes an MP4.
import Foundation
@testable import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecisions(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    let anyDouble = Double(bitPattern: UInt64(bitPattern: input.number(20, in: .min ... .max)))
    let anyLength = input.number(21, in: 0 ... .max)

    // Retry-After and the retry decision, with the header's value and with any Double at all.
    let head = ResponseHead(status: 503, reason: "Busy", headers: [("Retry-After", input.line(0)), ("Content-Range", input.line(1))],
                            effectiveURL: "http://o/v.mp4")
    if let after = head.retryAfter { precondition(after.isFinite && after >= 0, "Retry-After \(after) from '\(input.line(0))'") }
    let policy = RetryPolicy(retries: Int(input.number(22, in: 0...20)), baseDelay: Double(input.number(23, in: 0...600_000)) / 1000)
    let failure = PrefetchError.http(status: 503, reason: "Busy")
    for after in [head.retryAfter, anyDouble, .nan, .infinity, -.infinity, 1e308] {
        let ended = RetryPolicy.Ended(failure: failure, bytes: input.number(24, in: .min ... .max), retryAfter: after, moreWanted: true)
        let count = RetryPolicy.Count(attempt: Int(input.number(25, in: 0...64)), fruitless: 0, versionChanges: 0)
        if case .retry(_, _, let delay) = policy.decide(ended, after: count, jitter: 1.2).0 {
            precondition(delay.isFinite && delay >= 0 && delay <= policy.maxDelay, "delay \(delay) for Retry-After \(String(describing: after))")
            _ = Units.formatDuration(delay)
        }
    }
    if let r = head.contentRange {
        precondition(r.first <= r.last && r.last < .max)
        _ = ByteRange(r.first, r.last + 1)
    }

    // The reporter's figures: any duration, any size.
    _ = Units.formatDuration(anyDouble)
    _ = Units.formatSize(input.number(26, in: .min ... .max))
    if let d = Units.parseDuration(input.line(2)) { _ = Units.formatDuration(d) }

    // A live playlist's cached copy: fresh for half its target duration, at most an hour.
    for target in [anyDouble, Double(input.line(2)) ?? 0] where target > 0 {
        let fresh = LivePlaylists.freshness(targetDuration: target)
        precondition(fresh >= .zero && fresh <= .milliseconds(LivePlaylists.maxFreshnessMilliseconds), "\(fresh) for \(target)")
    }

    // A dynamic MPD's cached copy: fresh for its minimumUpdatePeriod, at most an hour; never kept
    // for a period that is NaN, zero, negative or under a millisecond.
    for period in [anyDouble, Double(input.line(2)) ?? 0, 1e-300, 0.0009, 0.001] {
        let fresh = LivePlaylists.freshness(minimumUpdatePeriod: period)
        precondition(fresh.map { $0 > .zero && $0 <= .milliseconds(LivePlaylists.maxFreshnessMilliseconds) } ?? !(period >= 0.001), "\(String(describing: fresh)) for \(period)")
    }

    // The cap: ItemFit over lengths an origin announced.
    let sizes: [Int64?] = (27..<31).map { i in i == 29 ? nil : input.number(i, in: 0 ... .max) }
    let limit = Units.parseSize(input.line(3)) ?? input.number(31, in: 0 ... .max)
    switch ItemFit.verdict(sizes, fixed: input.number(32, in: 0 ... .max), perPart: 4096, limit: limit) {
    case .neverFits(let needs): precondition(needs > limit)
    case .fits, .undecided: break
    }

    // Checked agrees with the wide arithmetic.
    let a = input.number(33, in: .min ... .max), b = input.number(34, in: .min ... .max)
    let wide = a.multipliedFullWidth(by: b)
    let fits = (wide.high == 0 && Int64(bitPattern: wide.low) >= 0) || (wide.high == -1 && Int64(bitPattern: wide.low) < 0)
    precondition((Checked.multiply(a, b) != nil) == fits)
    _ = Checked.saturatingSum([a, b, anyLength])
    if let i = Checked.int64(anyDouble) { precondition(Double(i) == anyDouble.rounded(.towardZero) || abs(anyDouble) >= 9.2e18) }

    // check's missing bytes: an entry of an origin's length with some bytes held, and the
    // requests a command line can make.
    var ranges = RangeSet()
    let heldEnd = min(anyLength, input.number(35, in: 0 ... .max))
    if heldEnd > 0 { ranges.insert(ByteRange(0, heldEnd)) }
    let requests: [RangeRequest] = [.whole, .head(input.number(36, in: 1 ... .max)), .suffix(input.number(37, in: 1 ... .max)),
                                    RangeRequest(httpSpec: input.line(1)) ?? .span(first: 0, last: .max - 1)]
    let entry = CacheEntry(key: CacheKey(stored: "k"), url: "http://o/v.mp4", latestURL: "http://o/v.mp4", length: anyLength, etag: nil, lastModified: nil,
                           contentType: "video/mp4", created: Date(), lastUsed: Date(), completed: nil, sha256: nil, pinned: false,
                           cachedBytes: heldEnd, diskBytes: heldEnd, ranges: ranges)
    let zeros: MP4Walker.Read = { _, count in [UInt8](repeating: 0, count: max(0, min(count, 1 << 16))) }
    if case .missing(let bytes?, _) = Readiness.of(PrefetchItem(url: entry.url, requests: requests), entry: entry, read: zeros) {
        precondition(bytes >= 0)
    }

    // The HLS plan for --seconds N over the playlist in lines 4 on.
    let text = input.lines.dropFirst(4).joined(separator: "\n")
    if case .media(let media)? = try? HLSPlaylist.parse(text: text, url: "http://o/s/p.m3u8") {
        let seconds = Units.parseDuration(input.line(2)) ?? abs(anyDouble)
        let fetch = HLSPlan(seconds: seconds.isFinite ? seconds : nil).fetches(for: media)
        _ = Checked.saturatingSum(fetch.requests.compactMap { $0.range?.count })
        if let target = media.targetDuration { _ = LivePlaylists.freshness(targetDuration: target) }
        for s in media.segments { _ = Units.formatDuration(s.duration) }
    }

    // info's facts over the raw bytes as an MP4, and its playable seconds.
    let bytes = input.bytes
    let length = Int64(bytes.count)
    let read: MP4Walker.Read = { offset, count in
        guard offset >= 0, count >= 0, offset <= length, Int64(count) <= length - offset else { throw MP4Error.truncatedHeader(at: offset) }
        return Array(bytes[Int(offset)..<Int(offset) + count])
    }
    let facts = MP4Facts.inspect(length: length, have: RangeSet([ByteRange(0, length)]), read: read)
    if let d = facts.duration {
        _ = Units.formatDuration(d)
        var partial = entry
        partial.length = length
        partial.ranges = RangeSet(length > 1 ? [ByteRange(0, length / 2)] : [])
        _ = Readiness.playableSeconds(partial, duration: d, read: read)
    }
    for t in facts.tracks { precondition(t.bitrate >= 0) }
    return 0
}
