import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Segments, init sections and keys at URLs without an extension (`/segment/3`) are named by what
/// they are in serve's rewritten playlists and in an export (TS `.ts`, fMP4 `.m4s`, an init
/// section `.mp4`, a key `.key`): ffmpeg's HLS reader refuses a segment whose extension does not
/// fit its format (`allowed_extensions`), and `.mp4` for a TS segment is one it refuses.
@Suite struct HLSSegmentNameTests {
    let dir = TempDirectory("vcache-hlsnames")

    /// The fixture streams on a TestOrigin, every file but the playlists at its name without the
    /// extension (`seg_000.ts` at `seg_000`), the playlists naming them so.
    static func extensionless(_ made: String, streams: [String], on origin: TestOrigin) throws {
        for stream in streams {
            let folder = made + "/" + stream
            let walker = FileManager.default.enumerator(atPath: folder)
            while let name = walker?.nextObject() as? String {
                var isDir: ObjCBool = false
                guard FileManager.default.fileExists(atPath: folder + "/" + name, isDirectory: &isDir), !isDir.boolValue else { continue }
                let body = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
                if name.hasSuffix(".m3u8") {
                    var text = String(decoding: body, as: UTF8.self)
                    for ext in [".ts", ".m4s", ".mp4", ".key"] { text = text.replacingOccurrences(of: ext + "\n", with: "\n").replacingOccurrences(of: ext + "\"", with: "\"") }
                    origin.setResource("/x/\(stream)/\(name)", .init(body: Data(text.utf8), contentType: "application/vnd.apple.mpegurl"))
                } else {
                    origin.setResource("/x/\(stream)/" + (name as NSString).deletingPathExtension, .init(body: body, contentType: "application/octet-stream"))
                }
            }
        }
    }

    @Test(.requires(.streamTools))
    func segmentsWithoutAnExtensionPlayThroughServeAndFromAnExport() throws {
        let made = dir.file("streams")
        try Fixtures.makeStreams(into: made)
        let origin = try TestOrigin()
        let streams = ["ts/index.m3u8", "fmp4/index.m3u8", "aes/index.m3u8", "abr/master.m3u8"]
        try Self.extensionless(made, streams: ["ts", "fmp4", "aes", "abr"], on: origin)
        // The origin's playlist names no extension.
        let plain = String(decoding: try Curl.fetch([origin.url("/x/ts/index.m3u8")], in: dir).body, as: UTF8.self)
        #expect(plain.contains("\nseg_000\n"), "\(plain)")

        // Through serve: each URI is named by what it is, and ffmpeg plays it.
        let serve = try ServeProcess(cacheDir: dir.file("served"), logDir: dir)
        let rewritten = String(decoding: try Curl.fetch([serve.url(origin.url("/x/fmp4/index.m3u8"))], in: dir).body, as: UTF8.self)
        #expect(rewritten.contains("/init.mp4\"") && rewritten.contains("/seg_000.m4s\n"), "\(rewritten)")
        for s in streams {
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", serve.url(origin.url("/x/" + s)), "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) through serve: \(play.err)")
        }
        // Played once, its segments are cached: named from their first bytes now.
        let again = String(decoding: try Curl.fetch([serve.url(origin.url("/x/ts/index.m3u8"))], in: dir).body, as: UTF8.self)
        #expect(again.contains("/seg_000.ts\n"), "\(again)")
        serve.stop()

        // Prefetched and exported: the folder plays from disk.
        let cache = dir.file("warmed")
        for s in ["ts/index.m3u8", "fmp4/index.m3u8", "abr/master.m3u8"] {
            let url = origin.url("/x/" + s)
            #expect(try VCacheBinary.run(["prefetch", "-q", url], cacheDir: cache).status == 0)
            let out = dir.file("export-" + s.split(separator: "/")[0])
            let export = try VCacheBinary.run(["export", url, out], cacheDir: cache)
            #expect(export.status == 0, "\(s): \(export.stderr)")
            let files = (FileManager.default.enumerator(atPath: out)?.allObjects as? [String] ?? []).filter { !$0.hasSuffix(".m3u8") && $0.contains(".") }
            #expect(!files.contains { $0.hasSuffix(".mp4") && $0.contains("seg_") }, "\(s): \(files)")
            let play = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", out + "/master.m3u8", "-f", "null", "-"])
            #expect(play.status == 0 && play.err.isEmpty, "\(s) exported: \(play.err)")
        }
    }
}
