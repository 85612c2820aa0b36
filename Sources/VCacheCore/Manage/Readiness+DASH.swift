#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Readiness {
    /// For a cached DASH MPD: whether what `vcache prefetch URL --seconds N` (or, without
    /// seconds, the whole presentation) would fetch is all cached, read from the cached MPD alone
    /// (no network): the chosen Representations' init segments and the segments (or, for a
    /// SegmentBase file, its init, sidx and the subsegments the cached sidx gives) that reach N
    /// seconds. Nil when `entry` is not a complete MPD. A dynamic MPD is read as of now.
    /// `allowedHosts`: prefetch's `--allow-host`, as for HLS (`ofStream`).
    public static func ofDASHStream(_ item: PrefetchItem, entry: CacheEntry, store: CacheStore, plan: HLSPlan, keyRules: CacheKeyRules,
                                    allowedHosts: AllowedOrigins = AllowedOrigins()) -> Readiness? {
        guard entry.isComplete, let head = store.cachedBytes(of: entry, count: 4096),
              MPD.looksLikeMPD(firstBytes: head, contentType: entry.contentType) else { return nil }
        let (seconds, notForAStream) = streamSeconds(item, format: "a DASH MPD", whole: "the whole presentation")
        if let notForAStream { return notForAStream }
        guard let mpd = store.cachedMPD(entry)?.mpd else { return .missing(bytes: nil, why: "its MPD \(entry.latestURL) cannot be read from the cache") }
        let chosen: [DASHPlan.Chosen]
        do {
            chosen = try DASHPlan(variant: plan.variant, audio: plan.audio, seconds: seconds).choose(mpd)
        } catch {
            return .missing(bytes: nil, why: "\(error)")
        }
        let answered = ((try? store.catalog.finalURL(of: entry.key)) ?? nil) ?? entry.latestURL
        let own = Set([item.url, answered].compactMap { OriginTarget.of($0)?.host })
        let live = mpd.isDynamic ? DASHLiveClock(now: Date().timeIntervalSince1970) : nil
        // Counted as `info` counts a stream's members: entries (a byte-range file once), the MPD too.
        var needed: Set<CacheKey> = [entry.key], notCached = Set<CacheKey>()
        var notCachedURLs: [CacheKey: String] = [:]
        var missingBytes: Int64? = 0
        func cachedEntry(_ url: String) -> CacheEntry? { (try? store.catalog.entry(key: keyRules.key(for: url))) ?? nil }
        func need(_ url: String, _ span: MPD.ByteSpan?) {
            let key = keyRules.key(for: url)
            needed.insert(key)
            let have = cachedEntry(url)
            if let span {
                let range = ByteRange(span.first, span.last + 1)
                let held = have?.ranges.coverage(of: range) ?? 0
                guard held < range.count else { return }
                missingBytes = missingBytes.map { Checked.saturatingAdd($0, range.count - held) }
            } else {
                guard have?.isComplete != true else { return }
                if let have, let length = have.length { missingBytes = missingBytes.map { Checked.saturatingAdd($0, length - have.cachedBytes) } } else { missingBytes = nil }
            }
            notCached.insert(key)
            notCachedURLs[key] = url
        }
        for c in chosen {
            let period = mpd.periods[c.period]
            let until = seconds.map { max(0, $0 - period.start) }
            let planned: DASHSegmentPlan
            do {
                planned = try c.representation.plan(periodDuration: period.duration, until: until, live: live.map { ($0, mpd, period.start) })
            } catch {
                return .missing(bytes: nil, why: "\(error)")
            }
            if let i = planned.initialization { need(i.url, i.range) }
            if let index = planned.index, let span = index.range, case .base(let b) = c.representation.segments {
                guard seconds != nil else {
                    need(index.url, nil)  // the whole presentation: the whole file
                    continue
                }
                need(index.url, span)
                // The subsegments the cached sidx names; without it, what they are is not known.
                guard let e = cachedEntry(index.url), e.ranges.contains(ByteRange(span.first, span.last + 1)),
                      let bytes = store.cachedBytes(of: e, at: span.first, count: span.count),
                      let subs = try? DASHSidx.subsegments(bytes, indexRange: span, url: index.url, presentationTimeOffset: b.presentationTimeOffset, timescale: b.timescale) else {
                    missingBytes = nil
                    continue
                }
                for s in subs where until.map({ s.start < $0 }) ?? true { need(s.url, s.range) }
                continue
            }
            for s in planned.segments { need(s.url, s.range) }
        }
        guard !notCached.isEmpty else { return .ready }
        let goal = seconds.map { "its first \(Units.formatDuration($0))" } ?? "the whole presentation"
        var why = "\(notCached.count) of the \(needed.count) entries (the MPD, init segments and segments) of \(goal) are not cached"
        let refused = notCachedURLs.values.compactMap { OriginTarget.of($0) }.filter { !own.contains($0.host) && !allowedHosts.allows($0) }
        if !refused.isEmpty {
            let hosts = Set(refused.map { $0.host.contains(":") ? "[\($0.host)]" : $0.host }).sorted()
            let (n, them) = (refused.count, refused.count == 1 ? "it" : "them")
            why += "; \(n) of them \(n == 1 ? "is" : "are") on \(hosts.joined(separator: ", ")), not the stream's own "
                + "\(own.count == 1 ? "host" : "hosts"): prefetch refuses \(them) unless "
                + hosts.map { "--allow-host \($0)" }.joined(separator: " ") + " allows \(them)"
        }
        return .missing(bytes: missingBytes, why: why)
    }
}
