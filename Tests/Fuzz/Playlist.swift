// libFuzzer target: the HLS playlist parser, the plan of what to fetch and the rewrite for the
// proxy, on arbitrary bytes. Built by `make fuzz` with -sanitize=fuzzer,address. A rewritten
// playlist must parse back to as many segments as the original. Built against the whole core
// (the member check reads a DASH text sidecar's XML root).
import Foundation
@testable import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlaylist(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    _ = HLSPlaylist.looksLikePlaylist(firstBytes: bytes.prefix(16), contentType: nil)
    _ = HLSSegmentCheck.kind(firstBytes: Array(bytes.prefix(376)))
    guard let playlist = try? HLSPlaylist.parse(bytes, url: "http://origin.example/a/b/index.m3u8") else { return 0 }
    let text = String(decoding: bytes, as: UTF8.self)
    let rewritten = HLSRewriter(url: "http://origin.example/a/b/index.m3u8", proxy: { "http://127.0.0.1:8089/v/x/" + String($0.count) }).rewrite(text)
    for seconds in [nil, 0.5, 10] as [Double?] {
        let plan = HLSPlan(variant: .best, audio: nil, seconds: seconds)
        switch playlist {
        case .master: _ = try? plan.playlists(for: playlist)
        case .media(let media):
            _ = plan.fetches(for: media)
            if case .media(let again)? = try? HLSPlaylist.parse(text: rewritten, url: "http://127.0.0.1:8089/v/x/index.m3u8") {
                precondition(again.segments.count == media.segments.count, "the rewrite changed the segment count")
            }
        }
    }
    return 0
}
