import Testing
import VCacheCore

@Suite struct ExportNameTests {
    let key = String(repeating: "ab", count: 32)

    @Test func theLastPathSegmentIsUsedWithItsExtension() {
        #expect(Exporter.fileName(for: "https://cdn.example/v/Big%20Buck.mp4?token=1", key: key) == "Big Buck.mp4")
    }

    @Test(arguments: [
        "http://h/..%2F..%2Fetc%2Fpasswd", "http://h/a/%2e%2e", "http://h/..", "http://h/", "http://h/%00%01evil%0A.mp4",
        "http://h/x%5C..%5C..%5Cwin.mp4", "http://h/.hidden.mp4", "http://h/%20.mp4", "http://h/%20.%20.%20x", "http://h/%E2%80%83.mp4",
    ])
    func hostileNamesCannotLeaveTheFolder(url: String) {
        let name = Exporter.fileName(for: url, key: key)
        #expect(!name.contains("/"))
        #expect(!name.contains("\\"))
        #expect(!name.hasPrefix("."))
        #expect(name != ".." && !name.isEmpty)
        #expect(!name.unicodeScalars.contains { $0.value < 0x20 })
    }

    @Test func aLongNameIsBoundedAndKeepsItsExtension() {
        let name = Exporter.fileName(for: "http://h/" + String(repeating: "x", count: 500) + ".mp4", key: key)
        #expect(name.utf8.count <= 200)
        #expect(name.hasSuffix(".mp4"))
    }

    @Test func nothingUsableFallsBackToTheKey() {
        #expect(Exporter.fileName(for: "http://h/", key: key) == "video-abababababab.mp4")
        #expect(Exporter.fileName(for: "http://h/...", key: key) == "video-abababababab.mp4")
        // Issue 32: a name that is blanks and an extension was exported as the hidden `.mp4.mp4`.
        #expect(Exporter.fileName(for: "http://h/v/%20.mp4", key: key) == "video-abababababab.mp4")
        #expect(Exporter.fileName(for: "http://h/%20.%20.mov", key: key) == "video-abababababab.mov")
        #expect(Exporter.fileName(for: "http://h/%20..%20.hidden.mkv", key: key) == "hidden.mkv")
        #expect(Exporter.fileName(for: "http://h/.mp4", key: key) == "video-abababababab.mp4")
    }
}
