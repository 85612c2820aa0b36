#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the cache lives: `--cache-dir`, else `$VCACHE_DIR`, else `$XDG_CACHE_HOME/vcache`,
/// else `~/.cache/vcache`.
public enum CacheLocation {
    public static func resolve(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let dir = environment["VCACHE_DIR"], !dir.isEmpty { return dir }
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/vcache" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.passwordFileHome()
        return home + "/.cache/vcache"
    }

    /// The home folder `/etc/passwd` gives the user (as NSHomeDirectory() does without $HOME); "/" when none.
    static func passwordFileHome() -> String {
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir, dir.pointee != 0 else { return "/" }
        return String(cString: dir)
    }
}
