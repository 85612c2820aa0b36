import Foundation

/// Where the cache lives: `--cache-dir`, else `$VCACHE_DIR`, else `$XDG_CACHE_HOME/vcache`,
/// else `~/.cache/vcache`.
public enum CacheLocation {
    public static func resolve(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let dir = environment["VCACHE_DIR"], !dir.isEmpty { return dir }
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/vcache" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.cache/vcache"
    }
}
