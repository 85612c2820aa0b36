/// Why a transfer failed below HTTP: no connection, a timeout, a cut body, a refused scheme.
public struct TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        case resolve, connect, timeout, stalled, partialBody, refusedScheme, tooManyRedirects, redirectRefused, receive, other
    }

    public var kind: Kind
    /// curl's message (CURLOPT_ERRORBUFFER, else curl_easy_strerror).
    public var message: String
    /// curl's CURLcode.
    public var code: Int
    /// `redirectRefused` to a URL with a host: that host (the origin a rule would have to allow).
    public var redirectedTo: OriginTarget?

    public init(kind: Kind, message: String, code: Int) {
        self.kind = kind
        self.message = message
        self.code = code
    }

    /// Connection-level failures that a retry may cure.
    public var isRetryable: Bool {
        switch kind {
        case .resolve, .connect, .timeout, .stalled, .partialBody, .receive: true
        case .refusedScheme, .tooManyRedirects, .redirectRefused, .other: false
        }
    }

    public var description: String {
        switch kind {
        case .resolve: "cannot resolve host (\(message))"
        case .connect: "cannot connect (\(message))"
        case .timeout: "timed out (\(message))"
        case .stalled: "stalled: \(message)"
        case .partialBody: "connection closed before the body was complete (\(message))"
        case .refusedScheme: "refused a URL that is not http or https (\(message))"
        case .tooManyRedirects: "too many redirects (\(message))"
        case .redirectRefused: message  // the whole sentence: where it led, why not, what to do
        case .receive: "connection failed while receiving (\(message))"
        case .other: message
        }
    }
}
