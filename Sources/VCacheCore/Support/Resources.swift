#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Process limits: the one a long-running server sets for itself, and what prefetch reads.
public enum Resources {
    #if canImport(Glibc)
    private static let nofile = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let nofile = RLIMIT_NOFILE
    #endif

    /// The soft limit on open descriptors now in force (`ulimit -n`, RLIMIT_NOFILE), unchanged;
    /// 1024 when it cannot be read.
    public static func descriptorLimit() -> Int {
        var r = rlimit()
        guard getrlimit(nofile, &r) == 0 else { return 1024 }
        return Int(min(r.rlim_cur, 1 << 20))  // RLIM_INFINITY is the largest value: capped
    }

    /// Descriptors this process has open now (a parent may pass many: a cron wrapper, a
    /// supervisor, a socket-activating manager), counted in `/proc/self/fd` (`/dev/fd` on
    /// macOS); 0 when it cannot be read.
    public static func openDescriptors() -> Int {
        #if os(Linux)
        let folder = "/proc/self/fd"
        #else
        let folder = "/dev/fd"
        #endif
        guard let d = opendir(folder) else { return 0 }
        defer { closedir(d) }
        var n = 0
        while let e = readdir(d) {
            let first = withUnsafeBytes(of: e.pointee.d_name) { $0.first ?? 0 }
            if first != UInt8(ascii: ".") { n += 1 }
        }
        return max(0, n - 1)  // (the folder's own descriptor, open while it is read)
    }

    /// The descriptors this process may use: the soft limit (raised to the hard one first:
    /// `raiseDescriptorLimit`) less those a parent left open beyond stdin, stdout and stderr
    /// (`openDescriptors`). What serve and prefetch size themselves by: a process that runs out
    /// is ended by libdispatch (Docs/serve.md, "Descriptors").
    public static func usableDescriptors() -> (usable: Int, limit: Int, inherited: Int) {
        let limit = raiseDescriptorLimit()
        let inherited = max(0, openDescriptors() - 3)
        return (max(0, limit - inherited), limit, inherited)
    }

    /// `usableDescriptors` in words: "24 open files are allowed (ulimit -n)", or "... (ulimit -n
    /// 128, less 100 a parent left open)".
    public static func describe(_ d: (usable: Int, limit: Int, inherited: Int)) -> String {
        "\(d.usable) open files are allowed (ulimit -n" + (d.inherited > 0 ? " \(d.limit), less \(d.inherited) its parent left open)" : ")")
    }

    /// Raises the soft limit on open descriptors to the hard limit (as nginx's
    /// `worker_rlimit_nofile` does; systemd units set the hard limit with `LimitNOFILE=`), and
    /// returns the soft limit now in force.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var r = rlimit()
        guard getrlimit(nofile, &r) == 0 else { return 1024 }
        if r.rlim_cur < r.rlim_max {
            var raised = r
            // macOS refuses more than OPEN_MAX for the soft limit; 1 << 20 is plenty anywhere.
            raised.rlim_cur = min(r.rlim_max, 1 << 20)
            if setrlimit(nofile, &raised) == 0 { r = raised }
        }
        return Int(min(r.rlim_cur, 1 << 20))  // RLIM_INFINITY is the largest value: capped too
    }
}
