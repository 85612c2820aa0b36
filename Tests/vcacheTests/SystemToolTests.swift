import Foundation
import Testing
import VCacheCore
import VCacheTestSupport

/// vcache as a system tool: completion and the man page come from the same declarations as parsing.
@Suite struct SystemToolTests {
    let dir = TempDirectory("vcache-tool")

    /// Runs the generated bash completion for the words typed and returns its suggestions.
    func complete(_ words: [String]) throws -> [String] {
        let script = try VCacheBinary.run(["completion", "bash"], cacheDir: nil).stdout
        let file = try dir.write("completion.bash", Data(script.utf8))
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let r = try Tool.run("/bin/bash", ["-c", "source '\(file)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _vcache; printf '%s\\n' \"${COMPREPLY[@]}\""])
        #expect(r.status == 0, "\(r.err)")
        return String(decoding: r.out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesCommandsOptionsAndChoices() throws {
        #expect(try complete(["vcache", "pre"]) == ["prefetch"])
        #expect(try complete(["vcache", "prefetch", "--by"]) == ["--bytes"])
        #expect(try complete(["vcache", "ls", "--sort", ""]) == ["lru", "size", "url"])
        #expect(try complete(["vcache", "serve", "--al"]) == ["--allow-host"])
        // After global options, in the positions of config, completion and help.
        #expect(try complete(["vcache", "--cache-dir", "/tmp", "ls", "--so"]) == ["--sort"])
        #expect(try complete(["vcache", "-q", "pre"]) == ["prefetch"])
        #expect(try complete(["vcache", "config", ""]) == ["get", "set", "unset"])
        #expect(try complete(["vcache", "config", "set", "max"]) == ["max-size"])
        #expect(try complete(["vcache", "completion", ""]) == ["bash", "zsh", "fish"])
        #expect(try complete(["vcache", "help", "ver"]) == ["verify"])
    }

    @Test func zshAndFishScriptsAreGeneratedAndLoad() throws {
        let zsh = try VCacheBinary.run(["completion", "zsh"], cacheDir: nil)
        #expect(zsh.stdout.hasPrefix("#compdef vcache\n"))
        let fish = try VCacheBinary.run(["completion", "fish"], cacheDir: nil)
        #expect(fish.stdout.contains("complete -c vcache -n '__fish_seen_subcommand_from ls' -l sort -x -a 'lru size url'"))
        #expect(try VCacheBinary.run(["completion", "tcsh"], cacheDir: nil).status == 2)
    }

    /// zsh and fish parse the scripts vcache generates for them (`-n`: read, not run).
    @Test(.requires(.tool("/usr/bin/zsh", "zsh"), .tool("/usr/bin/fish", "fish")))
    func zshAndFishParseTheirScripts() throws {
        for shell in ["zsh", "fish"] {
            let script = try VCacheBinary.run(["completion", shell], cacheDir: nil)
            let file = try dir.write("c." + shell, Data(script.stdout.utf8))
            let parsed = try Tool.run("/usr/bin/" + shell, ["-n", file])
            #expect(parsed.status == 0, "\(shell): \(parsed.err)")
        }
    }

    @Test func theManPageRendersWithoutWarningsAndNamesEveryOption() throws {
        let page = try VCacheBinary.run(["manpage"], cacheDir: nil).stdout
        let file = try dir.write("vcache.1", Data(page.utf8))
        let groff = try Tool.run("/usr/bin/groff", ["-ww", "-man", "-z", file])
        #expect(groff.status == 0 && groff.err.isEmpty, "\(groff.err)")
        let text = try Tool.run("/usr/bin/groff", ["-man", "-Tutf8", "-P", "-cbou", file])
        let rendered = String(decoding: text.out, as: UTF8.self)
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"] {
            #expect(rendered.contains(section), "no section \(section)")
        }
        // Every option every command's --help shows appears in the man page.
        let overview = try VCacheBinary.run(["--help"], cacheDir: nil).stdout
        let commands = overview.split(separator: "\n").drop { !$0.hasPrefix("commands:") }.dropFirst()
            .prefix { $0.hasPrefix("  ") }.compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.count >= 10)
        var missing: [String] = []
        for c in commands {
            let help = try VCacheBinary.run([c, "--help"], cacheDir: nil).stdout
            let words = help.split(whereSeparator: { " \n,|[]()".contains($0) }).filter { $0.hasPrefix("--") }
            for option in words where !rendered.contains(String(option)) { missing.append("\(c) \(option)") }
        }
        #expect(missing.isEmpty, "not in the man page: \(missing)")
    }

