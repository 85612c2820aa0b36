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

/// Incremental SHA-256 over the system's crypto library: libcrypto on Linux (the CPU's SHA
/// extensions), CommonCrypto on macOS. Not thread-safe; one owner at a time.
///
/// With `chunkSize`, it also keeps the hash's state at every chunk boundary (32 bytes a chunk,
/// taken as the bytes go by, at no cost): from those, `ChunkStates.damaged` later tells which
/// chunks of a file no longer hash as they did, each checked on its own.
public final class SHA256Digest {
    #if canImport(CommonCrypto)
    private var context = CC_SHA256_CTX()
    #else
    private var context = SHA256_CTX()
    #endif
    private var finished = false
    /// Bytes hashed so far.
    private var count: Int64 = 0
    /// The chunk size whose boundary states are kept, and those states.
    private let chunkSize: Int64?
    public private(set) var chunkStates: [UInt8] = []

    /// `chunkSize`: a multiple of 64 (SHA-256's block), or nil to keep no states.
    public init(chunkSize: Int64? = nil) {
        precondition(chunkSize.map { $0 > 0 && $0 % 64 == 0 } ?? true, "chunk size must be a multiple of 64")
        #if canImport(CommonCrypto)
        CC_SHA256_Init(&context)
        self.chunkSize = nil  // CommonCrypto's state is not read: no chunk states on macOS
        #else
        SHA256_Init(&context)
        self.chunkSize = chunkSize
        #endif
    }

    /// Resumes at a chunk boundary: `offset` bytes hashed, ending in `state` (from `chunkStates`).
    fileprivate init(resumingAt offset: Int64, state: ArraySlice<UInt8>) {
        chunkSize = nil
        #if !canImport(CommonCrypto)
        SHA256_Init(&context)
        withUnsafeMutableBytes(of: &context.h) { h in
            for i in 0..<32 { h[i] = state[state.startIndex + i] }
        }
        let bits = UInt64(offset) << 3
        context.Nl = UInt32(truncatingIfNeeded: bits)
        context.Nh = UInt32(truncatingIfNeeded: bits >> 32)
        count = offset
        #endif
    }

    /// The state now, as kept at a boundary (the eight words in this machine's order).
    fileprivate var state: [UInt8] {
        #if canImport(CommonCrypto)
        return []
        #else
        return withUnsafeBytes(of: context.h) { Array($0) }
        #endif
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard let chunkSize else { return feed(buffer) }
        var rest = UnsafeRawBufferPointer(start: base, count: buffer.count)
        while !rest.isEmpty {
            let toBoundary = Int(min(Int64(rest.count), chunkSize - count % chunkSize))
            feed(UnsafeRawBufferPointer(rebasing: rest[0..<toBoundary]))
            if count % chunkSize == 0 { chunkStates += state }
            rest = UnsafeRawBufferPointer(rebasing: rest[toBoundary...])
        }
    }

    private func feed(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(CommonCrypto)
        CC_SHA256_Update(&context, base, CC_LONG(buffer.count))
        #else
        SHA256_Update(&context, base, buffer.count)
        #endif
        count += Int64(buffer.count)
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
        SHA256_Final(&out, &context)
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
        try file.readChunks(range) { piece, _ in update(piece) }
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

/// The SHA-256 states a complete entry's digest passed through at each `size` boundary: with them,
/// a file whose digest no longer matches tells which chunks changed, so `verify --fix` drops those
/// and keeps the rest (a flipped bit costs one chunk, not the video).
public struct ChunkStates: Equatable, Sendable {
    /// 1 MiB: 32 bytes of state per MiB of video (0.003 %).
    public static let size: Int64 = 1 << 20
    /// The digest these states lead to; states of another version say nothing.
    public var sha256: String
    public var chunkSize: Int64
    /// 32 bytes per boundary, in order.
    public var states: [UInt8]

    public init(sha256: String, chunkSize: Int64, states: [UInt8]) {
        self.sha256 = sha256
        self.chunkSize = chunkSize
        self.states = states
    }

    /// The chunks of `[0, length)` of `file` that no longer hash as they did, each checked
    /// alone (resumed from the state before it). Nil when the states do not fit a file of
    /// `length` (another version, or none kept), or where states cannot be used (macOS).
    public func damaged(in file: RawFile, length: Int64) throws -> RangeSet? {
        try check(file, length: length, within: RangeSet([ByteRange(0, length)])).map(\.bad)
    }

    /// The chunks lying wholly in `within` that still hash as they did (`good`) and those that
    /// do not (`bad`); a chunk not wholly in `within` is in neither (nothing proves its bytes).
    /// Nil when the states do not fit a file of `length`, or cannot be used (macOS).
    public func check(_ file: RawFile, length: Int64, within: RangeSet) throws -> (good: RangeSet, bad: RangeSet)? {
        #if canImport(CommonCrypto)
        return nil
        #else
        guard length >= 0, chunkSize > 0, chunkSize % 64 == 0, states.count == Int(length / chunkSize) * 32 else { return nil }
        var good = RangeSet(), bad = RangeSet()
        var start: Int64 = 0
        var index = 0
        while start < length {
            let end = min(start + chunkSize, length)
            let chunk = ByteRange(start, end)
            if within.contains(chunk) {
                let d = index == 0 ? SHA256Digest() : SHA256Digest(resumingAt: start, state: states[(index - 1) * 32..<index * 32])
                try d.update(from: file, chunk)
                let ok = end - start == chunkSize ? d.state[...] == states[index * 32..<(index + 1) * 32] : d.finalize() == sha256
                if ok { good.insert(chunk) } else { bad.insert(chunk) }
            }
            start = end
            index += 1
        }
        return (good, bad)
        #endif
    }
}
