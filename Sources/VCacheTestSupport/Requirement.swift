#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing

/// What a test needs of the machine (a tool, root, a network namespace, a loop device), checked
/// by the runner before the test starts: `@Test(.requires(.root, .tool("/usr/bin/strace")))`.
///
/// Where something is missing the runner reports the test as skipped with one line saying what;
/// on CI (`CI=true`, see `Requirement.strict`) the same check fails the test with that line
/// instead, since there every proof must run. A test never returns early as passed: whatever it
/// discovers only once running (nginx did not start, mount failed) is a failure.
public struct Requirement: Sendable {
    /// Why it is not met here, or nil. Cheap: a few `stat`s, `getuid`, at most one probe file.
    public let missing: @Sendable () -> String?

    public init(missing: @escaping @Sendable () -> String?) { self.missing = missing }

    /// True where a skip must fail the run: `CI=true` (the CI box, root on a fresh Debian, where
    /// the Makefile installs every tool the proofs need).
    public static var strict: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Running as root (mount, unshare -n, runuser, chown).
    public static let root = Requirement { getuid() == 0 ? nil : "needs root" }

    /// An executable at `path` (`package` names the Debian package that has it).
    public static func tool(_ path: String, _ package: String? = nil) -> Requirement {
        Requirement {
            FileManager.default.isExecutableFile(atPath: path) ? nil : "\(path) is not installed" + (package.map { " (apt-get install \($0))" } ?? "")
        }
    }

    /// An executable named `name` somewhere on PATH.
    public static func onPath(_ name: String, _ package: String? = nil) -> Requirement {
        Requirement { Tool.onPath(name) != nil ? nil : "\(name) is not on PATH" + (package.map { " (apt-get install \($0))" } ?? "") }
    }

    public static let nginx = Requirement { Nginx.binary == nil ? "nginx is not installed (apt-get install nginx)" : nil }
    public static let ffmpeg = tool("/usr/bin/ffmpeg", "ffmpeg")
    public static let ffprobe = tool("/usr/bin/ffprobe", "ffmpeg")
    public static let strace = tool("/usr/bin/strace", "strace")
    public static let fiuRun = tool("/usr/bin/fiu-run", "fiu-utils")
    public static let prlimit = tool("/usr/bin/prlimit", "util-linux")
    public static let python3 = tool("/usr/bin/python3", "python3")

    /// What Tests/Fixtures/hls/make-streams.sh runs: ffmpeg, openssl and bash on PATH.
    public static let streamTools = Requirement {
        ["ffmpeg", "openssl", "bash"].first { Tool.onPath($0) == nil }.map { "\($0) is not on PATH (Tests/Fixtures/hls/make-streams.sh needs it)" }
    }

    /// What Tests/Fixtures/dash/make-streams.sh runs: ffmpeg, ffprobe, python3 and bash on PATH.
    public static let dashTools = Requirement {
        ["ffmpeg", "ffprobe", "python3", "bash"].first { Tool.onPath($0) == nil }.map { "\($0) is not on PATH (Tests/Fixtures/dash/make-streams.sh needs it)" }
    }

