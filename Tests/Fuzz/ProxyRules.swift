// libFuzzer target: the pure rules in front of serve's cache, on arbitrary text. Built by
// `make fuzz-build` against VCacheCore. Line 0: a request path (the proxy URL decoding, a /d/ folder path never leaving its folder, then the
// origin URL checks a decoded URL goes through); line 1: a Host header; line 2: an If-Range;
// line 3: a Content-Type; line 4: an origin URL to encode. Properties: an origin URL encoded as a
// proxy URL decodes to itself; answers' content types are media or listed types only; ServeDecision steps
// stay inside the response and read only justified bytes.
import Foundation
@testable import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyRules(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    if let origin = ProxyURL.origin(path: input.line(0)) {
        if PrefetchItem.urlProblem(origin) == nil, let target = OriginTarget.of(origin) {
            _ = AllowedOrigins().allows(target)
        }
    }
    // A folder path names a URL inside its folder: no . or .. segment anywhere in its path.
    if input.line(0).hasPrefix("/d/"), case .origin(let o) = ProxyURL.lookup(path: input.line(0)) {
        let path = HLSURI.Parts(o).path
        precondition(!path.split(separator: "/").contains { $0 == ".." || $0 == "." }, "'\(input.line(0))' names \(o)")
    }
    let names = ServerNames(listening: "0.0.0.0", port: Int(input.number(5, in: 1...65535)), extra: [input.line(6)])
    // No trap on any Host (its port is read as Int does: `+8089` and `08089` name 8089 too).
    _ = names.accepts(input.line(1))
    _ = IfRange.matches(input.line(2), etag: "\"abc\"", lastModified: input.line(3))
    precondition(!IfRange.matches(input.line(2), etag: "W/\"abc\"", lastModified: nil), "a weak ETag matched")
    let type = ProxyURL.safeContentType(ProxyURL.contentType(origin: input.line(3), name: input.line(0)))
    let base = type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    // Only media, playlists, subtitles and plain data go out as themselves; no text/ type but
    // WebVTT, no image/svg and no XML but the listed manifest types.
    let media = (base.hasPrefix("video/") || base.hasPrefix("audio/") || (base.hasPrefix("image/") && !base.contains("svg"))) && !base.contains("xml")
    let listed: Set<String> = ["application/octet-stream", "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl",
                               "audio/x-mpegurl", "application/dash+xml", "application/mp4", "text/vtt", "application/ttml+xml"]
    precondition(media || listed.contains(base), "'\(type)' goes out")
    let origin = input.line(4)
    if !origin.isEmpty, origin.utf8.count <= 12 << 10 {  // an empty origin has no proxy URL
        let made = ProxyURL.make(origin: origin, base: "http://127.0.0.1:8089")
        let path = String(made.dropFirst("http://127.0.0.1:8089".count))
        precondition(ProxyURL.origin(path: path) == origin, "'\(origin)' -> '\(made)' does not decode to itself")
    }
    serveSteps(input)
    return 0
}

private func serveSteps(_ input: FuzzInput) {
    let b = input.bytes
    func n(_ i: Int) -> Int64 { Int64(i < b.count ? b[i] : 0) * 4096 + Int64(i + 1 < b.count ? b[i + 1] : 0) }
    let end = n(0) + 1, position = min(n(2), end - 1)
    var justified = RangeSet()
    for i in stride(from: 4, to: min(b.count, 40), by: 4) {
        let a = n(i), c = a + n(i + 2) % 65536
        justified.insert(ByteRange(a, c))
    }
    let jobs = stride(from: 40, to: min(b.count, 64), by: 6).map { i -> ServeDecision.Job in
        let s = n(i), e = s + n(i + 2)
        return ServeDecision.Job(start: s, end: e, position: s + n(i + 4) % (e - s + 1), writesReadersFile: b[i] & 1 == 0)
    }
    let flags = b.count > 64 ? b[64] : 0
    let read = ServeDecision.Read(position: position, end: end, justified: justified, refreshed: flags & 1 != 0, hasFile: flags & 2 != 0,
                                  jobs: jobs, jobsStarted: Int(flags >> 4), mayStore: flags & 4 != 0)
    switch read.step {
    case .read(let upTo):
        precondition(upTo > position && upTo <= end && read.hasFile, "read to \(upTo) from \(position) of \(end)")
        precondition(justified.contains(ByteRange(position, upTo)), "read of unjustified bytes")
    case .refresh: precondition(read.hasFile && !read.refreshed)
    case .wait: precondition(read.hasFile && !jobs.isEmpty)
    case .startJob(let r): precondition(r == ByteRange(position, end) && read.mayStore && read.jobsStarted < ServeDecision.jobsPerResponse)
    case .stream(let r): precondition(r == ByteRange(position, end))
    }
}
