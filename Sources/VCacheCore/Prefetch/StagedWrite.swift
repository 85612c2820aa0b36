#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Received bytes collected into one large, aligned write. libcurl hands over at most 16 KiB per
/// callback, at whatever offsets the response's framing gives: one `pwrite` each meant 65,536
/// system calls per GiB, and each write that began or ended inside a page made ext4 zero the rest
/// of that page first (`zero_user_segments`: 10% of a 1 GiB download's profile). Here bytes are
/// copied into a buffer and written when it reaches the next multiple of `capacity` in the file,
/// so every write but the first and the last of a transfer is `capacity` bytes on a
/// `capacity`-aligned offset. Staged bytes are not written yet: nothing counts them as held or
/// claims them until `take` hands them to `pwrite` (invariant 1 is unchanged).
struct StagedWrite: ~Copyable {
    let capacity: Int
    /// Allocated at the first byte (a batch's waiting jobs hold none).
    private var buffer: UnsafeMutableRawBufferPointer?
    /// File offset of the buffer's first byte.
    private(set) var start: Int64 = 0
    private(set) var count = 0

    init(capacity: Int) {
        precondition(capacity >= 4096 && capacity % 4096 == 0)
        self.capacity = capacity
    }

    deinit { buffer?.deallocate() }

    var isEmpty: Bool { count == 0 }
    var end: Int64 { start + Int64(count) }

    /// Where the current write must stop: the next multiple of `capacity` after `start`.
    private var limit: Int {
        Int(Int64(capacity) - start % Int64(capacity))
    }

    /// Copies as many of `bytes` (which go at `offset`, the end of what is staged) as fit before
    /// the next boundary; returns how many. `isDue` then says whether to write now.
    mutating func append(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int {
        if count == 0 { start = offset }
        precondition(offset == end, "staged bytes must be contiguous")
        let n = min(bytes.count, limit - count)
        guard n > 0 else { return 0 }
        if buffer == nil { buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 4096) }
        UnsafeMutableRawBufferPointer(rebasing: buffer![count..<(count + n)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        count += n
        return n
    }

    /// The buffer reached its boundary.
    var isDue: Bool { count > 0 && count == limit }

    /// The staged bytes and where they go; the stage is empty afterwards.
    mutating func take() -> (bytes: UnsafeRawBufferPointer, at: Int64)? {
        guard count > 0, let buffer else { return nil }
        defer { count = 0 }
        return (UnsafeRawBufferPointer(rebasing: buffer[0..<count]), start)
    }

    /// Forgets staged bytes (a dropped version's).
    mutating func discard() { count = 0 }
}
