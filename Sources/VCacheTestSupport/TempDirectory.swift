import Foundation
import VCacheCore

/// A unique folder under the system temp dir, removed when the value is released.
public final class TempDirectory: @unchecked Sendable {
    // Immutable after init; deinit only removes the folder.
    public let path: String

    public init(_ label: String = "vcache-test") {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/\(label)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed under \(base)")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        if ProcessInfo.processInfo.environment["VCACHE_KEEP_TEST_DIRS"] == nil {
            FileSystem.removeTree(path)
        }
    }

    public func file(_ name: String) -> String { path + "/" + name }

    @discardableResult
    public func write(_ name: String, _ data: Data) throws -> String {
        let p = file(name)
        try data.write(to: URL(fileURLWithPath: p))
        return p
    }
}

/// Reproducible bytes: a SplitMix64 stream, so tests need no fixture for large bodies.
public enum TestBytes {
    public static func make(_ count: Int, seed: UInt64 = 1) -> Data {
        var state = seed
        var out = Data(count: count)
        out.withUnsafeMutableBytes { raw in
            let words = count / 8
            let p = raw.baseAddress!
            for i in 0..<words {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                p.storeBytes(of: z, toByteOffset: i * 8, as: UInt64.self)
            }
            for i in (words * 8)..<count { p.storeBytes(of: UInt8(truncatingIfNeeded: i &* 31 &+ Int(truncatingIfNeeded: seed)), toByteOffset: i, as: UInt8.self) }
            // It begins with a box (a `uuid` box, then the seed's bytes): vcache refuses an .mp4
            // whose first bytes are not a box, and test videos are served as .mp4. (Not `ftyp`:
            // verify would then walk it as an MP4 and find no moov.)
            if count >= 8 {
                let header: [UInt8] = [0, 0, 0, 24, 0x75, 0x75, 0x69, 0x64]
                for (i, b) in header.enumerated() { p.storeBytes(of: b, toByteOffset: i, as: UInt8.self) }
            }
        }
        return out
    }

    public static func sha256(_ data: Data) -> String { SHA256Digest.hash(data) }

    public static func sha256(file path: String) -> String? {
        FileManager.default.contents(atPath: path).map { SHA256Digest.hash($0) }
    }
}

/// A small tmpfs of the test's own (a disk that fills), mounted under `dir`; unmounted by
/// `unmount`. A test that makes one carries `.requires(.tmpfsMount)`; a mount that fails is the
/// test's failure (it throws), never a pass.
public struct SmallDisk {
    public struct Failed: Error, CustomStringConvertible {
        public let description: String
    }

    public let path: String

    public init(size: String, in dir: TempDirectory) throws {
        if let why = Requirement.tmpfsMount.missing() { throw Failed(description: why) }
        path = dir.file("small")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mounted = try Tool.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path])
        guard mounted.status == 0 else { throw Failed(description: "cannot mount a \(size) tmpfs on \(path): \(mounted.err)") }
    }

    public func unmount() { _ = try? Tool.run("/bin/umount", ["-l", path]) }

    /// Remounts it read-only (a box whose file system went read-only) or read-write again.
    public func remount(readOnly: Bool) throws -> Bool {
        try Tool.run("/bin/mount", ["-o", readOnly ? "remount,ro" : "remount,rw", path]).status == 0
    }
}

/// A splitmix64 generator for seeded schedules (model and interleaving tests): the sequence is a
/// function of the seed, so a printed seed reruns a failure.
public struct SeededRandom {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A number in `0..<n`.
    public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    /// True `percent` times in 100.
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}
