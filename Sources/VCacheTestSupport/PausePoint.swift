import Foundation

/// A pause point in a vcache process (debug builds): the process stops at `name`, creates
/// `<prefix>.reached` and waits for `<prefix>.go`. A test waits for it, acts (kills it, races
/// it), then releases it: the moment is exact, not guessed with a sleep.
public struct PausePoint {
    public let name: String
    public let prefix: String

    public init(_ name: String, in dir: TempDirectory) {
        self.name = name
        prefix = dir.file("pause-\(name)")
    }

    /// The environment that arms it in a child process.
    public var environment: [String: String] { ["VCACHE_TEST_PAUSE": "\(name):\(prefix)"] }

    /// The environment that arms all of `points` in one child process.
    public static func environment(_ points: [PausePoint]) -> [String: String] {
        ["VCACHE_TEST_PAUSE": points.map { "\($0.name):\($0.prefix)" }.joined(separator: "\n")]
    }

    /// Polls for the marker file (every 5 ms) until it exists or `timeout` passes.
    public func waitUntilReached(timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !FileManager.default.fileExists(atPath: prefix + ".reached") {
            if Date() >= deadline { return false }
            usleep(5_000)
        }
        return true
    }

    public func release() { _ = FileManager.default.createFile(atPath: prefix + ".go", contents: nil) }
}