    /// GStreamer's `playbin` with its HLS and DASH demuxers, MP4 demuxer and an H.264 decoder
    /// (gstreamer1.0-tools, -plugins-base, -plugins-good, -plugins-bad): the plugins' files looked
    /// for where Debian puts them, with no registry scan.
    public static let gstreamer = Requirement {
        guard Tool.onPath("gst-launch-1.0") != nil else { return "gst-launch-1.0 is not on PATH (apt-get install gstreamer1.0-tools)" }
        let lib = "/usr/lib"
        let dirs = ((try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []).map { "\(lib)/\($0)/gstreamer-1.0" } + ["\(lib)/gstreamer-1.0"]
        let plugins = ["libgstplayback.so": "gstreamer1.0-plugins-base", "libgstisomp4.so": "gstreamer1.0-plugins-good",
                       "libgstdash.so": "gstreamer1.0-plugins-bad", "libgsthls.so": "gstreamer1.0-plugins-bad", "libgstmpegtsdemux.so": "gstreamer1.0-plugins-bad",
                       "libgstopenh264.so": "gstreamer1.0-plugins-bad"]
        for (plugin, package) in plugins.sorted(by: { $0.key < $1.key })
        where !dirs.contains(where: { FileManager.default.fileExists(atPath: "\($0)/\(plugin)") }) {
            return "GStreamer's \(plugin) is not installed (apt-get install \(package))"
        }
        return nil
    }

    /// A network namespace of the test's own (`NetNamespace`): root, unshare, nsenter, ip, nft, tc, curl, nginx.
    public static let netNamespace = Requirement { NetNamespace.skipReason }

    /// A small tmpfs of the test's own (`SmallDisk`): root, and mount.
    public static let tmpfsMount = Requirement {
        getuid() != 0 ? "mounting a small tmpfs needs root" : FileManager.default.isExecutableFile(atPath: "/bin/mount") ? nil : "/bin/mount is missing"
    }

    /// A cache owned by nobody (`NobodysCache`): root and runuser.
    public static let runuser = Requirement {
        getuid() != 0 ? "running as nobody needs root" : FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") ? nil : "/usr/sbin/runuser is missing (util-linux)"
    }

    /// A loop-mounted ext4 (the power-cut harness): root, /dev/loop-control, losetup, mkfs.ext4.
    public static let loopDevice = Requirement {
        if getuid() != 0 { return "a loop device needs root" }
        if !FileManager.default.fileExists(atPath: "/dev/loop-control") { return "no /dev/loop-control (the loop module is not loaded)" }
        for tool in ["losetup", "mkfs.ext4", "mount"] where Tool.onPath(tool) == nil { return "\(tool) is not on PATH" }
        return nil
    }

    /// A file system under TMPDIR (where tests make their caches) that gives a freed inode
    /// number out again at once (ext4 does; tmpfs, overlayfs, XFS and btrfs need not): probed by
    /// making a file, removing it and making another in the same new folder.
    public static let reusesInodeNumbers = Requirement {
        let dir = TempDirectory("vcache-inode-probe")
        func make(_ name: String) -> ino_t? {
            let fd = open(dir.file(name), O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var st = stat()
            return fstat(fd, &st) == 0 ? st.st_ino : nil
        }
        guard let first = make("a") else { return "cannot make a file under \(dir.path)" }
        unlink(dir.file("a"))
        return make("b") == first ? nil : "the file system under \(dir.path) does not give a freed inode number out again (tmpfs, overlayfs, XFS, btrfs)"
    }

    /// A C compiler on PATH (the crash-replay recorder is built by `cc`).
    public static let cc = onPath("cc", "gcc")
}

/// A requirement a test failed to meet on CI: its message is the reason the test would have skipped.
public struct RequirementMissing: Error, CustomStringConvertible {
    public let description: String
}

extension Trait where Self == ConditionTrait {
    /// The test runs when every requirement is met; otherwise the runner reports it skipped with
    /// the reasons (evaluated once, when the runner builds its plan), and on CI fails it.
    public static func requires(_ needs: Requirement..., sourceLocation: SourceLocation = #_sourceLocation) -> Self {
        let reasons = needs.compactMap { $0.missing() }
        let reason = reasons.joined(separator: "; ")
        return .enabled(Comment(rawValue: reason.isEmpty ? "needs nothing missing here" : reason), sourceLocation: sourceLocation) {
            guard !reasons.isEmpty else { return true }
            if Requirement.strict { throw RequirementMissing(description: "CI=true, a proof may not be skipped: \(reason)") }
            return false
        }
    }
}

extension Tool {
    /// The first `dir/name` on PATH that is executable, or nil.
    public static func onPath(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
