// libFuzzer target: the moov parser, the sample mapper, the fragment reader and the planner
// (`--seconds`), and `info`'s facts, on arbitrary bytes. Built by `make fuzz`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMapper(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let length = Int64(bytes.count)
    let read = MP4Walker(bytes: bytes).read
    let all = RangeSet(length > 0 ? [ByteRange(0, length)] : [])
    for goal in [MP4Goal.moov, .seconds(2), .seconds(1e9)] {
        _ = MP4Planner(goal: goal, length: length, have: all, read: read).next()
    }
    // A partial view: only the first half is held.
    _ = MP4Planner(goal: .seconds(5), length: length, have: RangeSet(length > 1 ? [ByteRange(0, length / 2)] : []), read: read).next()
    _ = MP4Facts.inspect(length: length, have: all, read: read)
    return 0
}
