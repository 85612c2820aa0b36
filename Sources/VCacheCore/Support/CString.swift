extension String {
    /// The text of a NUL-terminated C buffer (an address from inet_ntop, a client's from
    /// libmicrohttpd): the bytes before the first NUL, as UTF-8.
    public init(nulTerminated buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
