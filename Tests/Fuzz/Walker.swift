// libFuzzer target: the top-level and nested box walker, the structure check and the
// faststart rewrite, on arbitrary bytes. Built by `make fuzz` with -sanitize=fuzzer,address.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWalker(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let length = Int64(bytes.count)
    let read = MP4Walker(bytes: bytes).read
    let walker = MP4Walker(length: length, read: read)
    _ = try? walker.check()
    if let top = try? walker.topLevel() {
        for box in top where ["moov", "moof"].contains(box.type) {
            _ = try? walker.find("stco", in: box)
            _ = try? walker.chunkOffsets(moov: box)
        }
        if let moov = top.first(where: { $0.type == "moov" }), let m = try? read(moov.offset, Int(moov.size)) {
            _ = try? FastStart.plan(top: top, moov: m, length: length)
        }
    }
    return 0
}
