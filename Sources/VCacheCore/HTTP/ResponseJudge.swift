#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
/// The response rules, in one pure value (invariants 2 and 3 of Docs/cache-format.md; RFC 9110 §13.1.5,
/// §14.4, §15.3.7): given what was asked, the validators of the bytes already held and a
/// response head, says where the response's body goes, or why none of it may be kept.
///
/// The rules:
/// - A 206 must start exactly where asked and end no later than asked (a shorter part is fine:
///   the rest is asked again); anything else is refused before a byte is written.
/// - Parts are combined with the bytes held only under the same strong validator: the same strong
///   ETag, or, when the origin sends no ETag at all, the same Last-Modified (vcache takes a
///   Last-Modified date as strong, as curl and browsers do). A changed length is always another
///   version. A weak ETag (or no validator) never proves two responses are one version; such
///   parts are combined only when `weakPartsCombine` (the held bytes came from this same run,
///   see `PrefetchJob`), and only while ETag, Last-Modified and length all stay the same.
/// - A 200 is the whole representation from byte 0: kept beside the held bytes only under the
///   same strong validator (an origin that ignores ranges), otherwise they are dropped first.
///   With no Content-Length, its length is the bytes received when the body ends cleanly.
/// - A 416 with `Content-Range: bytes */N` teaches the length (planning starts again).
/// - Any other status is refused with that status.
/// - When readers were promised a version (`promised`: serve's readers of the file a job writes
///   into, or the span a `DirectStream` relays), bytes of any other version are never accepted
///   as the same: an accept whose validators the promise does not admit becomes a replace.
/// - When the held bytes came with digests of the origin's (`held digests`), a response under the
///   same validators whose digest of the same algorithm differs is another version: a replace.
public struct ResponseJudge: Equatable, Sendable {
    /// What the request asked for: `start`/`end` (exclusive) in bytes, or the last `suffix` bytes.
    public struct Asked: Equatable, Sendable {
        public var spec: String
        public var start: Int64?
        public var end: Int64?
        public var suffix: Int64?

        public init(spec: String, start: Int64?, end: Int64?, suffix: Int64? = nil) {
            self.spec = spec
            self.start = start
            self.end = end
            self.suffix = suffix
        }

        /// Exactly the bytes of `range`.
        public init(_ range: ByteRange) {
            self.init(spec: range.httpSpec, start: range.lowerBound, end: range.upperBound)
        }
    }

    public enum Verdict: Equatable, Sendable {
        /// The same version: write the body at `offset`, at most up to `limit` (exclusive).
        case accept(offset: Int64, limit: Int64?, validators: Validators)
        /// Another version (or one not proven the same): drop every held byte, then accept.
        case replace(offset: Int64, limit: Int64?, validators: Validators, reason: String)
        /// No body to keep, but the length is now known; `drop` when it shows another version.
        case learnLength(Validators, drop: Bool)
        case reject(PrefetchError)
    }

    public var asked: Asked
    /// Validators of the bytes held (the catalog's, or what this run learned).
    public var held: Validators
    public var hasBytes: Bool
    /// Where writing a 200 may stop (exclusive): the end of what is wanted; nil for the end.
    public var wantedEnd: Int64?
    /// Parts under a weak (or no) validator may be combined: the held bytes came from this run.
    public var weakPartsCombine: Bool
    /// The version readers were promised (`Validators.admits`); nil when none was.
    public var promised: Validators?
    /// The digests the entry holds for its version (the origin's among them are compared).
    public var heldDigests: [DigestCheck]

    public init(asked: Asked, held: Validators, hasBytes: Bool, wantedEnd: Int64?, weakPartsCombine: Bool, promised: Validators? = nil,
                heldDigests: [DigestCheck] = []) {
        self.asked = asked
        self.held = held
        self.hasBytes = hasBytes
        self.wantedEnd = wantedEnd
        self.weakPartsCombine = weakPartsCombine
        self.promised = promised
        self.heldDigests = heldDigests
    }

