import Testing
@testable import VCacheCore

/// What serve logs of libmicrohttpd's messages: only those about a player not taken, the first
/// of each kind at once, then one a window with the count of those not logged.
@Suite struct ServerErrorLogTests {
    @Test func aBurstIsOneLineAKindAndTheNextWindowSaysHowManyWereNotLogged() {
        var log = ServerErrorLog(window: .seconds(10))
        let t0 = ContinuousClock.now
        let limit = "Server reached connection limit. Closing inbound connection.\n"
        let accept = "Error accepting connection: Too many open files\n"
        #expect(log.admit(limit, at: t0) == "cannot take a player: Server reached connection limit. Closing inbound connection. (libmicrohttpd)")
        for i in 1...5 { #expect(log.admit(limit, at: t0 + .seconds(i)) == nil) }
        // Another kind is not held back by the first.
        #expect(log.admit(accept, at: t0 + .seconds(1)) == "cannot take a player: Error accepting connection: Too many open files (libmicrohttpd)")
        #expect(log.admit(limit, at: t0 + .seconds(10)) == "cannot take a player: Server reached connection limit. Closing inbound connection. (libmicrohttpd; 5 more since the last such line)")
        #expect(log.admit(limit, at: t0 + .seconds(30)) == "cannot take a player: Server reached connection limit. Closing inbound connection. (libmicrohttpd)")
    }

    @Test(arguments: ["Failed to send data in request for `/v/x/y.mp4'.\n", "Error processing request (HTTP response code is 400 (`Bad Request')). Closing connection.\n",
                      "Connection reset by peer\n", ""])
    func messagesAboutRequestsAreNotLogged(_ message: String) {
        var log = ServerErrorLog()
        #expect(log.admit(message, at: .now) == nil)
    }
}
