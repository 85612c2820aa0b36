import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// Issue 32: no spelling of a URL's password libcurl takes is ever printed (lines, --json, -i
/// lists, url, check, ls), and a bad line of `-H @FILE` is named by its number, not shown.
@Suite struct SecretRedactionTests {
    let dir = TempDirectory("vcache-secrets")
    var cache: String { dir.file("cache") }

    func vcache(_ args: [String]) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache) }

    @Test func noSpellingOfAPasswordIsPrinted() throws {
        let origin = try TestOrigin()
        origin.setResource("/v.mp4", .init(body: TestBytes.make(30_000, seed: 3), etag: "\"v\""))
        let hostPort = "127.0.0.1:\(origin.port)/v.mp4"
        let spellings = ["http://alice:s3cret@", "http:/alice:s3cret@", "http:alice:s3cret@", "http:\\\\alice:s3cret@",
                         "HTTP:/\\alice:s3cret@", "http://alice:s3cret@x@", "http://alice:s3%63ret@", "alice:s3cret@"].map { $0 + hostPort }
        _ = try dir.write("list.txt", Data(spellings.joined(separator: "\n").utf8))
        var everything = ""
        for url in spellings {
            for args in [["prefetch", url, "--progress", "lines"], ["prefetch", url, "--json"], ["prefetch", url, "--progress", "bar"],
                         ["url", url], ["check", url], ["check", url, "--json"], ["info", url]] {
                let r = try vcache(args)
                everything += r.stdout + r.stderr
            }
        }
        for args in [["prefetch", "-i", dir.file("list.txt")], ["prefetch", "-i", dir.file("list.txt"), "--json"], ["ls"], ["ls", "--json"]] {
            let r = try vcache(args)
            everything += r.stdout + r.stderr
        }
        #expect(!everything.contains("s3cret") && !everything.contains("s3%63ret"), "\(everything)")
        let oneSlash = try vcache(["prefetch", spellings[1]])
        #expect(oneSlash.status == 2)
        #expect(oneSlash.stderr == "vcache: cannot prefetch http:/alice:***@\(hostPort): not a valid URL; give an absolute http:// or https:// URL\n")
        let list = try vcache(["prefetch", "-i", dir.file("list.txt")])
        #expect(list.stderr.contains("vcache: \(dir.file("list.txt")):3: not an http(s) URL: 'http:***@\(hostPort)'; line skipped\n"), "\(list.stderr)")
        let checked = try vcache(["check", spellings[0]])
        #expect(checked.stdout.contains("http://alice:***@\(hostPort)"), "\(checked.stdout)")
    }

    @Test func aBadLineOfAHeaderFileIsNamedByItsNumberNeverShown() throws {
        let url = "http://127.0.0.1:9/v.mp4"
        let file = try dir.write("h.txt", Data("# tokens\nX-Device: kiosk\nAuthorization Bearer SECRET1\n".utf8))
        let noColon = try vcache(["prefetch", url, "-H", "@" + file])
        #expect(noColon.status == 2)
        #expect(noColon.stderr == "vcache: invalid header on line 3 of '\(file)' for -H @FILE; use 'Name: value' (a header name, then a colon)\n")
        let control = try dir.write("c.txt", Data("Authorization: Bearer SECRET2\u{1B}[2J\n".utf8))
        let withControl = try vcache(["prefetch", url, "-H", "@" + control, "--json"])
        #expect(withControl.status == 2)
        #expect(withControl.stderr == "vcache: invalid header on line 1 of '\(control)' for -H @FILE: it holds a control character (such as NUL or ESC); remove it\n")
        let range = try dir.write("r.txt", Data("\nRange: bytes=0-SECRET3\n".utf8))
        let ranged = try vcache(["prefetch", url, "-H", "@" + range])
        #expect(ranged.stderr.hasSuffix("drop the Range header on line 2 of '\(range)'\n"), "\(ranged.stderr)")
        let all = noColon.stderr + withControl.stdout + withControl.stderr + ranged.stderr
        #expect(!all.contains("SECRET"))
        // On the command line the value is the user's own, and shown.
        let inline = try vcache(["prefetch", url, "-H", "Authorization Bearer x"])
        #expect(inline.stderr == "vcache: invalid header 'Authorization Bearer x' for -H; use 'Name: value'\n")
    }
}