    public func judge(_ head: ResponseHead) -> Verdict {
        let verdict = judgeVersionless(head)
        guard case .accept(let offset, let limit, let v) = verdict else { return verdict }
        if let promised, !promised.admits(v) {
            // Readers were promised another version: never into their file, never to them.
            return .replace(offset: offset, limit: limit, validators: v, reason: Self.notThePromisedVersion)
        }
        if hasBytes, !heldDigests.isEmpty, let (now, before) = DigestCheck.contradiction(in: heldDigests, origin: OriginDigests.parse(head)) {
            // The same validators, another digest: the origin's bytes changed under them.
            return .replace(offset: offset, limit: limit, validators: v,
                            reason: "its \(now.algorithm.rawValue) changed from \(before.hex) to \(now.hex) (\(now.source.description)) under the same validators")
        }
        return verdict
    }

    /// The reason of a replace the promise forced.
    public static let notThePromisedVersion = "the origin's version is not the one being served"

    /// The verdict before the promise is held against it.
    private func judgeVersionless(_ head: ResponseHead) -> Verdict {
        if head.status == 200 || head.status == 206 {
            // Byte offsets are the video's own: an encoded body is never stored as it.
            if let enc = head.header("Content-Encoding")?.trimming(.whitespaces).lowercased(), !enc.isEmpty, enc != "identity" {
                return .reject(.notTheVideo("origin sent the body encoded (Content-Encoding: \(enc)), not the video's own bytes"))
            }
            if let why = Self.notMedia(head) { return .reject(.notTheVideo(why)) }
        }
        switch head.status {
        case 206: return partial(head)
        case 200: return whole(head)
        case 416:
            guard let total = head.header("Content-Range").flatMap(Self.unsatisfiedLength) else {
                return .reject(.http(status: 416, reason: head.reason))
            }
            let v = Validators(length: total, etag: head.etag, lastModified: head.lastModified)
            return .learnLength(v, drop: hasBytes && held.differs(from: v))
        default:
            return .reject(.http(status: head.status, reason: head.reason))
        }
    }

    private func partial(_ head: ResponseHead) -> Verdict {
        let raw = head.header("Content-Range") ?? "(none)"
        guard let cr = head.contentRange else { return .reject(.badContentRange(asked: asked.spec, got: raw)) }
        let expectedStart: Int64
        if let n = asked.suffix {
            guard let total = cr.complete else { return .reject(.missingLength) }
            expectedStart = max(0, total - n)
        } else {
            expectedStart = asked.start ?? 0
        }
        let beyondAsked = asked.end.map { cr.last + 1 > $0 } ?? false
        guard cr.first == expectedStart, !beyondAsked else { return .reject(.badContentRange(asked: asked.spec, got: raw)) }
        let v = Validators(length: cr.complete, etag: head.etag, lastModified: head.lastModified)
        if !hasBytes || sameVersion(v) {
            return .accept(offset: cr.first, limit: cr.last + 1, validators: merged(v))
        }
        return .replace(offset: cr.first, limit: cr.last + 1, validators: v, reason: changeReason(v))
    }

    private func whole(_ head: ResponseHead) -> Verdict {
        let v = Validators(length: head.contentLength, etag: head.etag, lastModified: head.lastModified)
        let limit = [wantedEnd, v.length].compactMap { $0 }.min()
        if !hasBytes { return .accept(offset: 0, limit: limit, validators: v) }
        if Validators.strongMatch(held, v) { return .accept(offset: 0, limit: limit, validators: merged(v)) }
        let reason = held.differs(from: v) ? changeReason(v) : "origin sent the whole video (200) to a range request without a strong validator"
        return .replace(offset: 0, limit: limit, validators: v, reason: reason)
    }

    /// File extensions that name media: a page (HTML, XHTML) answered for one is an error page,
    /// not the video (a CDN's "not found" or a login wall answered with 200).
    static let mediaExtensions: Set<String> = ["mp4", "m4v", "m4a", "mov", "3gp", "webm", "mkv", "ts", "m4s", "mp3", "aac", "flac", "ogg", "ogv", "avi", "m3u8", "m3u"]

