import Foundation
import Testing
import VCacheCore
import VCacheTestSupport
@testable import vcache

/// Docs/json.md is the contract of every `--json` line: this runs every command that has
/// `--json` through the events it can produce and checks each line against the document's tables.
@Suite struct JSONSchemaTests {
    let dir = TempDirectory("vcache-json")
    var cache: String { dir.file("cache") }

    /// One documented event: its keys, their types, and which are required.
    struct EventSchema {
        var keys: [String: (type: String, required: Bool)] = [:]
    }

    /// The tables of Docs/json.md: the envelope, error kinds, and the events of each command
    /// (`every command` applies to all).
    struct Schema {
        var envelope: [String: String] = [:]
        var errorKeys: [String: (type: String, required: Bool)] = [:]
        var kinds: Set<String> = []
        var events: [String: [String: EventSchema]] = [:]

        init(markdown: String) {
            var section = "", command = "", event = ""
            for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
                if line.hasPrefix("## ") { section = String(line.dropFirst(3)); command = ""; event = ""; continue }
                if line.hasPrefix("### ") { command = String(line.dropFirst(4)); event = ""; continue }
                if line.hasPrefix("#### ") { event = line.dropFirst(5).trimmingCharacters(in: CharacterSet(charactersIn: "`")); continue }
                guard line.hasPrefix("| `") else { continue }
                let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
                let name = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                switch section {
                case "The envelope": envelope[name] = cells[1]
                case "The error object": errorKeys[name] = (cells[1], cells[2] == "yes")
                case "Error kinds": kinds.insert(name)
                case "Events" where !event.isEmpty:
                    events[command, default: [:]][event, default: EventSchema()].keys[name] = (cells[1], cells[2] == "yes")
                default: break
                }
            }
        }

