import Foundation
import Testing
@testable import VCacheCore
import VCacheTestSupport

@Suite struct DigestTests {
    // FIPS 180-4 / NIST CSRC example vectors for SHA-256.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ])
    func matchesTheFIPSVectors(input: String, expected: String) {
        #expect(SHA256Digest.hash(input) == expected)
    }

    @Test func oneMillionAsInUnevenPiecesMatchesTheFIPSVector() {
        let d = SHA256Digest()
        var left = 1_000_000
        var piece = 1
        while left > 0 {
            let n = min(piece, left)
            d.update(Data(repeating: UInt8(ascii: "a"), count: n))
            left -= n
            piece = piece * 3 % 9973 + 1
        }
        #expect(d.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// The states kept at each 1 MiB boundary find exactly the chunks whose bytes changed, each
    /// checked alone (a change in one does not condemn the chunks after it), and the digest is the
    /// plain SHA-256 of the file.
    @Test func chunkStatesFindExactlyTheDamagedChunks() throws {
        let dir = TempDirectory("vcache-chunks")
        let size = 3 * 1_048_576 + 500_000
        var bytes = [UInt8](repeating: 0, count: size)
        var x: UInt32 = 7
        for i in 0..<size { x = x &* 1_664_525 &+ 1_013_904_223; bytes[i] = UInt8(truncatingIfNeeded: x >> 24) }
        let d = SHA256Digest(chunkSize: ChunkStates.size)
        // Fed in uneven pieces: boundaries fall inside them.
        var at = 0
        while at < size {
            let n = min(size - at, 333_333)
            bytes[at..<at + n].withUnsafeBytes { d.update($0) }
            at += n
        }
        let sha = d.finalize()
        #expect(sha == SHA256Digest.hash(Data(bytes)))
        let states = ChunkStates(sha256: sha, chunkSize: ChunkStates.size, states: d.chunkStates)
        #expect(states.states.count == 3 * 32)
        let path = dir.file("data")
        func check(_ flips: [Int]) throws -> RangeSet? {
            var copy = bytes
            for f in flips { copy[f] ^= 0x80 }
            try Data(copy).write(to: URL(fileURLWithPath: path))
            let file = try RawFile.open(path, flags: O_RDONLY)
            defer { file.close() }
            return try states.damaged(in: file, length: Int64(size))
        }
        let mib = Int64(ChunkStates.size)
        #expect(try check([]) == RangeSet())
        #expect(try check([0]) == RangeSet([ByteRange(0, mib)]))
        #expect(try check([Int(mib) + 5, 3 * Int(mib) + 1]) == RangeSet([ByteRange(mib, 2 * mib), ByteRange(3 * mib, Int64(size))]))
        #expect(try check([Int(2 * mib) - 1]) == RangeSet([ByteRange(mib, 2 * mib)]))
        #expect(try check([size - 1]) == RangeSet([ByteRange(3 * mib, Int64(size))]))
        // States of another length say nothing.
        let file = try RawFile.open(path, flags: O_RDONLY)
        defer { file.close() }
        #expect(try states.damaged(in: file, length: Int64(size) + mib) == nil)
    }
}
