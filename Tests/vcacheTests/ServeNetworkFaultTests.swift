import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 25, network faults under `serve`: serve, its origin (nginx) and the player (curl) in a
/// network namespace of the test's own (`NetNamespace`), and the origin's connections reset (nft
/// `reject with tcp reset` once one carried 400 kB) or black-holed (nft `drop` of the origin's
/// packets past 300 kB) while serve streams a video through from the origin, or an HLS segment
/// named by a playlist it rewrote. Each time serve answers 5xx or cuts the response, never a
/// wrong or zero-filled byte (what the player received hashes as the origin's bytes of that
/// range); the catalog claims only the origin's bytes; and once the fault is lifted the next
/// request is answered whole, byte-exact. serve runs with `--retries 0 --timeout 2s` so that a
/// fault is one, not a retry that gets around it. Needs root; elsewhere the runner reports
/// each test skipped (on CI, failed) with the reason.
@Suite struct ServeNetworkFaultTests {
    let dir = TempDirectory("vcache-servenet")
    static let video = TestBytes.make(3 << 20, seed: 2502)
    static let segment = transportStream(1_500_000, seed: 2503)
    static let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:4.0,\ns0.ts\n#EXT-X-ENDLIST\n"

    /// Random bytes that begin as MPEG-TS does (0x47 every 188 bytes, as serve checks a segment's
    /// first bytes before storing them).
    static func transportStream(_ count: Int, seed: UInt64) -> Data {
        var d = TestBytes.make(count, seed: seed)
        for at in stride(from: 0, to: count, by: 188) { d[at] = 0x47 }
        d[1] &= 0x1F
        d[3] &= 0x3F
        return d
    }

    /// A namespace whose nginx serves the video and the stream, or nil (the reason printed).
    func namespace() throws -> NetNamespace {
        let ns = try NetNamespace()
        try Self.video.write(to: URL(fileURLWithPath: ns.root + "/v.mp4"))
        try FileManager.default.createDirectory(atPath: ns.root + "/hls", withIntermediateDirectories: true)
        try Self.playlist.write(toFile: ns.root + "/hls/index.m3u8", atomically: true, encoding: .utf8)
        try Self.segment.write(to: URL(fileURLWithPath: ns.root + "/hls/s0.ts"))
        return ns
    }

    /// A GET by curl inside the namespace: curl's exit code, the status, the headers and the body received.
    func get(_ ns: NetNamespace, _ url: String) throws -> (curl: Int32, status: Int, headers: [String: String], body: Data) {
        let id = UUID().uuidString.prefix(8)
        let h = dir.file("h-\(id)"), b = dir.file("b-\(id)")
        let r = try ns.run("/usr/bin/curl", ["-s", "--max-time", "60", "-D", h, "-o", b, url])
        let (status, headers) = ResponseHeadText.parse((try? String(contentsOfFile: h, encoding: .utf8)) ?? "")
        return (r.status, status, headers, (try? Data(contentsOf: URL(fileURLWithPath: b))) ?? Data())
    }

    /// The segment's proxy URL, as the playlist serve answers names it.
    func segmentURL(_ ns: NetNamespace, _ serve: ServeProcess) throws -> String {
        let answer = try get(ns, serve.url(ns.url("/hls/index.m3u8")))
        let text = String(decoding: answer.body, as: UTF8.self)
        let uri = text.split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init)
        return try #require(uri.flatMap { $0.hasPrefix(serve.base + "/v/") ? $0 : nil }, "the playlist serve answered: \(answer.status) \(text)")
    }

    @Test(.requires(.netNamespace), arguments: ["reset", "black hole"], ["video", "segment"])
    func aFaultUnderServeCutsOrFailsNeverAWrongByteAndTheNextRequestIsWhole(fault: String, target: String) throws {
        let ns = try namespace()
        defer { ns.stop() }
        let cache = dir.file("cache")
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--retries", "0", "--timeout", "2s", "--connect-timeout", "2s"],
                                     launcher: ns.launcher)
        defer { serve.stop() }
        let (origin, bytes) = target == "video" ? (ns.url("/v.mp4"), Self.video) : (ns.url("/hls/s0.ts"), Self.segment)
        // A segment is read as a player reads it: through the playlist serve rewrote.
        let url = target == "video" ? serve.url(origin) : try segmentURL(ns, serve)
        let rule = fault == "reset" ? "tcp dport \(ns.port) ct reply bytes gt 400000 reject with tcp reset"
            : "tcp sport \(ns.port) ct reply bytes gt 300000 drop"
        try ns.nft("""
            table inet vcachetest {
                chain input {
                    type filter hook input priority 0;
                    \(rule)
                }
            }
            """)

        let faulted = try get(ns, url)
        print("serve under a \(fault) (\(target)): \(faulted.status), \(faulted.body.count) of \(bytes.count) bytes received, curl exit \(faulted.curl)")
        if faulted.status >= 500 {
            // Refused before a byte went out: nothing of a body.
            #expect(faulted.body.isEmpty || faulted.headers["content-type"]?.hasPrefix("text/") == true, "\(faulted.status) with a body")
        } else {
            #expect(faulted.status == 200, "\(faulted.status) \(faulted.headers)")
            // Cut: fewer bytes than announced, curl says so; and every byte received is the origin's.
            #expect(faulted.body.count < bytes.count && faulted.curl != 0, "the fault did not cut the response: \(faulted.body.count) bytes, curl exit \(faulted.curl)")
            #expect(faulted.headers["content-length"] == "\(bytes.count)")
            #expect(TestBytes.sha256(faulted.body) == TestBytes.sha256(bytes.prefix(faulted.body.count)),
                    "the bytes received under the fault are not the origin's (first difference at \(zip(faulted.body, bytes).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? -1))")
        }
        let claims = try CacheInspector(directory: cache).verifyClaims(origin, origin: bytes)
        #expect(claims.mismatch == nil, "a claimed range differs from the origin: \(String(describing: claims.mismatch))")
        #expect(try CacheInspector(directory: cache).entry(origin)?.isComplete != true)

        try ns.must("nft", ["delete", "table", "inet", "vcachetest"])
        let again = try get(ns, url)
        #expect(again.curl == 0 && again.status == 200, "\(again.curl) \(again.status)")
        #expect(TestBytes.sha256(again.body) == TestBytes.sha256(bytes))
        #expect(try CacheInspector(directory: cache).verifyClaims(origin, origin: bytes).mismatch == nil)
        let log = serve.log.joined(separator: "\n")
        #expect(!log.contains("Fatal error"), "\(log)")
    }
}
