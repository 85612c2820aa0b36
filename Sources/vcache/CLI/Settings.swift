import VCacheCore

/// Settings that can be stored once in the cache's config (`vcache config set NAME VALUE`) and
/// overridden on the command line: the size cap, prefetch's connections per video and the key
/// rules for signed URLs.
enum Settings {
    struct Known: Sendable {
        var name: String
        var help: String
        var validate: @Sendable (String) -> String?  // nil when valid, else what is wrong
    }

    static let known: [Known] = [
        Known(name: "max-size", help: "default --max-size for prefetch (e.g. 20G)") { Units.parseSize($0) == nil ? "use a size such as 20G or 500M" : nil },
        Known(name: "min-free", help: "keep at least this much free on the cache's disk, evicting least recently used entries (e.g. 2G)") { Units.parseSize($0) == nil ? "use a size such as 2G or 500M" : nil },
        Known(name: "connections", help: "default --connections for prefetch: connections one video's missing bytes are fetched over (1 to 64)") { Int($0).map { (1...64).contains($0) } == true ? nil : "use a whole number from 1 to 64" },
        Known(name: "key-ignore-query", help: "true: URLs differing only in their query are one entry") { ["true", "false"].contains($0) ? nil : "use true or false" },
        Known(name: "key-strip-param", help: "comma-separated query parameters ignored when keying (e.g. token,expires)") { $0.contains(" ") ? "use names separated by commas, no spaces" : nil },
    ]

    /// What a command line gives for the settings (each command its own options): it wins over the config.
    struct Overrides {
        var maxSize: Int64?
        var minFree: Int64?
        var connections: Int?
        var keyIgnoreQuery = false
        var keyStripParameters: [String] = []
        /// The command fetches over `connections` (prefetch): a stored value it cannot use is an error.
        var usesConnections = false

        init(maxSize: Int64? = nil, minFree: Int64? = nil, connections: Int? = nil, usesConnections: Bool = false,
             keys: ParsedArguments<KeyOptions>? = nil) {
            self.maxSize = maxSize
            self.minFree = minFree
            self.connections = connections
            self.usesConnections = usesConnections
            keyIgnoreQuery = keys?.keyIgnoreQuery ?? false
            keyStripParameters = keys?.keyStripParam ?? []
        }
    }

    /// The config's values, then the command line's, into `options`.
    static func apply(store: CacheStore, _ overrides: Overrides, to options: inout PrefetchOptions) throws {
        let c = store.catalog
        if let v = try c.config("max-size") { options.maxSize = Units.parseSize(v) }
        if let v = try c.config("min-free") { options.minFree = Units.parseSize(v) }
        if try c.config("key-ignore-query") == "true" { options.keyRules.ignoreQuery = true }
        if let v = try c.config("key-strip-param") { options.keyRules.stripParameters.formUnion(v.split(separator: ",").map(String.init)) }
        if let v = try c.config("connections") {
            if let n = Int(v), (1...64).contains(n) {
                options.connections = n
            } else if overrides.usesConnections && overrides.connections == nil {
                // (`config set` refuses such a value: this one was written into the catalog otherwise.)
                throw UsageError("invalid value '\(Console.escaped(v))' for config connections in the cache; use a whole number from 1 to 64: 'vcache config set connections N', or 'vcache config unset connections'")
            }
        }
        if let v = overrides.maxSize { options.maxSize = v }
        if let v = overrides.minFree { options.minFree = v }
        if let v = overrides.connections { options.connections = v }
        // -j within what `ulimit -n` carries (the soft limit raised to the hard one first, as
        // serve does), and -j times --connections at most 64 transfers within what it leaves (Docs/cli.md).
        let descriptors = Resources.usableDescriptors().usable
        options.concurrency = PrefetchOptions.jobs(options.concurrency, descriptors: descriptors)
        options.connections = PrefetchOptions.connectionsPerEntry(options.connections, jobs: options.concurrency, descriptors: descriptors)
        if overrides.keyIgnoreQuery { options.keyRules.ignoreQuery = true }
        options.keyRules.stripParameters.formUnion(overrides.keyStripParameters)
    }

    /// The key rules alone (for commands that look entries up by URL).
    static func keyRules(store: CacheStore) -> CacheKeyRules {
        var o = PrefetchOptions()
        try? apply(store: store, Overrides(), to: &o)
        return o.keyRules
    }
}

/// How URLs map to entries, overriding the config (prefetch, check).
struct KeyOptions: OptionGroup {
    var keyIgnoreQuery = Flag("key-ignore-query", help: "URLs differing only in their query are one entry (signed URLs)")
    var keyStripParam = Repeated("key-strip-param", .text("NAME"), help: "ignore query parameter NAME when keying, e.g. token (repeatable)")
}
