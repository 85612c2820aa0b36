#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// What a running process holds, from /proc (Linux): descriptors, threads, peak memory, CPU
/// time. For tests that a server gives back what it took and neither grows nor spins.
public struct ProcessStats: Equatable, Sendable {
    public var descriptors: Int
    public var threads: Int
    /// VmHWM: the most resident memory it ever had, in KiB.
    public var peakResidentKiB: Int
    /// utime + stime, in clock ticks (`sysconf(_SC_CLK_TCK)` a second, 100 on Linux).
    public var cpuTicks: Int

    /// Nil when /proc cannot say (no such process, not Linux).
    public static func of(_ pid: pid_t) -> ProcessStats? {
        let fm = FileManager.default
        guard let fds = try? fm.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count,
              let threads = try? fm.contentsOfDirectory(atPath: "/proc/\(pid)/task").count,
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let hwm = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })?.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return ProcessStats(descriptors: fds, threads: threads, peakResidentKiB: hwm, cpuTicks: user + system)
    }

    /// Each open descriptor and what it is, for a message.
    public static func descriptorList(_ pid: pid_t) -> String {
        let dir = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
            .map { "\($0)→\((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)) ?? "?")" }
            .joined(separator: " ")
    }
}