    static func notMedia(_ head: ResponseHead) -> String? {
        notMedia(contentType: head.contentType, url: head.effectiveURL)
    }

    /// `notMedia` of an answer whose Content-Type is `contentType`, from `url`.
    static func notMedia(contentType: String?, url: String) -> String? {
        guard let type = contentType?.split(separator: ";").first?.trimming(.whitespaces).lowercased(),
              type == "text/html" || type == "application/xhtml+xml" else { return nil }
        let path = URL(string: url)?.path ?? url
        let ext = path.fileExtension.lowercased()
        guard mediaExtensions.contains(ext) else { return nil }
        return "origin answered a web page (Content-Type: \(type)) for a .\(ext) " + (ext.hasPrefix("m3u") ? "playlist" : "video")
    }

    /// May a part with validators `v` be combined with the held bytes?
    func sameVersion(_ v: Validators) -> Bool {
        if Validators.strongMatch(held, v) { return true }
        guard weakPartsCombine, !held.hasStrongValidator, !v.hasStrongValidator else { return false }
        return held.etag == v.etag && held.lastModified == v.lastModified && (held.length == nil || v.length == nil || held.length == v.length)
    }

    /// What the held validators know, filled in by the response's (a `*` length stays known).
    private func merged(_ v: Validators) -> Validators {
        Validators(length: v.length ?? held.length, etag: v.etag ?? held.etag, lastModified: v.lastModified ?? held.lastModified)
    }

    private func changeReason(_ v: Validators) -> String {
        var what: [String] = []
        if let a = held.etag, let b = v.etag, a != b { what.append("ETag \(a) -> \(b)") }
        if let a = held.lastModified, let b = v.lastModified, a != b { what.append("Last-Modified \(a) -> \(b)") }
        if let a = held.length, let b = v.length, a != b { what.append("length \(a) -> \(b)") }
        if what.isEmpty { return "the cached bytes have no strong validator in common with the response" }
        return "its validators changed (" + what.joined(separator: ", ") + ")"
    }

    /// The N of `Content-Range: bytes */N` (a 416's way of telling the length).
    public static func unsatisfiedLength(_ value: String) -> Int64? {
        let t = value.trimming(.whitespaces)
        guard t.hasPrefix("bytes */"), let n = Int64(t.dropFirst(8)), n >= 0 else { return nil }
        return n
    }
}

extension Validators {
    /// A strong ETag, or Last-Modified when there is no ETag at all.
    public var hasStrongValidator: Bool {
        if let e = etag { return !e.hasPrefix("W/") }
        return lastModified != nil
    }

    /// No ETag and no Last-Modified: nothing but the length tells two responses' versions apart,
    /// so no two responses are ever known to be one version (not even two of one run's).
    public var hasNoValidator: Bool { etag == nil && lastModified == nil }

    /// RFC 9110 §8.8.3.2 strong comparison, with Last-Modified standing in when neither side has
    /// an ETag; a known length that differs always means another version.
    /// Whether a response with validators `v` carries bytes of the version `self` names, for a
    /// reader that promised `self` to a player: the same strong validator, or, when neither side
    /// has one, exactly the same weak ETag, Last-Modified and length (within one run; see
    /// Docs/cache-format.md, "Versions").
    public func admits(_ v: Validators) -> Bool {
        if Validators.strongMatch(self, v) { return true }
        guard !hasStrongValidator, !v.hasStrongValidator else { return false }
        return etag == v.etag && lastModified == v.lastModified && length != nil && length == v.length
    }

    public static func strongMatch(_ a: Validators, _ b: Validators) -> Bool {
        if let x = a.length, let y = b.length, x != y { return false }
        if let x = a.etag, let y = b.etag { return !x.hasPrefix("W/") && x == y }
        if a.etag == nil && b.etag == nil, let x = a.lastModified, let y = b.lastModified { return x == y }
        return false
    }
}
