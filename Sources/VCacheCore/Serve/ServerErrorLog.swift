#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What serve logs of libmicrohttpd's own messages: those about a player it could not take
/// (`accept` failing, the connection limit reached, no thread for it), which would otherwise go
/// unsaid, since such a player never becomes a request with a line of its own. The first of each
/// kind is logged at once, then at most one a `window`, counting those not logged between: a
/// burst of players past a limit is a line, not a flood. Its other messages (a client that left
/// midway, a malformed head) are not logged: each request already has its line.
struct ServerErrorLog {
    /// The beginnings of the messages that mean a player was not taken (libmicrohttpd 0.9.7x).
    static let kinds = ["Error accepting connection", "Hit process or system resource limit", "Server reached connection limit",
                        "Failed to create a thread", "Failed to create a new thread", "Not enough system resources"]

    let window: Duration
    private var last: [String: (at: ContinuousClock.Instant, skipped: Int)] = [:]

    init(window: Duration = .seconds(10)) { self.window = window }

    /// The line to log for `message` (libmicrohttpd's, a newline at its end), or nil.
    mutating func admit(_ message: String, at now: ContinuousClock.Instant) -> String? {
        guard let kind = Self.kinds.first(where: { message.hasPrefix($0) }) else { return nil }
        let text = message.trimming(.whitespacesAndNewlines)
        if let seen = last[kind], now - seen.at < window {
            last[kind]?.skipped += 1
            return nil
        }
        let skipped = last[kind]?.skipped ?? 0
        last[kind] = (now, 0)
        return "cannot take a player: \(text) (libmicrohttpd" + (skipped > 0 ? "; \(skipped) more since the last such line)" : ")")
    }
}