    /// The files `make install` puts under DESTDIR (from the binary under test; `.ci/run` runs the
    /// real release install and checks it runs with no toolchain), and `make uninstall` removes.
    @Test func installPutsTheBinaryManPageAndCompletionsUnderDestdirAndUninstallRemovesThem() throws {
        let root = dir.file("root")
        let top = Fixtures.directory + "/../.."
        let make = try Tool.run("/usr/bin/make", ["-C", top, "install-files", "BIN=\(VCacheBinary.path)", "DESTDIR=\(root)", "PREFIX=/usr"])
        #expect(make.status == 0, "\(make.err)")
        for f in ["usr/bin/vcache", "usr/share/man/man1/vcache.1", "usr/share/bash-completion/completions/vcache",
                  "usr/share/zsh/site-functions/_vcache", "usr/share/fish/vendor_completions.d/vcache.fish",
                  "usr/lib/systemd/system/vcache-serve.service", "usr/lib/systemd/system/vcache-warmup.service",
                  "usr/lib/systemd/system/vcache-warmup.timer", "usr/share/doc/vcache/urls.txt.example"] {
            #expect(FileManager.default.fileExists(atPath: root + "/" + f), "\(f) not installed")
        }
        #expect(try Tool.run(root + "/usr/bin/vcache", ["--version"]).status == 0)
        #expect(try Tool.run("/usr/bin/make", ["-C", top, "uninstall", "DESTDIR=\(root)", "PREFIX=/usr"]).status == 0)
        let left = FileManager.default.enumerator(atPath: root)?.allObjects.compactMap { $0 as? String }
            .filter { !(FileSystem.status(root + "/" + $0).map { $0.st_mode & S_IFMT == S_IFDIR } ?? true) } ?? []
        #expect(left.isEmpty, "\(left)")
    }

    /// The shipped units pass `systemd-analyze verify` with nothing to say (it exits 0 even on an
    /// unknown key: its output is the verdict), and name the binary where the install put it.
    @Test(.requires(.tool("/usr/bin/systemd-analyze", "systemd")))
    func theShippedUnitsVerifyCleanlyAndStartTheInstalledBinary() throws {
        let analyze = "/usr/bin/systemd-analyze"
        let prefix = dir.file("prefix")
        let top = Fixtures.directory + "/../.."
        #expect(try Tool.run("/usr/bin/make", ["-C", top, "install-files", "BIN=\(VCacheBinary.path)", "PREFIX=\(prefix)"]).status == 0)
        let units = ["vcache-serve.service", "vcache-warmup.service", "vcache-warmup.timer"].map { prefix + "/lib/systemd/system/" + $0 }
        let r = try Tool.run(analyze, ["verify", "--man=no"] + units)
        #expect(r.status == 0 && r.err.isEmpty && r.out.isEmpty, "\(r.err)\(String(decoding: r.out, as: UTF8.self))")
        for unit in units where unit.hasSuffix(".service") {
            let text = try String(contentsOfFile: unit, encoding: .utf8)
            #expect(text.contains("ExecStart=\(prefix)/bin/vcache "), "\(unit)")
            #expect(text.contains("User=vcache") && text.contains("CacheDirectory=vcache") && text.contains("CacheDirectoryMode=2770"))
        }
    }
}
