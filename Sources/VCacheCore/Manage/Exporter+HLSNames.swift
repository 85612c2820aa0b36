/// The file name of an HLS stream member in a rewritten playlist (serve's proxy URL, an
/// export's local file; Docs/hls.md): the origin's own when its extension says what it is;
/// else its name with the extension of what it is, by its first bytes when cached, else by the
/// tag that names it (`HLSURIContext`). A URI of no known role is named as any file is.
extension Exporter {
    public static func memberFileName(for url: String, key: String, context: HLSURIContext, firstBytes: () -> [UInt8]?) -> String {
        var (stem, ext) = fileNameParts(for: url, key: key)
        guard !HLSURIContext.tellingExtensions.contains(ext.lowercased()),
              let chosen = context.fileExtension(firstBytes: firstBytes) else { return fileName(for: url, key: key) }
        if !ext.isEmpty { stem += "." + ext }
        while stem.utf8.count + chosen.utf8.count + 1 > 200 { stem.removeLast() }
        return stem + "." + chosen
    }
}
