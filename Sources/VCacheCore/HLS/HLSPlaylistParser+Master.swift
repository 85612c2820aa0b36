/// The master playlist tags (RFC 8216 §4.3.4), from their attribute lists.
extension HLSPlaylistParser {
    /// §4.3.4.2; the URI comes on the next line.
    static func variant(_ a: HLSAttributeList) throws(HLSParseError) -> HLSMasterPlaylist.Variant {
        HLSMasterPlaylist.Variant(
            uri: "", rawURI: "", line: a.line,
            bandwidth: try a.required(try a.integer("BANDWIDTH"), "BANDWIDTH"),
            averageBandwidth: try a.integer("AVERAGE-BANDWIDTH"),
            resolution: try a.resolution("RESOLUTION"),
            codecs: a.string("CODECS"),
            frameRate: try a.decimal("FRAME-RATE"),
            audio: a.string("AUDIO"), video: a.string("VIDEO"), subtitles: a.string("SUBTITLES"),
            closedCaptions: a.string("CLOSED-CAPTIONS"))
    }

    /// §4.3.4.1: TYPE, GROUP-ID and NAME are REQUIRED.
    static func rendition(_ a: HLSAttributeList, base: String) throws(HLSParseError) -> HLSMasterPlaylist.Rendition {
        let type: HLSMasterPlaylist.MediaType
        switch try a.required(a.enumerated("TYPE"), "TYPE") {
        case "AUDIO": type = .audio
        case "VIDEO": type = .video
        case "SUBTITLES": type = .subtitles
        case "CLOSED-CAPTIONS": type = .closedCaptions
        case let other: type = .other(other)
        }
        return HLSMasterPlaylist.Rendition(
            type: type,
            groupID: try a.required(a.string("GROUP-ID"), "GROUP-ID"),
            name: try a.required(a.string("NAME"), "NAME"),
            language: a.string("LANGUAGE"),
            isDefault: try a.flag("DEFAULT") ?? false,
            autoselect: try a.flag("AUTOSELECT") ?? false,
            uri: a.string("URI").map { HLSURI.resolve($0, against: base) },
            line: a.line)
    }

    /// §4.3.4.3: URI and BANDWIDTH are REQUIRED.
    static func iFrameStream(_ a: HLSAttributeList, base: String) throws(HLSParseError) -> HLSMasterPlaylist.IFrameStream {
        HLSMasterPlaylist.IFrameStream(
            uri: HLSURI.resolve(try a.required(a.string("URI"), "URI"), against: base),
            line: a.line,
            bandwidth: try a.required(try a.integer("BANDWIDTH"), "BANDWIDTH"),
            resolution: try a.resolution("RESOLUTION"),
            codecs: a.string("CODECS"))
    }
}
