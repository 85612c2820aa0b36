import Testing
@testable import VCacheCore

/// Every spelling of a URL's password libcurl takes (and the ones it refuses, which vcache prints
/// in its errors) comes out as `***`; text that holds no password is left as it is.
@Suite struct URLPasswordRedactionTests {
    static let cases: [(String, String)] = [
        // What libcurl accepts (checked with curl_url_set and the flags CURLOPT_URL uses).
        ("http://alice:s3cret@127.0.0.1:8080/v.mp4", "http://alice:***@127.0.0.1:8080/v.mp4"),
        ("http:/alice:s3cret@127.0.0.1:8080/v.mp4", "http:/alice:***@127.0.0.1:8080/v.mp4"),
        ("http:///alice:s3cret@h/v.mp4", "http:///alice:***@h/v.mp4"),
        ("http:alice:s3cret@h/v.mp4", "http:***@h/v.mp4"),  // libcurl: user `http`, password `alice:s3cret`
        ("http:\\\\alice:s3cret@h/v.mp4", "http:***@h/v.mp4"),
        ("http:/\\alice:s3cret@h/v.mp4", "http:/\\alice:***@h/v.mp4"),
        ("HTTP://alice:s3cret@h/v.mp4", "HTTP://alice:***@h/v.mp4"),
        ("hTtPs://alice:s3cret@h/v.mp4", "hTtPs://alice:***@h/v.mp4"),
        ("http://al%69ce:s3%63ret@h/v.mp4", "http://al%69ce:***@h/v.mp4"),
        ("http://alice:s3%40cret@h/v.mp4", "http://alice:***@h/v.mp4"),
        ("http://alice:s3cret;type=a@h/", "http://alice:***@h/"),
        ("http://:s3cret@h/v.mp4", "http://:***@h/v.mp4"),
        // Scheme-relative (found by the hostile review: printed in full by every command's error).
        ("//alice:s3cret@127.0.0.1:9/x.mp4", "//alice:***@127.0.0.1:9/x.mp4"),
        ("cannot prefetch //alice:s3cret@h/x.mp4: not a valid URL", "cannot prefetch //alice:***@h/x.mp4: not a valid URL"),
        ("\\\\alice:s3cret@h/x.mp4", "\\\\alice:***@h/x.mp4"),
        ("http://alice:s3cret@h?x=1", "http://alice:***@h?x=1"),
        ("alice:s3cret@h/v.mp4", "alice:***@h/v.mp4"),
        // What it refuses, as an error quotes it.
        ("http://alice:s3@cret@h/v.mp4", "http://alice:***@h/v.mp4"),
        ("http://alice:s3c ret@h/v.mp4", "http://alice:***@h/v.mp4"),
        ("http://al ice:s3cret@h/v.mp4", "http://al ice:***@h/v.mp4"),
        ("http://alice:s3/cret@h/v.mp4", "http://alice:***@h/v.mp4"),
        ("http://alice:s3?cret@h/v.mp4", "http://alice:***@h/v.mp4"),
        ("http:\\alice:s3cret@h\\v.mp4", "http:***@h\\v.mp4"),
        ("http:////alice:s3cret@h/v.mp4", "http:////alice:***@h/v.mp4"),
        // Percent-encoded whole, as in a query string.
        ("http%3A%2F%2Falice%3As3cret%40h%2Fv.mp4", "http%3A%2F%2Falice%3A***%40h%2Fv.mp4"),
        ("?u=http%3a%2f%2falice%3as3cret%40h", "?u=http%3a%2f%2falice%3a***%40h"),
        // Inside messages and JSON lines.
        ("vcache: cannot prefetch http:/alice:s3cret@h:1/v.mp4: origin answered 404", "vcache: cannot prefetch http:/alice:***@h:1/v.mp4: origin answered 404"),
        ("list.txt:3: not an http(s) URL: 'http:alice:s3cret@h'; line skipped", "list.txt:3: not an http(s) URL: 'http:***@h'; line skipped"),
        (#"{"url":"http:\\alice:s3cret@h","x":"a@b"}"#, #"{"url":"http:***@h","x":"a@b"}"#),
        (#"{"url":"http://alice:s3cret@h:80","x":"a@b"}"#, #"{"url":"http://alice:***@h:80","x":"a@b"}"#),
        ("ok http://a:1@h/x and https://b:2@k/y", "ok http://a:***@h/x and https://b:***@k/y"),
        // No password: unchanged.
        ("http://alice@h/v.mp4", "http://alice@h/v.mp4"),
        ("http://cdn:8080/img@2x.mp4", "http://cdn:8080/img@2x.mp4"),
        ("http://[::1]:8080/a@b.mp4", "http://[::1]:8080/a@b.mp4"),
        ("vcache: invalid header on line 3 of -H @FILE: no ':'", "vcache: invalid header on line 3 of -H @FILE: no ':'"),
        ("fetched 45% of http://h/v.mp4", "fetched 45% of http://h/v.mp4"),
        ("", ""),
    ]

    @Test(arguments: cases)
    func aPasswordIsWrittenAsStars(_ c: (String, String)) {
        #expect(PasswordRedaction.redacted(c.0) == c.1)
    }
}
