import Testing
@testable import VCacheCore

/// Numbers in HTTP headers are 1*DIGIT (RFC 9110): a sign, a space inside, a decimal point or a
/// value past 2^63 is no number (the hostile review: `bytes 0-1023/+296069` was taken).
@Suite struct HTTPNumberTests {
    @Test(arguments: [
        ("bytes 0-1023/296069", true), ("bytes 0-1023/+296069", false), ("bytes +0-1023/296069", false),
        ("bytes 0-+1023/296069", false), ("bytes 0-1023/-1", false), ("bytes 0-1023/9223372036854775807", true),
        ("bytes 0-1023/9223372036854775808", false), ("bytes 0-1023/1e6", false), ("bytes 0-1023/*", true),
    ])
    func contentRangeTakesDigitsOnly(_ text: String, _ valid: Bool) {
        #expect((ContentRange(text) != nil) == valid, "\(text)")
    }

    @Test(arguments: [("296069", Int64?(296069)), ("+296069", nil), ("-1", nil), ("0", 0), ("9223372036854775808", nil), ("", nil), ("1e3", nil)])
    func contentLengthTakesDigitsOnly(_ value: String, _ length: Int64?) {
        let head = ResponseHead(status: 200, reason: "OK", headers: [("Content-Length", value)], effectiveURL: "http://o/v.mp4")
        #expect(head.contentLength == length, "\(value)")
    }

    @Test(arguments: ["nan", "snan", "inf", "-5", "1e308", "0x1p70", "+5", "5.5", "Wed, 21 Oct 2015 07:28:00 GMT"])
    func retryAfterTakesDelaySecondsOnly(_ value: String) {
        let head = ResponseHead(status: 503, reason: "Busy", headers: [("Retry-After", value)], effectiveURL: "http://o/v.mp4")
        #expect(head.retryAfter == nil, "\(value)")
    }

    @Test func aRetryAfterOfManyDigitsIsADay() {
        let head = ResponseHead(status: 503, reason: "Busy", headers: [("Retry-After", String(repeating: "9", count: 400))], effectiveURL: "http://o/v.mp4")
        #expect(head.retryAfter == 86_400)
    }
}
