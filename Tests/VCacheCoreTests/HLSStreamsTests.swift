import Foundation
import Testing
import VCacheTestSupport
@testable import VCacheCore

/// Real streams made by ffmpeg (Tests/Fixtures/hls/make-streams.sh): every playlist parses, and
/// the whole-stream plan fetches every byte of every segment, init section and key file it made.
@Suite struct HLSStreamsTests {
    static let origin = "http://origin.test/"

    /// The script's streams in a fresh temp dir; nil (with the reason printed) when it cannot run here.
    static func makeStreams() throws -> TempDirectory {
        let dir = TempDirectory("vcache-hls")
        try Fixtures.makeStreams(into: dir.path)
        return dir
    }

    /// Every file under `dir`, relative to it.
    static func files(_ dir: String) -> [String] {
        (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: dir + "/" + $0, isDirectory: &isDir) && !isDir.boolValue
        }.sorted()
    }

    @Test(.requires(.streamTools)) func everyPlaylistParsesAndTheWholePlanCoversEveryFile() throws {
        let dir = try Self.makeStreams()
        let all = Self.files(dir.path)
        var playlists: [String: HLSPlaylist] = [:]
        for name in all where name.hasSuffix(".m3u8") {
            playlists[Self.origin + name] = try HLSPlaylist.parse(try Data(contentsOf: URL(fileURLWithPath: dir.file(name))), url: Self.origin + name)
        }
        #expect(playlists.count == 9, "\(playlists.keys.sorted())")

        // Masters name only playlists that exist; media playlists are planned whole.
        var covered: [String: RangeSet] = [:]
        var whole = Set<String>()
        for (url, playlist) in playlists {
            let needed = try HLSPlan(variant: .all).playlists(for: playlist).urls
            for u in needed where u != url { #expect(playlists[u] != nil, "\(url) names \(u)") }
            guard case .media(let media) = playlist else { continue }
            let fetch = HLSPlan().fetches(for: media)
            #expect(!fetch.isLive && fetch.isWholePlaylist && fetch.unfetchableKeys.isEmpty, "\(url)")
            for r in fetch.requests {
                let name = String(r.url.dropFirst(Self.origin.count))
                if let range = r.range { covered[name, default: RangeSet()].insert(range) } else { whole.insert(name) }
            }
        }
        let media = all.filter { ["ts", "m4s", "mp4", "key"].contains(($0 as NSString).pathExtension) }
        #expect(media.count == 19, "\(media)")
        for name in media {
            let size = Int64((try FileManager.default.attributesOfItem(atPath: dir.file(name))[.size] as? Int) ?? -1)
            #expect(whole.contains(name) || covered[name]?.ranges == [ByteRange(0, size)], "\(name): \(covered[name]?.description ?? "not fetched")")
            // Clear segments look like segments; AES-128 ones are ciphertext.
            if !name.hasPrefix("aes/"), !name.hasSuffix(".key") {
                let head = try FileHandle(forReadingFrom: URL(fileURLWithPath: dir.file(name))).readData(ofLength: 512)
                #expect(HLSSegmentCheck.looksLikeSegment(firstBytes: head), "\(name)")
            }
        }
        #expect(Set(covered.keys).union(whole).isSubset(of: Set(media)))
    }

    @Test(.requires(.streamTools)) func theStreamsReadAsFFmpegWroteThem() throws {
        let dir = try Self.makeStreams()
        func parse(_ name: String) throws -> HLSPlaylist {
            try HLSPlaylist.parse(try Data(contentsOf: URL(fileURLWithPath: dir.file(name))), url: Self.origin + name)
        }
        // The implicit-offset copy reads as the explicit one (RFC 8216 §4.3.2.2).
        guard case .media(let explicit) = try parse("br/index.m3u8"), case .media(let implicit) = try parse("br/implicit.m3u8") else {
            Issue.record("br playlists are not media playlists")
            return
        }
        #expect(implicit.segments.map(\.byteRange) == explicit.segments.map(\.byteRange))
        #expect(explicit.segments.count == 2 && HLSPlan().fetches(for: explicit).requests.count == 1)
        // The master: best is the 180p variant with the DEFAULT=YES English audio.
        let best = try HLSPlan().playlists(for: try parse("abr/master.m3u8"))
        #expect(best.urls == [Self.origin + "abr/180p/index.m3u8", Self.origin + "abr/audio/index.m3u8"])
        #expect(best.variants.first?.resolution == HLSMasterPlaylist.Resolution(width: 320, height: 180))
        #expect(try HLSPlan(variant: .worst, audio: "en").playlists(for: try parse("abr/master.m3u8")).urls.first == Self.origin + "abr/90p/index.m3u8")
        // --seconds 2 per rendition: one 2 s video segment; audio needs two (2.005333 s is not 2.000000 short).
        guard case .media(let video) = try parse("abr/180p/index.m3u8"), case .media(let audio) = try parse("abr/audio/index.m3u8") else { return }
        #expect(HLSPlan(seconds: 2).fetches(for: video).segments.count == 1)
        #expect(HLSPlan(seconds: 3).fetches(for: audio).segments.map(\.rawURI) == ["seg_000.m4s", "seg_001.m4s"])
        // The AES stream: one key, fetched once, with ffmpeg's explicit IV.
        guard case .media(let aes) = try parse("aes/index.m3u8") else { return }
        let fetch = HLSPlan().fetches(for: aes)
        #expect(fetch.keys.count == 1 && fetch.keys.first?.uri == Self.origin + "aes/enc.key" && fetch.keys.first?.iv != nil)
        #expect(fetch.requests.first == HLSPlan.Request(url: Self.origin + "aes/enc.key"))
    }
}
