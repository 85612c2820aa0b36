#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The digests an origin's response head says the whole representation has (pure): RFC 9530's
/// `Repr-Digest` (`sha-256=:BASE64:`), RFC 3230's `Digest` (`SHA-256=BASE64`: on a response whose
/// body is the whole video only, as servers disagree whether a 206's is of the part), `Content-MD5`
/// on a full (200) response, and Google Cloud Storage's `x-goog-hash: md5=BASE64` (a range response's
/// is the whole object's too). sha-256, sha-512 and md5 are read; other algorithms are skipped.
///
/// Every value is the origin's, so untrusted: a member that does not parse or decode to the
/// algorithm's exact size is ignored, a header value past 8 KiB is ignored whole, and an
/// algorithm the head gives two different values for (repeated headers, or two headers that
/// disagree) is trusted in none of them. Digests of another content coding (a `Content-Encoding`
/// other than identity; for GCS also `x-goog-stored-content-encoding`) say nothing of the bytes
/// vcache stores, and are ignored.
public enum OriginDigests {
    /// The longest header value read; a longer one is ignored whole.
    static let maxValueLength = 8192
    /// Members read per header (the rest are ignored).
    static let maxMembers = 32

    public static func parse(_ head: ResponseHead) -> [ExpectedDigest] {
        func values(_ name: String) -> [String]? {
            let all = head.headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
            return all.contains { $0.utf8.count > maxValueLength } ? nil : all
        }
        func isIdentity(_ coding: [String]?) -> Bool {
            (coding ?? []).allSatisfy { v in
                v.split(separator: ",").allSatisfy { $0.trimming(.whitespaces).lowercased() == "identity" }
            }
        }
        guard isIdentity(values("Content-Encoding")) else { return [] }
        var found: [(DigestAlgorithm, String, String)] = []  // algorithm, hex, header
        func members(_ vs: [String]?) -> [Substring] {
            Array((vs ?? []).flatMap { $0.split(separator: ",") }.prefix(maxMembers))
        }
        func add(_ header: String, _ vs: [String]?, colons: Bool, only: DigestAlgorithm? = nil) {
            for m in members(vs) {
                // Parameters (`;...`) of a structured field member are not part of the value.
                let member = m.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? m
                guard let eq = member.firstIndex(of: "=") else { continue }
                let name = member[..<eq].trimming(.whitespaces)
                var value = member[member.index(after: eq)...].trimming(.whitespaces)[...]
                guard let algorithm = DigestAlgorithm(name: name), algorithm != .sha1, only.map({ $0 == algorithm }) ?? true else { continue }
                if colons {
                    guard value.count >= 2, value.hasPrefix(":"), value.hasSuffix(":") else { continue }
                    value = value.dropFirst().dropLast()
                }
                guard let bytes = ExpectedDigest.base64(value), bytes.count == algorithm.byteCount else { continue }
                found.append((algorithm, SHA256Digest.hex(bytes), header))
            }
        }
        add("Repr-Digest", values("Repr-Digest"), colons: true)
        // RFC 3230's instance digest was computed over the part sent by some servers (RFC 9530
        // §1.3 obsoletes it for that ambiguity): every range would then "change" the video.
        // Read only where the body is the whole representation.
        if head.sendsWholeRepresentation { add("Digest", values("Digest"), colons: false) }
        if head.status == 200, let vs = values("Content-MD5") {
            add("Content-MD5", vs.map { "md5=" + $0 }, colons: false)
        }
        if isIdentity(values("x-goog-stored-content-encoding")) {
            add("x-goog-hash", values("x-goog-hash"), colons: false, only: .md5)
        }
        var out: [ExpectedDigest] = []
        for algorithm in DigestAlgorithm.allCases {
            let said = found.filter { $0.0 == algorithm }
            guard let first = said.first, said.allSatisfy({ $0.1 == first.1 }) else { continue }
            out.append(ExpectedDigest(algorithm: algorithm, hex: first.1, source: .origin(header: first.2)))
        }
        return out
    }
}

extension ResponseHead {
    /// A 200, or a 206 whose `Content-Range` is the whole representation: its body is the video.
    var sendsWholeRepresentation: Bool {
        if status == 200 { return true }
        guard status == 206, let cr = contentRange, let total = cr.complete else { return false }
        return cr.first == 0 && cr.last + 1 == total
    }
}
