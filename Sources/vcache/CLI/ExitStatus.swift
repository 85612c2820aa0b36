/// vcache's exit codes, said once: the overview of `--help` and the man page's EXIT STATUS
/// come from this table (Docs/cli.md says the same at length, checked by a test).
struct ExitStatus: Sendable {
    var codes: [Int32]
    /// A few words, for `--help`.
    var brief: String
    /// A sentence, for the man page.
    var meaning: String

    static let all: [ExitStatus] = [
        ExitStatus(codes: [0], brief: "done", meaning: "Everything asked for was done."),
        ExitStatus(codes: [1], brief: "some item failed",
                   meaning: "Some item failed for another reason (a malformed line of a list; verify found a problem; export refused)."),
        ExitStatus(codes: [2], brief: "usage error", meaning: "Usage error or bad input; nothing was done."),
        ExitStatus(codes: [3], brief: "try again later",
                   meaning: "Try again later: the network, a busy origin (5xx, 408, 429), --max-time, a busy lock or catalog. The next run resumes."),
        ExitStatus(codes: [4], brief: "fix the origin or URL",
                   meaning: "Fix the origin or the URL: a 4xx, a wrong Content-Range, a file that cannot be mapped as MP4."),
        ExitStatus(codes: [5], brief: "fix this machine (disk, catalog)",
                   meaning: "Fix this machine: the disk (full, read-only, I/O errors) or a damaged catalog."),
        ExitStatus(codes: [130, 143], brief: "interrupted",
                   meaning: "Interrupted by SIGINT or SIGTERM after a clean checkpoint (vcache dies by the signal)."),
    ]

    /// The `exit codes:` lines of the overview, wrapped.
    static var overview: [String] {
        let items = all.map { $0.codes.map(String.init).joined(separator: "/") + " " + $0.brief }
        var lines = ["exit codes:"]
        for (n, item) in items.enumerated() {
            let word = " " + item + (n == items.count - 1 ? " (see Docs/cli.md)" : ",")
            if lines[lines.count - 1].count + word.count > 100 { lines.append(String(repeating: " ", count: 11)) }
            lines[lines.count - 1] += word
        }
        return lines
    }
}
