import VCacheCore

/// What curl users behind a private CA, a proxy or split DNS need, for prefetch and serve.
struct OriginOptions: OptionGroup {
    var cacert = Option("cacert", .file, help: "trust the CA certificates in FILE (PEM) instead of the system's")
    var proxy = Option("proxy", .proxyURL, help: "send origin requests through this proxy (http_proxy etc. are honoured too)")
    var netrcFile = Option("netrc-file", .file, help: "credentials per host from a .netrc FILE")
    var resolve = Repeated("resolve", .resolveRule, help: "connect to ADDR for HOST:PORT, skipping DNS (repeatable)")
    var ipv4 = Flag("ipv4", short: "4", help: "resolve names to IPv4 addresses only")
    var ipv6 = Flag("ipv6", short: "6", help: "resolve names to IPv6 addresses only")

    static func apply(_ args: ParsedArguments<OriginOptions>, to request: inout RequestOptions) throws {
        request.caFile = args.cacert
        request.proxy = args.proxy
        request.netrcFile = args.netrcFile
        if args.ipv4 && args.ipv6 { throw UsageError("-4 and -6 exclude each other") }
        request.ipVersion = args.ipv4 ? 4 : args.ipv6 ? 6 : nil
        request.resolve = args.resolve
    }
}
