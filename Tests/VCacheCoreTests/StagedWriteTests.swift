import Foundation
import Testing
@testable import VCacheCore

/// The staging buffer writes each block at the next multiple of its capacity, whatever sizes the
/// bytes arrive in, and hands back exactly the bytes it was given.
@Suite struct StagedWriteTests {
    @Test func writesEndOnCapacityBoundariesAndKeepEveryByte() throws {
        var stage = StagedWrite(capacity: 8192)
        let input = TestBytesLocal.make(50_000)
        var out = Data(count: 100_000)
        var writes: [ByteRange] = []
        var offset: Int64 = 1000  // a response that starts mid-page
        var i = 0
        let sizes = [16384, 777, 5000, 16384, 1, 3000]
        func flush() {
            guard let (bytes, at) = stage.take() else { return }
            out.replaceSubrange(Int(at)..<(Int(at) + bytes.count), with: bytes)
            writes.append(ByteRange(at, at + Int64(bytes.count)))
        }
        while i < input.count {
            let n = min(sizes[writes.count % sizes.count], input.count - i)
            input.withUnsafeBytes { raw in
                var rest = UnsafeRawBufferPointer(rebasing: raw[i..<(i + n)])
                while !rest.isEmpty {
                    let k = stage.append(rest, at: offset)
                    #expect(k > 0)
                    offset += Int64(k)
                    rest = UnsafeRawBufferPointer(rebasing: rest[k...])
                    if stage.isDue { flush() }
                }
            }
            i += n
        }
        flush()
        #expect(out[1000..<51_000] == input)
        // The first write ends at 8192; every other but the last starts and ends on a boundary.
        #expect(writes.first == ByteRange(1000, 8192))
        for w in writes.dropFirst().dropLast() {
            #expect(w.lowerBound % 8192 == 0 && w.count == 8192, "\(w)")
        }
        #expect(writes.last?.upperBound == 51_000)
        let empty = stage.isEmpty
        #expect(empty)
    }
}

private enum TestBytesLocal {
    static func make(_ n: Int) -> Data {
        var g = UInt64(0x9E3779B97F4A7C15)
        return Data((0..<n).map { _ in g ^= g << 13; g ^= g >> 7; g ^= g << 17; return UInt8(truncatingIfNeeded: g) })
    }
}
