#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Readiness {
    /// What of a stream `item` asks for: `--seconds N` (its N), or neither (nil: all of it).
    /// `--bytes`, `--range` and `--moov` are of a file, refused for a stream with one reason.
    static func streamSeconds(_ item: PrefetchItem, format: String, whole: String) -> (seconds: Double?, refused: Readiness?) {
        if case .seconds(let s)? = item.mp4 { return (s, nil) }
        if item.mp4 == .moov || item.requests.contains(where: { $0 != .whole }) {
            return (nil, .missing(bytes: nil, why: "\(format): --bytes and --range do not apply to a stream; give --seconds N, or neither for \(whole)"))
        }
        return (nil, nil)
    }

    /// For a cached HLS playlist: whether what `vcache prefetch URL --seconds N` (or, without
    /// seconds, the whole stream) would fetch is all cached, read from the cached playlists alone
    /// (no network): the chosen variant's media playlists, renditions, init sections, keys and the
    /// segments (or byte ranges) that reach N seconds. `plan` gives the variant and audio choice.
    /// Nil when `entry` is not a complete playlist.
    /// `allowedHosts`: prefetch's `--allow-host`. A member not cached whose host is none of the
    /// stream's own (where its playlists came from) nor allowed is one prefetch refuses: said as
    /// such, since no wait brings it.
    public static func ofStream(_ item: PrefetchItem, entry: CacheEntry, store: CacheStore, plan: HLSPlan, keyRules: CacheKeyRules,
                                allowedHosts: AllowedOrigins = AllowedOrigins()) -> Readiness? {
        guard entry.isComplete, let head = store.cachedBytes(of: entry, count: 16),
              HLSPlaylist.looksLikePlaylist(firstBytes: head, contentType: entry.contentType) else { return nil }
        let (seconds, notForAStream) = streamSeconds(item, format: "an HLS playlist", whole: "the whole stream")
        if let notForAStream { return notForAStream }
        // A master marked to be asked for again (`StreamRole.manifestToAsk`) is what prefetch
        // would ask the origin about: not ready, whatever its members say (as `ls` says partial).
        if ((try? store.catalog.streamRole(ofRoot: entry.key)) ?? nil) == .manifestToAsk {
            return .missing(bytes: nil, why: "a media playlist of its stream changed on the origin, was evicted or dropped by 'verify --fix': prefetch asks for the master again before the stream is cached whole")
        }
        var plan = plan
        plan.seconds = seconds
        // Counted as `info` counts a stream's members: entries (a byte-range file once), the root too.
        var needed: Set<CacheKey> = [entry.key], notCached = Set<CacheKey>()
        // The stream's own hosts (as prefetch counts them): the URL asked for, and where each of
        // its playlists was answered from (after redirects, as the catalog recorded it).
        var own = Set([item.url].compactMap { OriginTarget.of($0)?.host })
        var notCachedURLs: [CacheKey: String] = [:]
        var missingBytes: Int64? = 0
        var problem: String?
        func cachedEntry(_ url: String) -> CacheEntry? { (try? store.catalog.entry(key: keyRules.key(for: url))) ?? nil }
        func visit(_ e: CacheEntry, depth: Int) {
            guard problem == nil else { return }
            guard depth < 4, let playlist = store.cachedPlaylist(e, keyRules: keyRules, complete: false)?.playlist else {
                problem = "its playlist \(e.latestURL) cannot be read from the cache"
                return
            }
            let answered = ((try? store.catalog.finalURL(of: e.key)) ?? nil) ?? e.latestURL
            if let host = OriginTarget.of(answered)?.host { own.insert(host) }
            switch playlist {
            case .master:
                do {
                    for url in try plan.playlists(for: playlist).urls {
                        let key = keyRules.key(for: url)
                        needed.insert(key)
                        guard let child = cachedEntry(url), child.isComplete else {
                            notCached.insert(key)
                            notCachedURLs[key] = url
                            missingBytes = nil  // a playlist not cached: what it lists is not known
                            continue
                        }
                        visit(child, depth: depth + 1)
                    }
                } catch {
                    problem = "\(error)"
                }
            case .media(let media):
                for q in plan.fetches(for: media).requests {
                    let key = keyRules.key(for: q.url)
                    needed.insert(key)
                    let have = cachedEntry(q.url)
                    if let range = q.range {
                        let held = have?.ranges.coverage(of: range) ?? 0
                        if held < range.count {
                            notCached.insert(key)
                            notCachedURLs[key] = q.url
                            missingBytes = missingBytes.map { Checked.saturatingAdd($0, range.count - held) }
                        }
                    } else if have?.isComplete != true {
                        notCached.insert(key)
                        notCachedURLs[key] = q.url
                        if let have, let length = have.length { missingBytes = missingBytes.map { Checked.saturatingAdd($0, length - have.cachedBytes) } } else { missingBytes = nil }
                    }
                }
            }
        }
        visit(entry, depth: 0)
        if let problem { return .missing(bytes: nil, why: problem) }
        guard !notCached.isEmpty else { return .ready }
        let goal = seconds.map { "its first \(Units.formatDuration($0))" } ?? "the whole stream"
        var why = "\(notCached.count) of the \(needed.count) playlists, segments, init sections and keys of \(goal) are not cached"
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
