import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Two MPDs naming the same segment URLs (hostile probe h3, F5): one found changed drops the
/// shared members and fetches them from the new version; the other's cached copy, which may name
/// the old version, goes too, so that stream is never complete again under its old MPD.
@Suite struct SharedMembersRevalidationTests {
    let dir = TempDirectory("vcache-sharedreval")
    typealias R = DASHRevalidationTests

    /// `R.mpd` without its audio: its video's segment URLs only.
    static func videoOnly(width: Int) -> Data {
        let full = String(decoding: R.mpd(width: width), as: UTF8.self)
        let audio = full.range(of: "    <AdaptationSet contentType=\"audio\"")!.lowerBound
        let end = full.range(of: "</AdaptationSet>\n", range: audio..<full.endIndex)!.upperBound
        return Data((String(full[..<audio]) + String(full[end...])).utf8)
    }

    @Test
    func anMPDChangedDropsTheCachedCopyOfAnotherMPDNamingTheSameSegments() throws {
        let origin = try TestOrigin()
        func serve(seed: UInt8, width: Int) -> [String: Data] {
            let bytes = R.encode(origin, seed: seed)
            origin.setResource("/s/one.mpd", .init(body: R.mpd(width: width), etag: "\"one\(seed)\"", contentType: R.dashXML))
            origin.setResource("/s/two.mpd", .init(body: Self.videoOnly(width: width), etag: "\"two\(seed)\"", contentType: R.dashXML))
            return bytes
        }
        _ = serve(seed: 1, width: 320)
        let cache = dir.file("c")
        let (one, two) = (origin.url("/s/one.mpd"), origin.url("/s/two.mpd"))
        // two.mpd (the video) complete; one.mpd (the same video, and audio) partial.
        #expect(try VCacheBinary.run(["prefetch", "-q", two], cacheDir: cache).status == 0)
        #expect(try VCacheBinary.run(["prefetch", "-q", "--seconds", "2", one], cacheDir: cache).status == 0)
        #expect(try CacheInspector(directory: cache).entry(two)?.isComplete == true)
        // The origin re-encodes in place; the partial stream's run finds its MPD changed.
        let new = serve(seed: 7, width: 640)
        let r = try VCacheBinary.run(["prefetch", one], cacheDir: cache)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: \(one): its manifest changed on the origin, and \(two) names members of its old version too: that manifest's cached copy was dropped, so its next run drops what it named and fetches it again\n"), "\(r.stderr)")
        #expect(try R.cachedDigests(cache, origin, Array(new.keys)) == new.mapValues { TestBytes.sha256($0) })
        // The other MPD is no longer cached whole: nothing exports it under the old copy.
        #expect(try CacheInspector(directory: cache).entry(two)?.isComplete != true)
        let export = try VCacheBinary.run(["export", two, dir.file("out")], cacheDir: cache)
        #expect(export.status != 0, "\(export.stderr)")
        // Its next run fetches it again; every member it names is the new encode's.
        let again = try VCacheBinary.run(["prefetch", "-q", two], cacheDir: cache)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try CacheInspector(directory: cache).entry(two)?.validators.etag == "\"two7\"")
        let video = new.filter { $0.key.hasPrefix("/s/v/") }
        #expect(try R.cachedDigests(cache, origin, Array(video.keys)) == video.mapValues { TestBytes.sha256($0) })
        #expect(try VCacheBinary.run(["verify"], cacheDir: cache).status == 0)
    }
}
