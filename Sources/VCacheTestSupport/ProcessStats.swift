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

extension ServeProcess {
    /// Waits (bounded: 60 s) until serve's own counters say no storing job is left and the only
    /// connection is the scrape asking (`/metrics`, fetched by curl inside `ns` when given); then,
    /// with `descriptorsAtMost`, (bounded: 10 s) until it holds no more descriptors than that (a
    /// connection counts as closed a moment before its thread lets go). Nil when so; else what
    /// is still held.
    public func settles(inside ns: NetNamespace? = nil, descriptorsAtMost baseline: ProcessStats? = nil) -> String? {
        let idle = { (m: String) in m.contains("\nvcache_storing_jobs 0\n") && m.contains("\nvcache_open_connections 1\n") }
        let deadline = ContinuousClock.now + .seconds(60)
        var metrics = ""
        repeat {
            let args = ["-s", "--max-time", "5", base + "/metrics"]
            let r = try? (ns.map { try $0.run("/usr/bin/curl", args) } ?? Tool.run("/usr/bin/curl", args))
            metrics = String(decoding: r?.out ?? Data(), as: UTF8.self)
            if idle(metrics) { break }
            usleep(50_000)  // polling serve's counters: nothing pushes them
        } while ContinuousClock.now < deadline
        guard idle(metrics) else {
            return "serve never became idle: \(metrics.split(separator: "\n").filter { $0.hasPrefix("vcache_storing_jobs") || $0.hasPrefix("vcache_open_connections") })"
        }
        guard let baseline else { return nil }
        let settled = ContinuousClock.now + .seconds(10)
        while let now = ProcessStats.of(process.pid), now.descriptors > baseline.descriptors {
            if ContinuousClock.now > settled {
                return "serve holds \(now.descriptors) descriptors against \(baseline.descriptors) before: \(ProcessStats.descriptorList(process.pid))"
            }
            usleep(20_000)  // polling /proc: no event says a thread let go
        }
        return nil
    }
}
