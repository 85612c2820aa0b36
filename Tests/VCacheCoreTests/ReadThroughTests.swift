import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// ReadThrough in-process: what it keeps per entry stays bounded.
@Suite struct ReadThroughTests {
    /// A web page can make the proxy open endless distinct URLs: the boards kept for them are
    /// forgotten once idle, down to a few hundred.
    @Test(.timeLimit(.minutes(5)))
    func boardsDoNotGrowWithEveryURLEverAskedFor() throws {
        let origin = try TestOrigin()
        let cache = try TestCache()
        let readThrough = ReadThrough(store: cache.store, options: TestCache.fastOptions())
        for i in 0..<700 {
            // 404s: nothing is stored, but each URL is opened.
            #expect(throws: ReadThrough.OpenError.self) { try readThrough.open(origin.url("/missing-\(i).mp4")) }
        }
        #expect(readThrough.boardCount <= 2 * 256, "\(readThrough.boardCount) boards for 700 URLs")
    }
}
