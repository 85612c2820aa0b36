import Foundation
import Testing
@testable import VCacheCore

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
}
