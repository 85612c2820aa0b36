#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VCacheCore

/// `vcache manpage`: the man page vcache(1) in roff, generated from the commands' declarations
/// (`make` writes it to .build/vcache.1 and `make install` installs it).
enum ManPageCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "manpage",
        abstract: "print the man page vcache(1) (roff), generated from these declarations",
        usage: "manpage",
        minPositionals: 0, maxPositionals: 0)

    static func run(_ args: ParsedArguments<NoOptions>, console: Console) -> Int32 {
        console.out(page())
        return 0
    }

    /// roff-safe text: backslashes doubled, hyphens as \-, a leading dot or quote guarded.
    static func esc(_ t: String) -> String {
        var s = t.replacing("\\", with: "\\e").replacing("-", with: "\\-")
        if s.hasPrefix(".") || s.hasPrefix("'") { s = "\\&" + s }
        return s
    }

    /// "Every command takes --cache-dir, --json, -q, -v and --no-color, before or after its name."
    static var globalOptionsSentence: String {
        func list(_ names: [String]) -> String { names.dropLast().joined(separator: ", ") + (names.count > 1 ? " and " : "") + (names.last ?? "") }
        let names = CommandSpec.globalOptions.map { o in o.short.map { "-\($0)" } ?? "--" + o.long }
        return "Every command takes \(list(names)), before or after its name, with one meaning everywhere."
    }

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
        \(esc(globalOptionsSentence))
        .SH COMMANDS

        """
        for c in VCache.commands.map({ $0.spec }) {
            p += ".SS \"vcache \(esc(c.usage))\"\n\(esc(c.abstract)).\n"
            if !c.discussion.isEmpty { p += ".PP\n" + esc(c.discussion.replacing("\n", with: " ")) + "\n" }
            for o in c.allOptions {
                var tag = (o.short.map { "\\fB\\-\($0)\\fR, " } ?? "") + "\\fB\\-\\-\(esc(o.long))\\fR"
                if o.takesValue { tag += " \\fI\(esc(o.valueName))\\fR" }
                p += ".TP\n\(tag)\n\(esc(o.help))\n"
                // A choice's words, each with its help.
                if case .words(let words) = o.completion {
                    p += ".RS\n" + words.map { ".TP\n.B \(esc($0.value))\n\(esc($0.help))\n" }.joined() + ".RE\n"
                }
            }
        }
        // The settings `vcache config` keeps, one entry each (a table in a discussion would be
        // joined into one paragraph).
        p += ".SH CONFIGURATION\nSettings stored in the cache's catalog with \\fBvcache config set\\fR \\fINAME VALUE\\fR, read by every run:\n"
        for k in Settings.known { p += ".TP\n.B \(esc(k.name))\n\(esc(k.help))\n" }
        p += ".SH \"EXIT STATUS\"\n"
        for e in ExitStatus.all { p += ".TP\n.B \(e.codes.map(String.init).joined(separator: ", "))\n\(esc(e.meaning))\n" }
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
