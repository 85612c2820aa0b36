#if canImport(CommonCrypto)
import CommonCrypto
#else
import CCrypto
#endif
import Foundation

/// Incremental SHA-256 over the system's crypto library: libcrypto's EVP interface on Linux
/// (uses the CPU's SHA extensions), CommonCrypto on macOS. Not thread-safe; one owner at a time.
public final class SHA256Digest {
    #if canImport(CommonCrypto)
    private var context = CC_SHA256_CTX()
    #else
    private let context: OpaquePointer
    #endif
    private var finished = false

    public init() {
        #if canImport(CommonCrypto)
        CC_SHA256_Init(&context)
        #else
        // EVP_MD_CTX_new only fails on allocation failure, which Swift treats as fatal anyway.
        context = EVP_MD_CTX_new()!
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        #endif
    }

    deinit {
        #if !canImport(CommonCrypto)
        EVP_MD_CTX_free(context)
        #endif
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(CommonCrypto)
        CC_SHA256_Update(&context, base, CC_LONG(buffer.count))
        #else
        EVP_DigestUpdate(context, base, buffer.count)
        #endif
    }

    public func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hex characters. The digest cannot be updated afterwards.
    public func finalize() -> String {
        precondition(!finished, "SHA256Digest finalized twice")
        finished = true
        var out = [UInt8](repeating: 0, count: 32)
        #if canImport(CommonCrypto)
        CC_SHA256_Final(&out, &context)
        #else
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        #endif
        return Self.hex(out)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var chars = [UInt8]()
        chars.reserveCapacity(bytes.count * 2)
        for b in bytes {
            chars.append(digits[Int(b >> 4)])
            chars.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: chars, as: UTF8.self)
    }

    /// Reads `range` of `file` (256 KiB at a time, pread) into the digest.
    public func update(from file: RawFile, _ range: ByteRange) throws {
        let chunk = 256 << 10
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset = range.lowerBound
        while offset < range.upperBound {
            let n = Int(min(Int64(chunk), range.upperBound - offset))
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            try file.readExactly(into: slice, fromAbsoluteOffset: offset)
            update(UnsafeRawBufferPointer(slice))
            offset += Int64(n)
        }
    }

    public static func hash(_ data: Data) -> String {
        let d = SHA256Digest()
        d.update(data)
        return d.finalize()
    }

    public static func hash(_ string: String) -> String { hash(Data(string.utf8)) }
}

extension SHA256Digest {
    /// The crypto library in use, e.g. "OpenSSL 3.0.17 1 Jul 2025".
    public static var libraryVersion: String {
        #if canImport(CommonCrypto)
        return "CommonCrypto"
        #else
        return String(cString: OpenSSL_version(OPENSSL_VERSION))
        #endif
    }
}
