#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A network namespace of the test's own with loopback only (`unshare -n`), and an nginx origin
/// inside it on 127.0.0.1:8080 serving `root`. Commands run inside with `run` (`nsenter -n`), so
/// nft rules and tc qdiscs on its `lo` touch nothing else on the machine, and no packet leaves
/// it. Root only: `skipReason` says why a test cannot have one (it then skips with that line).
///
/// The namespace lives as long as its holder (`unshare -n sleep`); `stop()` (or deinit) ends the
/// holder and nginx, which ends the namespace with its rules.
public final class NetNamespace: @unchecked Sendable {
    // Immutable after init; stop() is idempotent (a killed process that was already reaped is
    // simply not found again).
    public let root: String
    public let port = 8080
    private let dir: TempDirectory
    private let holder: Child
    private var nginx: Child?

    static let tools = ["unshare": "/usr/bin/unshare", "nsenter": "/usr/bin/nsenter", "ip": "/usr/sbin/ip", "nft": "/usr/sbin/nft",
                        "tc": "/usr/sbin/tc", "curl": "/usr/bin/curl"]

    /// Why no namespace can be had here, or nil (`Requirement.netNamespace` skips a test with it).
    public static var skipReason: String? {
        if getuid() != 0 { return "a network namespace with nft and tc needs root" }
        for (name, path) in tools.sorted(by: { $0.key < $1.key }) where !FileManager.default.isExecutableFile(atPath: path) {
            return "\(name) is not installed (\(path))"
        }
        if Nginx.binary == nil { return "nginx is not installed" }
        return nil
    }

    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Throws when one cannot be had here (`skipReason`): a test that got this far meant to run.
    public init() throws {
        if let why = Self.skipReason { throw Failed(description: "no network namespace: \(why)") }
        dir = TempDirectory("vcache-netns")
        root = dir.file("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.file("tmp"), withIntermediateDirectories: true)
        holder = try Child(Self.tools["unshare"]!, ["-n", "/bin/sleep", "3600"], stdout: .null, stderr: .null)
        // The namespace is the holder's once unshare has exec'd sleep (its exe is then sleep).
        var ready = false
        for _ in 0..<400 where holder.isRunning {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(holder.pid)/exe"), exe.hasSuffix("sleep") {
                ready = true
                break
            }
            usleep(5_000)
        }
        guard ready else { stop(); throw Failed(description: "unshare -n did not start (no CAP_SYS_ADMIN here?)") }
        // Linux gives a new namespace's lo a 64 KiB MTU; 1500 makes tc and packet counts realistic.
        try must("ip", ["link", "set", "lo", "mtu", "1500", "up"])
        // Byte counts on connections (for `ct reply bytes` rules), per namespace.
        _ = try? run("/usr/sbin/sysctl", ["-qw", "net.netfilter.nf_conntrack_acct=1"])
        try startNginx()
    }

    deinit { stop() }

    /// Runs `path` inside the namespace.
    @discardableResult
    public func run(_ path: String, _ args: [String]) throws -> (status: Int32, out: Data, err: String) {
        try Tool.run(Self.tools["nsenter"]!, ["-t", String(holder.pid), "-n", path] + args)
    }

    /// Runs one of `tools` inside the namespace; throws when it fails.
    public func must(_ tool: String, _ args: [String]) throws {
        let r = try run(Self.tools[tool] ?? tool, args)
        guard r.status == 0 else { throw Failed(description: "\(tool) \(args.joined(separator: " ")): \(r.err)") }
    }

    /// Loads nft rules (a whole table, in nft's file syntax).
    public func nft(_ rules: String) throws {
        let file = dir.file("rules-\(UInt32.random(in: 0...UInt32.max)).nft")
        try rules.write(toFile: file, atomically: true, encoding: .utf8)
        try must("nft", ["-f", file])
    }

    /// How `faultOnce` breaks a connection.
    public enum Fault: Sendable {
        /// The client's next packets get a TCP reset back (the client sees ECONNRESET).
        case reset
        /// Every packet of the connection vanishes from then on (the client stalls).
        case blackHole
    }

