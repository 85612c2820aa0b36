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