        func schema(command: String, event: String) -> EventSchema? {
            events[command]?[event] ?? events["every command"]?[event]
        }
    }

    /// The problems of one line, as sentences; none when it matches the document.
    static func problems(_ line: String, command: String, schema: Schema) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            return ["not a JSON object: \(line)"]
        }
        var out: [String] = []
        for (key, type) in schema.envelope {
            guard let v = object[key] else { out.append("no envelope key '\(key)': \(line)"); continue }
            if !matches(v, type) { out.append("envelope '\(key)' is not \(type): \(line)") }
        }
        if object["schema"] as? Int != 1 { out.append("schema is not 1: \(line)") }
        if object["command"] as? String != command { out.append("command is not \(command): \(line)") }
        guard let event = object["event"] as? String, let es = schema.schema(command: command, event: event) else {
            return out + ["event not documented for \(command): \(line)"]
        }
        for (key, value) in object where schema.envelope[key] == nil {
            guard let spec = es.keys[key] else { out.append("\(command) \(event): key '\(key)' not documented"); continue }
            if !matches(value, spec.type) { out.append("\(command) \(event): '\(key)' is not \(spec.type): \(line)") }
            if spec.type == "error", let e = value as? [String: Any] { out += errorProblems(e, schema: schema, line: line) }
        }
        for (key, spec) in es.keys where spec.required && object[key] == nil {
            out.append("\(command) \(event): required key '\(key)' missing: \(line)")
        }
        // Error objects nested in a summary's failures follow the same rules.
        for f in object["failures"] as? [[String: Any]] ?? [] {
            if let e = f["error"] as? [String: Any] { out += errorProblems(e, schema: schema, line: line) } else { out.append("a failure without an error: \(line)") }
        }
        return out
    }

    static func errorProblems(_ e: [String: Any], schema: Schema, line: String) -> [String] {
        var out: [String] = []
        for (key, value) in e {
            guard let spec = schema.errorKeys[key] else { out.append("error key '\(key)' not documented: \(line)"); continue }
            if !matches(value, spec.type) { out.append("error '\(key)' is not \(spec.type): \(line)") }
        }
        for (key, spec) in schema.errorKeys where spec.required && e[key] == nil { out.append("error key '\(key)' missing: \(line)") }
        if let kind = e["kind"] as? String, !schema.kinds.contains(kind) { out.append("error kind '\(kind)' not documented: \(line)") }
        return out
    }

    static func matches(_ value: Any, _ type: String) -> Bool {
        switch type {
        case "string": return value is String
        case "time":
            guard let s = value as? String else { return false }
            return s.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$"#, options: .regularExpression) != nil
        case "boolean": return (value as? NSNumber).map { String(cString: $0.objCType) == "c" } ?? false
        case "integer":
            guard let n = value as? NSNumber, !matches(value, "boolean") else { return false }
            return n.doubleValue == n.doubleValue.rounded()
        case "number": return value is NSNumber && !matches(value, "boolean")
        case "array": return value is [Any]
        case "object", "error": return value is [String: Any]
        default: return false
        }
    }

    /// Every line of a run's stdout, checked; returns the events seen.
    func check(_ r: VCacheRun, command: String, schema: Schema, _ seen: inout Set<String>,
               sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        var objects: [[String: Any]] = []
        for line in r.stdout.split(separator: "\n").map(String.init) {
            let problems = Self.problems(line, command: command, schema: schema)
            #expect(problems.isEmpty, "\(problems)", sourceLocation: sourceLocation)
            if let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] {
                objects.append(o)
                if let e = o["event"] as? String { seen.insert("\(command) \(e)") }
            }
        }
        #expect(!objects.isEmpty, "no JSON from \(command): \(r.stderr)", sourceLocation: sourceLocation)
        return objects
    }

    /// The hand-written encoder (JSONSerialization's sorted keys were too slow) against the parser.
    @Test func theEncoderWritesWhatAParserReadsBack() throws {
        let nasty = "quote \" backslash \\ newline \n tab \t bell \u{07} nul \u{00} é 🎬 /path"
        let object: [String: Any] = ["s": nasty, "i": 42, "big": Int64(1) << 40, "neg": -7, "d": 0.125, "whole": 2.0,
                                     "t": true, "f": false, "null": NSNull(), "a": [1, "two", [3]] as [Any],
                                     "o": ["z": 1, "a": [[0, 65535]] as [[Int64]]] as [String: Any], "B": 1, "é": 2]
        let line = JSONLines.encode(object)
        #expect(!line.contains("\n"))
        let back = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(back["s"] as? String == nasty)
        #expect(back["i"] as? Int == 42 && back["big"] as? Int64 == 1 << 40 && back["neg"] as? Int == -7)
        #expect(back["d"] as? Double == 0.125 && back["whole"] as? Double == 2)
        #expect(Self.matches(back["t"]!, "boolean") && back["t"] as? Bool == true && back["f"] as? Bool == false)
        #expect(Self.matches(back["i"]!, "integer") && !Self.matches(back["i"]!, "boolean"))
        #expect(back["null"] is NSNull)
        #expect(((back["o"] as? [String: Any])?["a"] as? [[Int]]) == [[0, 65535]])
        // Keys in byte order, so lines diff cleanly.
        #expect(line.hasPrefix(#"{"B":1,"a":[1,"two",[3]],"big":"#))
        #expect(line.hasSuffix(#","é":2}"#))
    }

    @Test(.requires(.prlimit))
    func everyJSONLineOfEveryCommandMatchesDocsJSON() throws {
        let schema = Schema(markdown: try String(contentsOfFile: Fixtures.directory + "/../../Docs/json.md", encoding: .utf8))
        #expect(schema.envelope.count == 4 && schema.kinds.count > 20 && schema.events.count == 10, "the parser lost a table")
        var seen = Set<String>()
        func run(_ args: [String], stdin: String? = nil) throws -> VCacheRun { try VCacheBinary.run(args, cacheDir: cache, stdin: stdin) }

        let origin = try TestOrigin()
        let video = try Fixtures.data("moov-at-front.mp4")
        origin.setResource("/v.mp4", .init(body: video, etag: "\"v1\""))
        origin.setResource("/w.mp4", .init(body: TestBytes.make(300_000, seed: 1), etag: "\"w1\""))
        var faults = TestOrigin.Faults()
        faults.statuses = [(429, ["Retry-After": "1"])]
        origin.setFaults("/w.mp4", faults)
        let v = origin.url("/v.mp4"), w = origin.url("/w.mp4"), gone = origin.url("/gone.mp4")

        // prefetch: start, progress, trace (-v), retry, done, failed (404), error (a bad list line), summary.
        let list = dir.file("urls.txt")
        try "\(v) 2s\n\(w) 100K\n\(gone)\nftp://example/x.mp4\n".write(toFile: list, atomically: true, encoding: .utf8)
        let batch = try run(["prefetch", "--json", "-v", "-i", list])
        #expect(batch.status == 4)
        let events = check(batch, command: "prefetch", schema: schema, &seen)
        let failed = try #require(events.first { $0["event"] as? String == "failed" })
        #expect((failed["error"] as? [String: Any])?["kind"] as? String == "http")
        #expect((failed["error"] as? [String: Any])?["http_status"] as? Int == 404)
        let bad = try #require(events.first { $0["event"] as? String == "error" })
        #expect((bad["error"] as? [String: Any])?["kind"] as? String == "bad_input")
        #expect(events.last?["event"] as? String == "summary")
        #expect(events.last?["exit_code"] as? Int == 4)

        // changed: a new version on the origin; evicted: a cap the run must make room under.
        origin.setResource("/w.mp4", .init(body: TestBytes.make(300_000, seed: 2), etag: "\"w2\""))
        _ = check(try run(["prefetch", "--json", w, "--max-size", "310K"]), command: "prefetch", schema: schema, &seen)

        // waiting: another process writes the entry.
        origin.setResource("/slow.mp4", .init(body: TestBytes.make(1 << 20, seed: 3)))
        origin.throttle("/slow.mp4", to: 1 << 20)
        let writer = try VCacheBinary.start(["prefetch", "-q", origin.url("/slow.mp4")], cacheDir: cache)
        #expect(origin.waitUntilServed("/slow.mp4", atLeast: 128 << 10))
        let waited = try run(["prefetch", "--json", origin.url("/slow.mp4")])
        _ = writer.finish()
        #expect(waited.status == 0)
        _ = check(waited, command: "prefetch", schema: schema, &seen)
        // stopped: the --max-time deadline (planned: counted apart from failures).
        origin.setResource("/deadline.mp4", .init(body: TestBytes.make(2 << 20, seed: 4)))
        origin.throttle("/deadline.mp4", to: 256 << 10)
        let deadline = try run(["prefetch", "--json", origin.url("/deadline.mp4"), "--max-time", "1s"])
        #expect(deadline.status == 3)
        let stops = check(deadline, command: "prefetch", schema: schema, &seen)
        #expect(stops.contains { $0["event"] as? String == "stopped" })
        #expect(stops.last?["stopped"] as? Int == 1 && stops.last?["failed"] as? Int == 0)
        let refetched = try run(["prefetch", "-q", v])
        #expect(refetched.status == 0, "\(refetched.stderr)")

        // A stream (ls lists it as one `stream` event).
        origin.setResource("/s/index.m3u8", .init(body: HLSHostileOriginTests.playlist(["a.ts", "b.ts"]), contentType: "application/vnd.apple.mpegurl"))
        for (i, name) in ["a.ts", "b.ts"].enumerated() {
            origin.setResource("/s/" + name, .init(body: HLSHostileOriginTests.ts(20, seed: UInt64(i)), contentType: "video/mp2t"))
        }
        #expect(try run(["prefetch", "-q", origin.url("/s/index.m3u8")]).status == 0)

        // ls, info, evict, verify, export.
        #expect(try run(["pin", v]).status == 0)
        _ = check(try run(["ls", "--json", "--ranges", "--max-size", "1G"]), command: "ls", schema: schema, &seen)
        let info = check(try run(["info", v, "--json"]), command: "info", schema: schema, &seen)
        #expect(info.first?["mp4"] != nil)
        let stream = check(try run(["info", origin.url("/s/index.m3u8"), "--json"]), command: "info", schema: schema, &seen)
        #expect(stream.first?["event"] as? String == "stream")
        let folder = check(try run(["export", origin.url("/s/index.m3u8"), dir.file("stream"), "--json"]), command: "export", schema: schema, &seen)
        #expect(folder.first?["files"] as? Int == 3, "\(folder)")
        _ = check(try run(["verify", "--json"]), command: "verify", schema: schema, &seen)
        let out = dir.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        _ = check(try run(["export", v, out + "/v.mp4", "--faststart", "--json"]), command: "export", schema: schema, &seen)
        let again = try run(["export", v, out + "/v.mp4", "--json"])
        #expect(again.status == 1)
        let refused = check(again, command: "export", schema: schema, &seen)
        #expect(((refused.first { $0["event"] as? String == "failed" })?["error"] as? [String: Any])?["kind"] as? String == "exists")
        _ = check(try run(["evict", "--all", "--dry-run", "--json"]), command: "evict", schema: schema, &seen)
        _ = check(try run(["evict", "--all", "--json"]), command: "evict", schema: schema, &seen)

        // A bad command line with --json is an error event too.
        let usage = try run(["ls", "--sort", "age", "--json"])
        #expect(usage.status == 2)
        let usageEvents = check(usage, command: "ls", schema: schema, &seen)
        #expect((usageEvents.first?["error"] as? [String: Any])?["kind"] as? String == "usage")

        // serve: listening, request, reloaded, stopping (the notify socket says when the reload is done).
        let notify = try NotifySocket(path: dir.file("notify.sock"))
        let serve = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--json"], environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        kill(serve.process.pid, SIGHUP)
        #expect(notify.receive()?.hasPrefix("RELOADING=1") == true && notify.receive() == "READY=1")
        let get = try Tool.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-r", "0-99", serve.url(v)])
        #expect(get.status == 0)
        // check: one ready, one absent.
        _ = check(try run(["check", v, gone, "--json"]), command: "check", schema: schema, &seen)
        // status, with serve's counters in it.
        let status = check(try run(["status", "--port", "\(serve.port)", "--json"]), command: "status", schema: schema, &seen)
        #expect(((status.first?["serve"] as? [String: Any])?["responses_by_cache"] as? [String: Any])?["hit"] as? Int == 1)
        #expect(serve.stop().signalled)
        let lines = serve.stdoutLines
        _ = check(VCacheRun(status: 0, stdout: lines.joined(separator: "\n"), stderr: "", signalled: false), command: "serve", schema: schema, &seen)
        let request = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["event"] as? String == "request" }
        #expect(request?["http_status"] as? Int == 206)
        #expect(request?["from_cache_bytes"] as? Int == 100)
        // serve: turned_away, a player past the connection table (200 descriptors: 17 places),
        // filled with idle connections (held by --header-timeout).
        let full = try ServeProcess(cacheDir: cache, logDir: dir, arguments: ["--json", "--header-timeout", "120s"],
                                    launcher: ["/usr/bin/prlimit", "--nofile=200:200"])
        let held = (0...Int(HTTPServer.connectionLimit(descriptors: 200))).map { _ in Sockets.connectLoopback(full.port) }
        defer { for fd in held where fd >= 0 { close(fd) } }
        let turnedAwayBy = ContinuousClock.now + .seconds(30)
        while !full.stdoutLines.contains(where: { $0.contains("\"turned_away\"") }) && ContinuousClock.now < turnedAwayBy {
            usleep(20_000)  // polling serve's output: the last connection is turned away when accepted
        }
        #expect(full.stop().signalled)
        _ = check(VCacheRun(status: 0, stdout: full.stdoutLines.joined(separator: "\n"), stderr: "", signalled: false), command: "serve", schema: schema, &seen)

        // Every documented event was produced.
        var documented = Set<String>()
        for (command, events) in schema.events where command != "every command" {
            for e in events.keys { documented.insert("\(command) \(e)") }
        }
        // (`note` comes only where a test video's boxes do not add up; serve's `store_failed`
        // only from a failing disk, and `catalog_replaced` only after a catalog repair, ServeDiskFaultTests.)
        #expect(documented.subtracting(seen).subtracting(["prefetch note", "serve store_failed", "serve catalog_replaced"]).isEmpty, "documented but not produced: \(documented.subtracting(seen).sorted())")
    }
}
