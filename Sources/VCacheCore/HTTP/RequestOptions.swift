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
    /// Bytes per second for each transfer; nil for unlimited.
    public var maxReceiveRate: Int64? = nil

    public init() {}
}

public enum VCacheVersion {
    public static let string = "0.1.0"
}
