/// How requests to the origin are made; shared by every transfer of a run.
public struct RequestOptions: Sendable, Equatable {
    /// Extra request headers as `Name: value` lines (auth, cookies).
    public var headers: [String] = []
    public var userAgent: String = "vcache/\(VCacheVersion.string)"
    /// Seconds to establish a connection.
    public var connectTimeout: Double = 15
    /// Seconds with no byte received before a transfer is abandoned (whole seconds; at least 1).
    public var stallTimeout: Double = 30
    public var maxRedirects: Int = 10
    /// The only origins requests may reach, redirects included (`serve --allow-host`): a URL
    /// outside them gets no connection and no request; nil: any.
    public var allowedOrigins: AllowedOrigins?
    /// Bytes per second for each transfer; nil for unlimited.
    public var maxReceiveRate: Int64? = nil
    /// CA certificates to trust instead of the system's (`--cacert`).
    public var caFile: String?
    /// A proxy for origin requests (`--proxy`); libcurl also honours http_proxy, https_proxy,
    /// all_proxy and no_proxy from the environment.
    public var proxy: String?
    /// 4 or 6: resolve host names to IPv4 or IPv6 addresses only (`-4`, `-6`).
    public var ipVersion: Int?
    /// `HOST:PORT:ADDR` entries that skip DNS for that host and port (`--resolve`).
    public var resolve: [String] = []
    /// A .netrc file with credentials per host (`--netrc-file`).
    public var netrcFile: String?
    /// The transfer gets a TCP connection of its own: HTTP/1.1, never an HTTP/2 stream multiplexed
    /// onto another transfer's connection (`--connections`: an origin limits each connection).
    public var ownConnection = false

    public init() {}
}

public enum VCacheVersion {
    public static let string = "0.2.0"

    /// The system libraries this binary runs on, as `--version` shows them.
    public static var libraries: [(name: String, version: String)] {
        [("libcurl", Fetcher.libraryVersion), ("SQLite", Database.libraryVersion), ("crypto", SHA256Digest.libraryVersion),
         ("libmicrohttpd", HTTPServer.libraryVersion), ("libxml2", XMLTree.libraryVersion)]
    }
}
