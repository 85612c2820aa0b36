#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Asks origins whether each video is still the version cached, for `verify --origin`: a
/// conditional request (`If-None-Match` with the stored ETag, else `If-Modified-Since`) for one
/// byte (`Range: bytes=0-0`). 304 means unchanged; otherwise the answer's validators are
/// compared. Runs the probes together on one fetch loop.
public enum OriginProbe {
    public enum Answer: Equatable, Sendable {
        case unchanged
        case validators(Validators)
        case failed(String)
    }

    public static func probe(_ urls: [String], known: [Validators], options: RequestOptions = RequestOptions(), concurrency: Int = 8) -> [Answer] {
        probeWithTypes(urls, known: known, options: options, concurrency: concurrency).map(\.answer)
    }

    /// `probe`, with each answer's Content-Type (serve's read-through when nothing of a resource
    /// can be stored: an MPD is still known by it).
    public static func probeWithTypes(_ urls: [String], known: [Validators], options: RequestOptions = RequestOptions(), concurrency: Int = 8) -> [(answer: Answer, contentType: String?)] {
        let fetcher = Fetcher()
        var answers = [(answer: Answer, contentType: String?)?](repeating: nil, count: urls.count)
        var next = 0
        var running = 0
        var probes: [Probe] = []
        func launch() {
            while next < urls.count && running < concurrency {
                let i = next
                next += 1
                running += 1
                let p = Probe { answer, type in
                    answers[i] = (answer, type)
                    running -= 1
                    fetcher.after(0) { launch() }
                }
                probes.append(p)
                var o = options
                if let header = known[i].conditionalHeader { o.headers.append(header) }
                do {
                    let t = try CurlTransfer(url: urls[i], range: "0-0", ifRange: nil, options: o, delegate: p)
                    fetcher.add(t)
                } catch {
                    p.done(.failed("\(error)"), nil)
                }
            }
        }
        launch()
        fetcher.run()
        // Each probe's closure holds `launch`, which holds `probes`: clearing them breaks that
        // cycle, so the fetch loop (a multi handle and its sockets) is freed (serve leaked two
        // descriptors per probe).
        probes.removeAll()
        return answers.map { $0 ?? (.failed("not probed"), nil) }
    }

    final class Probe: TransferDelegate {
        let done: (Answer, String?) -> Void
        private var answer: Answer?
        private var contentType: String?
        init(done: @escaping (Answer, String?) -> Void) { self.done = done }

        func transferDidReceiveHead(_ transfer: CurlTransfer, head: ResponseHead) -> HeadDecision {
            contentType = head.contentType
            switch head.status {
            case 304:
                answer = .unchanged
            case 206:
                answer = .validators(Validators(length: head.contentRange?.complete, etag: head.etag, lastModified: head.lastModified))
            case 200:
                answer = .validators(Validators(length: head.contentLength, etag: head.etag, lastModified: head.lastModified))
            default:
                answer = .failed(PrefetchError.http(status: head.status, reason: head.reason).description)
            }
            return .stop
        }

        func transferDidReceive(_ transfer: CurlTransfer, bytes: UnsafeRawBufferPointer) -> Bool { false }

        func transferDidComplete(_ transfer: CurlTransfer, head: ResponseHead?, error: TransportError?) {
            done(answer ?? .failed(error?.description ?? "no answer"), contentType)
        }
    }
}