    /// Breaks the first connection to the origin whose reply crossed `bytes` (headers included),
    /// and only that one: its conntrack entry is marked once (`limit rate 1/hour burst 1 packets`),
    /// then the marked connection is reset or black-holed. Connections opened after it (a retry,
    /// the other members of a stream, the next run) pass, so a run meets exactly one fault, at a
    /// place the test chose. Lifted with `liftFaults()`.
    ///
    /// A reset rejects the client's next packet (its ACK) with an RST to the client; the data the
    /// origin had in flight still arrives first. With the kernel's default receive window (it
    /// grows to megabytes on loopback) that was at times the whole rest of a 510 kB segment, which
    /// then completed, so the run met no fault (CI, under load). The namespace's receive buffers
    /// are held to 64 KiB, so what is in flight at the mark is far less than what is left.
    public func faultOnce(after bytes: Int, _ fault: Fault) throws {
        try must("/usr/sbin/sysctl", ["-qw", "net.ipv4.tcp_rmem=4096 32768 65536"])
        let action = switch fault {
        case .reset: "tcp dport \(port) ct mark 0x2501 reject with tcp reset"
        case .blackHole: "ct mark 0x2501 drop"
        }
        try nft("""
            table inet vcachefault {
                chain input {
                    type filter hook input priority 0;
                    \(action)
                    tcp sport \(port) ct reply bytes gt \(bytes) ct mark 0 limit rate 1/hour burst 1 packets ct mark set 0x2501\(fault == .blackHole ? " drop" : "")
                }
            }
            """)
    }

    /// Slows what the origin sends (TCP from its port) to `rate` (tc's units: "8mbit"), and
    /// nothing else: a player reading from serve inside the namespace is not slowed. An htb
    /// class and a u32 filter (this kernel has tbf and htb, not prio or netem).
    public func slowOrigin(rate: String) throws {
        try must("tc", ["qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"])
        try must("tc", ["class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit", "quantum", "60000"])
        try must("tc", ["class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", rate, "ceil", rate, "burst", "16kb"])
        try must("tc", ["filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "sport", String(port), "0xffff", "flowid", "1:20"])
    }

    /// Removes `faultOnce`'s rules.
    public func liftFaults() throws { try must("nft", ["delete", "table", "inet", "vcachefault"]) }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// A command prefix that runs a program inside the namespace (nsenter execs it: same pid).
    public var launcher: [String] { [Self.tools["nsenter"]!, "-t", String(holder.pid), "-n"] }

    private func startNginx() throws {
        let d = dir.path
        let conf = """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(d)/nginx.pid;
        error_log \(d)/error.log warn;
        events { worker_connections 64; }
        http {
            access_log off;
            client_body_temp_path \(d)/tmp; proxy_temp_path \(d)/tmp; fastcgi_temp_path \(d)/tmp; uwsgi_temp_path \(d)/tmp; scgi_temp_path \(d)/tmp;
            types { video/mp4 mp4; application/vnd.apple.mpegurl m3u8; video/mp2t ts; }
            default_type application/octet-stream;
            sendfile on;
            server { listen 127.0.0.1:\(port); root \(root); }
        }
        """
        try conf.write(toFile: dir.file("nginx.conf"), atomically: true, encoding: .utf8)
        try "ok".write(toFile: root + "/ready", atomically: true, encoding: .utf8)
        let p = try Child(Self.tools["nsenter"]!, ["-t", String(holder.pid), "-n", Nginx.binary!, "-c", dir.file("nginx.conf"), "-p", d, "-e", dir.file("error.log")],
                          stdout: .null, stderr: .null)
        nginx = p
        // Listening once curl inside the namespace gets the ready file (bounded: 10 s).
        for _ in 0..<200 where p.isRunning {
            if try run(Self.tools["curl"]!, ["-sf", "-o", "/dev/null", "--max-time", "2", url("/ready")]).status == 0 { return }
            usleep(50_000)
        }
        let log = (try? String(contentsOfFile: dir.file("error.log"), encoding: .utf8)) ?? ""
        stop()
        throw Failed(description: "nginx did not start in the namespace: \(log)")
    }

    public func stop() {
        for p in [nginx, holder].compactMap({ $0 }) {
            p.kill(SIGKILL)
            p.wait()
        }
    }
}
