import VCacheCore

/// Settings that can be stored once in the cache's config (`vcache config set NAME VALUE`) and
/// overridden on the command line: the size cap and the key rules for signed URLs.
enum Settings {
    struct Known: Sendable {
        var name: String
        var help: String
        var validate: @Sendable (String) -> String?  // nil when valid, else what is wrong
    }

    static let known: [Known] = [
        Known(name: "max-size", help: "default --max-size for prefetch (e.g. 20G)") { Units.parseSize($0) == nil ? "use a size such as 20G or 500M" : nil },
        Known(name: "min-free", help: "keep at least this much free on the cache's disk, evicting least recently used entries (e.g. 2G)") { Units.parseSize($0) == nil ? "use a size such as 2G or 500M" : nil },
        Known(name: "key-ignore-query", help: "true: URLs differing only in their query are one entry") { ["true", "false"].contains($0) ? nil : "use true or false" },
        Known(name: "key-strip-param", help: "comma-separated query parameters ignored when keying (e.g. token,expires)") { $0.contains(" ") ? "use names separated by commas, no spaces" : nil },
    ]

    /// The config's values, then the command line's, into `options`.
    static func apply(store: CacheStore, args: ParsedArguments, to options: inout PrefetchOptions) throws {
        let c = store.catalog
        if let v = try c.config("max-size") { options.maxSize = Units.parseSize(v) }
        if let v = try c.config("min-free") { options.minFree = Units.parseSize(v) }
        if try c.config("key-ignore-query") == "true" { options.keyRules.ignoreQuery = true }
        if let v = try c.config("key-strip-param") { options.keyRules.stripParameters.formUnion(v.split(separator: ",").map(String.init)) }
        if let v = args.value("max-size") { options.maxSize = try PrefetchCommand.size(v, "--max-size") }
        if let v = args.value("min-free") { options.minFree = try PrefetchCommand.size(v, "--min-free") }
        if args.flag("key-ignore-query") { options.keyRules.ignoreQuery = true }
        options.keyRules.stripParameters.formUnion(args.all("key-strip-param"))
    }

    /// The key rules alone (for commands that look entries up by URL).
    static func keyRules(store: CacheStore) -> CacheKeyRules {
        var o = PrefetchOptions()
        try? apply(store: store, args: ParsedArguments(), to: &o)
        return o.keyRules
    }
}
