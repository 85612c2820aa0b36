#if canImport(CommonCrypto)
import CommonCrypto
#else
import CCrypto
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Incremental MD5, SHA-1, SHA-256 or SHA-512 for expected checksums (`ExpectedDigest`), from
/// the same crypto library as `SHA256Digest`: libcrypto's EVP on Linux, CommonCrypto on macOS.
/// Not thread-safe; one owner at a time.
public final class AlgorithmDigest {
    public let algorithm: DigestAlgorithm
    private var finished = false
    /// The library refused to set up or run the digest: it finishes as nil.
    private var failed = false
    #if canImport(CommonCrypto)
    private var md5 = CC_MD5_CTX()
    private var sha1 = CC_SHA1_CTX()
    private var sha256 = CC_SHA256_CTX()
    private var sha512 = CC_SHA512_CTX()
    #else
    /// EVP_MD_CTX_new; freed in deinit. Nil only when libcrypto could not allocate one.
    private let context: OpaquePointer?
    #endif

    public init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        #if canImport(CommonCrypto)
        switch algorithm {
        case .md5: CC_MD5_Init(&md5)
        case .sha1: CC_SHA1_Init(&sha1)
        case .sha256: CC_SHA256_Init(&sha256)
        case .sha512: CC_SHA512_Init(&sha512)
        }
        #else
        context = EVP_MD_CTX_new()
        let md: OpaquePointer? = switch algorithm {
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha512: EVP_sha512()
        }
        if context == nil || EVP_DigestInit_ex(context, md, nil) != 1 { failed = true }
        #endif
    }

    deinit {
        #if !canImport(CommonCrypto)
        EVP_MD_CTX_free(context)
        #endif
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        precondition(!finished, "AlgorithmDigest updated after finalize")
        guard let base = buffer.baseAddress, buffer.count > 0, !failed else { return }
        #if canImport(CommonCrypto)
        let n = CC_LONG(buffer.count)
        switch algorithm {
        case .md5: CC_MD5_Update(&md5, base, n)
        case .sha1: CC_SHA1_Update(&sha1, base, n)
        case .sha256: CC_SHA256_Update(&sha256, base, n)
        case .sha512: CC_SHA512_Update(&sha512, base, n)
        }
        #else
        if EVP_DigestUpdate(context, base, buffer.count) != 1 { failed = true }
        #endif
    }

    /// The digest as lowercase hex; nil when the library failed (never a wrong value). The digest
    /// cannot be updated afterwards.
    public func finalize() -> String? {
        precondition(!finished, "AlgorithmDigest finalized twice")
        finished = true
        var out = [UInt8](repeating: 0, count: 64)
        #if canImport(CommonCrypto)
        switch algorithm {
        case .md5: CC_MD5_Final(&out, &md5)
        case .sha1: CC_SHA1_Final(&out, &sha1)
        case .sha256: CC_SHA256_Final(&out, &sha256)
        case .sha512: CC_SHA512_Final(&out, &sha512)
        }
        #else
        guard !failed, let context else { return nil }
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &out, &length) == 1, Int(length) == algorithm.byteCount else { return nil }
        #endif
        return SHA256Digest.hex(Array(out.prefix(algorithm.byteCount)))
    }
}

/// Several `AlgorithmDigest`s fed the same bytes.
public final class DigestSet {
    public private(set) var digests: [AlgorithmDigest]

    public init(_ algorithms: Set<DigestAlgorithm>) {
        digests = algorithms.sorted().map(AlgorithmDigest.init)
    }

    public var algorithms: Set<DigestAlgorithm> { Set(digests.map(\.algorithm)) }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        for d in digests { d.update(buffer) }
    }

    /// Reads `range` of `file` (256 KiB at a time) into every digest.
    public func update(from file: RawFile, _ range: ByteRange) throws {
        try file.readChunks(range) { piece, _ in update(piece) }
    }

    /// Each digest as lowercase hex (one the library failed to finish is missing).
    public func finalize() -> [DigestAlgorithm: String] {
        var out: [DigestAlgorithm: String] = [:]
        for d in digests { out[d.algorithm] = d.finalize() }
        return out
    }
}
