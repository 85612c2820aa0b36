#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The members serve records for an MPD of very many segments (Docs/dash.md, "limits"): its
/// template segments one at a time, when a player asks for each, not a million rows on its
/// first answer.
extension Proxy {
    /// More segments than this in all of an MPD's Representations: its template segments are
    /// recorded as stream members one at a time, when serve stores one, not all when the MPD is
    /// first answered (999,990 member rows: 213 s before the first answer, a 312 MB catalog,
    /// `ls` 21 s; Docs/dash.md, "limits").
    static let eagerMembers = 10_000

    /// Which of `mpd`'s Representations have their segments recorded when stored (`lazyMember`):
    /// when it names more than `eagerMembers` segments, those of a SegmentTemplate whose URL a
    /// segment's name can be read back from (`DASHTemplate.values(namedBy:)`). Remembered per
    /// root for this process (learnt again from each answer of the MPD).
    func learnTemplates(_ mpd: MPD, root: CacheKey, segments: Int) {
        var lazy: [LazyTemplate] = []
        if segments > Self.eagerMembers {
            for (_, _, rep) in mpd.representations {
                guard let t = Self.readableTemplate(rep), let media = t.media else { continue }
                lazy.append(LazyTemplate(media: media, base: t.mediaBase, id: rep.id, bandwidth: rep.bandwidth))
            }
        }
        lazyTemplates.withLock { l in
            if lazy.isEmpty { l[root] = nil; return }
            if l.count >= 64 && l[root] == nil { l.removeAll() }
            l[root] = lazy
        }
    }

    /// The Representation's SegmentTemplate when a segment's URL can be read back to its number or time.
    static func readableTemplate(_ rep: MPD.Representation) -> MPD.SegmentTemplate? {
        guard case .template(let t) = rep.segments, let media = t.media,
              media.values(namedBy: [], representationID: rep.id, bandwidth: rep.bandwidth) != nil else { return nil }
        return t
    }

    /// Records `url` (its key `key`) as a segment of the MPD stream whose template names it
    /// (`learnTemplates`), when it is no member yet: before it is opened, so it is checked as a
    /// member before it is stored and joins the stream (one unit to `evict` and the cap).
    func lazyMember(_ url: String, key: CacheKey) {
        let all = lazyTemplates.withLock { $0 }
        guard !all.isEmpty else { return }
        let name: Set<String> = [CachedURLIndex.lastName(url)], rules = readThrough.options.keyRules
        for (root, templates) in all {
            for t in templates {
                guard let (id, values) = t.media.values(namedBy: name, representationID: t.id, bandwidth: t.bandwidth), let v = values.first else { continue }
                let path = t.media.substitute(representationID: t.id, bandwidth: t.bandwidth, number: id == .number ? v : nil, time: id == .time ? v : nil)
                guard rules.key(for: HLSURI.resolve(path, against: t.base)) == key else { continue }
                if !isMember(key) { _ = try? readThrough.store.catalog.recordStream(root: root, format: "dash", members: [.init(key: key, role: .segment)]) }
                return
            }
        }
    }
}

extension Proxy {
    /// The keys of cached entries that `mpd`'s readable templates (`readableTemplate`) name,
    /// found by the cached URLs' last names (one catalog query; `DASHTemplate.values(namedBy:)`,
    /// as `ls` counts them): what a large MPD named that serve may not have recorded
    /// (`lazyMember`), for a re-encode to drop (hostile probe h9d, F8).
    func cachedTemplateSegments(of mpd: MPD) -> [CacheKey] {
        let reps = mpd.representations.compactMap { _, _, rep in Self.readableTemplate(rep).map { (rep, $0) } }
        guard !reps.isEmpty, let urls = try? readThrough.store.catalog.allURLs() else { return [] }
        let names = Set(urls.map(CachedURLIndex.lastName)), rules = readThrough.options.keyRules
        var out: [CacheKey] = []
        for (rep, t) in reps {
            guard let media = t.media, let (id, values) = media.values(namedBy: names, representationID: rep.id, bandwidth: rep.bandwidth) else { continue }
            for v in values {
                let path = media.substitute(representationID: rep.id, bandwidth: rep.bandwidth, number: id == .number ? v : nil, time: id == .time ? v : nil)
                out.append(rules.key(for: HLSURI.resolve(path, against: t.mediaBase)))
            }
        }
        return out
    }
}

/// A template Representation of a large MPD whose segments serve records when it stores them.
struct LazyTemplate: Sendable {
    let media: DASHTemplate
    let base: String
    let id: String
    let bandwidth: Int64
}
