import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// `--seconds N` against real MP4s on a real nginx, with ffprobe as the oracle of where each
/// packet's bytes are.
@Suite struct MP4PrefetchTests {
    struct Packet { var pts: Double; var pos: Int64; var size: Int64 }

    /// Every packet of `file` with its presentation time, file position and size (ffprobe).
    static func packets(_ file: String) throws -> [Packet] {
        let data = try Tool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=pts_time,pos,size", "-of", "compact=p=0", file]).out
        var packets: [Packet] = []
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            var fields: [String: String] = [:]
            for kv in line.split(separator: "|") {
                let parts = kv.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { fields[parts[0]] = parts[1] }
            }
            guard let pts = fields["pts_time"].flatMap(Double.init), let pos = fields["pos"].flatMap(Int64.init),
                  let size = fields["size"].flatMap(Int64.init) else { continue }
            packets.append(Packet(pts: pts, pos: pos, size: size))
        }
        return packets
    }

    /// The top-level `moov` of a file, read directly.
    static func moov(_ body: Data) throws -> ByteRange {
        let walker = MP4Walker(bytes: [UInt8](body))
        let box = try #require(try walker.topLevel().first { $0.type == "moov" })
        return ByteRange(box.offset, box.end)
    }

    @Test(arguments: ["moov-at-end.mp4", "moov-at-front.mp4", "fragmented.mp4", "sidx.mp4", "video-only.mp4", "quicktime.mov", "editlist.mp4"])
    func everyPacketOfTheFirstSecondsIsCachedAndLittleElse(fixture: String) throws {
        let seconds = 2.0
        let nginx = try Nginx()
        let body = try Fixtures.data(fixture)
        let url = try nginx.publish(fixture, body)
        let cache = try TestCache()
        let r = Prefetcher(store: cache.store, options: TestCache.fastOptions()).run([.seconds(url, seconds)])[0]
        #expect(r.error == nil)
        let entry = try #require(try cache.inspector.entry(url))
        let moov = try Self.moov(body)
        #expect(entry.ranges.contains(moov), "moov \(moov) not cached: \(entry.ranges)")
        let needed = try Self.packets(Fixtures.path(fixture)).filter { $0.pts < seconds }
        #expect(!needed.isEmpty)
        var minimum = RangeSet([moov])
        for p in needed {
            let range = ByteRange(p.pos, p.pos + p.size)
            #expect(entry.ranges.contains(range), "packet at pts \(p.pts) (\(range)) is not cached")
            minimum.insert(range)
        }
        #expect(try cache.inspector.verifyClaims(url, origin: body).mismatch == nil)
        // At most 1.25x the minimum, plus the box headers read and the 64 KiB first request.
        nginx.stop()
        let log = nginx.accessLog().filter { $0.path == "/" + fixture }
        let headers = log.filter { $0.bytes <= 16 }.reduce(Int64(0)) { $0 + $1.bytes }
        #expect(r.fetchedBytes <= minimum.count * 5 / 4 + headers + 64 << 10,
                "fetched \(r.fetchedBytes) for a minimum of \(minimum.count)")
        #expect(log.count <= 8, "\(log.map { $0.range ?? "-" })")
    }

    @Test func withMoovAtTheEndNoMediaPastTheFirstSecondsIsFetched() throws {
        let nginx = try Nginx()
        let body = try Fixtures.data("moov-at-end.mp4")
        let url = try nginx.publish("end.mp4", body)
        let cache = try TestCache()
        let r = Prefetcher(store: cache.store, options: TestCache.fastOptions()).run([.seconds(url, 5)])[0]
        #expect(r.error == nil)
        nginx.stop()
        let log = nginx.accessLog().filter { $0.path == "/end.mp4" }
        // The head, the moov's header one hop past mdat, the moov, the rest of 5 s of samples.
        #expect(log.map { $0.range ?? "-" } == ["bytes=0-65535", "bytes=286439-286446", "bytes=286447-296068", "bytes=65536-131076"])
        let entry = try #require(try cache.inspector.entry(url))
        // Nothing of the mdat beyond the first 5 s: the rest of it is not cached.
        #expect(entry.ranges == RangeSet([ByteRange(0, 131_077), ByteRange(286_439, 296_069)]))
    }

    @Test func aSegmentIndexListsTheFragmentsInOneRequest() throws {
        let nginx = try Nginx()
        let url = try nginx.publish("sidx.mp4", try Fixtures.data("sidx.mp4"))
        let cache = try TestCache()
        #expect(Prefetcher(store: cache.store, options: TestCache.fastOptions()).run([.seconds(url, 5)])[0].error == nil)
        nginx.stop()
        // The first 64 KiB hold ftyp, moov and both sidx boxes: the rest of 5 s is one request.
        #expect(nginx.accessLog().filter { $0.path == "/sidx.mp4" }.map { $0.range ?? "-" } == ["bytes=0-65535", "bytes=65536-160330"])
    }

    @Test(arguments: [
        ("truncated.mp4", "cannot map its MP4 for --seconds: box 'mdat' at offset 40 ends at 286439, past its container's end 177641"),
        ("corrupt-moov.mp4", "cannot map its MP4 for --seconds: box 'stsz' at offset 2587: its sample count 2147483647 cannot fit in the box (1000 bytes left)"),
    ])
    func aBrokenFileIsOneClearError(fixture: String, message: String) throws {
        let nginx = try Nginx()
        let url = try nginx.publish(fixture, try Fixtures.data(fixture))
        let cache = try TestCache()
        let r = Prefetcher(store: cache.store, options: TestCache.fastOptions()).run([.seconds(url, 2)])[0]
        #expect(r.error?.description == message)
    }

    /// An .mp4 URL whose bytes are not an MP4 (an error page answered with 200): one clear error,
    /// and none of it is kept, whatever was asked.
    @Test func aFileThatIsNotMP4IsOneClearErrorAndNothingIsKept() throws {
        let nginx = try Nginx()
        let body = Data(String(repeating: "<html>not a video</html>\n", count: 5000).utf8)
        let url = try nginx.publish("page.mp4", body)
        let cache = try TestCache()
        let r = Prefetcher(store: cache.store, options: TestCache.fastOptions()).run([.seconds(url, 2)])[0]
        #expect(r.error?.description == "origin's answer for a .mp4 is not an MP4: its first bytes '<html>no' are not an ISO BMFF box header (ftyp, moov, mdat...); nothing of it was kept")
        let head = cache.prefetch(url, [.head(1000)])
        #expect(head.error?.remedy == .fixOrigin)
        #expect((try cache.inspector.entry(url)?.cachedBytes ?? 0) == 0)
    }
}
