import Foundation

/// Files under Tests/Fixtures (real MP4s made by ffmpeg; see its README.md).
public enum Fixtures {
    public static var directory: String {
        // Sources/VCacheTestSupport/Fixtures.swift -> repo root -> Tests/Fixtures
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures").path
    }

    public static func path(_ name: String) -> String { directory + "/" + name }

    public static func data(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path(name)))
    }
}
