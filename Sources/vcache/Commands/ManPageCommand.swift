import Foundation
import VCacheCore

/// `vcache manpage`: the man page vcache(1) in roff, generated from the commands' declarations
/// (`make` writes it to .build/vcache.1 and `make install` installs it).
enum ManPageCommand: VCacheCommand {
    static let spec = CommandSpec(
        name: "manpage",
        abstract: "print the man page vcache(1) (roff), generated from these declarations",
        usage: "manpage",
        options: [],
        minPositionals: 0, maxPositionals: 0)

    static func run(_ args: ParsedArguments, console: Console) -> Int32 {
        console.out(page())
        return 0
    }

    /// roff-safe text: backslashes doubled, hyphens as \-, a leading dot or quote guarded.
    static func esc(_ t: String) -> String {
        var s = t.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if s.hasPrefix(".") || s.hasPrefix("'") { s = "\\&" + s }
        return s
    }

    static let exitCodes: [(String, String)] = [
        ("0", "Everything asked for was done."),
        ("1", "Some item failed for another reason (a malformed line of a list; verify found a problem; export refused)."),
        ("2", "Usage error or bad input; nothing was done."),
        ("3", "Try again later: the network, a busy origin (5xx, 408, 429), \\-\\-max\\-time, a busy lock or catalog. The next run resumes."),
        ("4", "Fix the origin or the URL: a 4xx, a wrong Content\\-Range, a file that cannot be mapped as MP4."),
        ("5", "Fix this machine: the disk (full, read\\-only, I/O errors) or a damaged catalog."),
        ("130, 143", "Interrupted by SIGINT or SIGTERM after a clean checkpoint (vcache dies by the signal)."),
    ]

    static func page() -> String {
        var p = """
        .TH VCACHE 1 "2026-11-23" "vcache \(VCacheVersion.string)" "User Commands"
        .SH NAME
        vcache \\- a sparse\\-range cache for MP4 over HTTP, with a local proxy for players
        .SH SYNOPSIS
        .B vcache
        .I COMMAND
        .RI [ options ]
        .br
        .B vcache \\-\\-version
        .SH DESCRIPTION
        vcache fetches byte ranges of videos over HTTP into a cache directory, remembers which
        ranges of each video are on disk, resumes exactly where it stopped, keeps the cache under a
        size cap by evicting the least recently used videos, hands complete files on, and serves
        players through a local proxy. It knows MP4: it can cache exactly what the first seconds of
        a video need. Every claimed byte is fsynced before it is recorded, so a crash never leaves
        a false claim.
        .PP
        Sizes: 512K, 2M, 1.5G (binary), 2MB (decimal). Durations: 30s, 5m, 12h, 7d, 1h30m.
        \\-\\-cache\\-dir and \\-\\-json may also come before the command, and so may \\-q and \\-v for the commands that take them.
        .SH COMMANDS

        """
        for c in VCache.commands.map({ $0.spec }) {
            p += ".SS \"vcache \(esc(c.usage))\"\n\(esc(c.abstract)).\n"
            if !c.discussion.isEmpty { p += ".PP\n" + esc(c.discussion.replacingOccurrences(of: "\n", with: " ")) + "\n" }
            for o in c.allOptions {
                var tag = (o.short.map { "\\fB\\-\($0)\\fR, " } ?? "") + "\\fB\\-\\-\(esc(o.long))\\fR"
                switch o.kind {
                case .flag: break
                case .value(let v), .repeated(let v): tag += " \\fI\(esc(v))\\fR"
                }
                p += ".TP\n\(tag)\n\(esc(o.help))\n"
            }
        }
        // The settings `vcache config` keeps, one entry each (a table in a discussion would be
        // joined into one paragraph).
        p += ".SH CONFIGURATION\nSettings stored in the cache's catalog with \\fBvcache config set\\fR \\fINAME VALUE\\fR, read by every run:\n"
        for k in Settings.known { p += ".TP\n.B \(esc(k.name))\n\(esc(k.help))\n" }
        p += ".SH \"EXIT STATUS\"\n"
        for (code, meaning) in exitCodes { p += ".TP\n.B \(code)\n\(meaning)\n" }
        p += """
        .SH ENVIRONMENT
        .TP
        .B VCACHE_DIR
        The cache directory when \\-\\-cache\\-dir is not given; else $XDG_CACHE_HOME/vcache, else ~/.cache/vcache.
        .TP
        .B VCACHE_CATALOG_TIMEOUT
        Seconds a catalog write waits for another process's transaction (default 30).
        .TP
        .B http_proxy, https_proxy, all_proxy, no_proxy
        Honoured by libcurl for origin requests (\\-\\-proxy overrides).
        .TP
        .B NO_COLOR
        No colour in the output.
        .SH FILES
        .TP
        .I ~/.cache/vcache/catalog.db
        The catalog (SQLite, WAL): every entry, its cached ranges, last use, pins and the config.
        .TP
        .I ~/.cache/vcache/entries/ab/KEY/data
        A video's bytes, each at its offset (a sparse file).
        .TP
        .I /var/cache/vcache
        The box's cache (the package): shared by the group vcache (mode 2770).
        .TP
        .I /etc/vcache/urls.txt
        What vcache\\-warmup.timer keeps cached, nightly.
        .TP
        .I vcache\\-serve.service, vcache\\-warmup.service, vcache\\-warmup.timer
        The proxy and the nightly warm-up as systemd units.
        .SH EXAMPLES
        Warm the first 10 seconds of every video in a list every night, at most 3 hours, 8 at a time:
        .PP
        .nf
        15 2 * * *  vcache prefetch \\-i /etc/vcache/urls.txt \\-j 8 \\-\\-seconds 10 \\-\\-max\\-time 3h >>/var/log/vcache.log 2>&1
        .fi
        .PP
        The same as a systemd timer: a service with
        .nf
        [Service]
        Type=oneshot
        ExecStart=/usr/bin/vcache prefetch \\-i /etc/vcache/urls.txt \\-j 8 \\-\\-seconds 10 \\-\\-max\\-time 3h
        .fi
        and a timer with
        .nf
        [Timer]
        OnCalendar=*\\-*\\-* 02:15:00
        Persistent=true
        .fi
        .PP
        Play through the cache:
        .PP
        .nf
        vcache serve &
        mpv "$(vcache url https://cdn.example/v/123.mp4)"
        .fi
        .SH "SEE ALSO"
        .BR curl (1),
        .BR mpv (1),
        .BR ffmpeg (1)

        """
        return p
    }
}
