#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the catalog knows of one video. `ranges` are the bytes durably present in `data`.
public struct CacheEntry: Equatable, Sendable {
    public var key: CacheKey
    /// The URL as the user first gave it.
    public var url: String
    /// The URL most recently used to fetch it (signed URLs change daily).
    public var latestURL: String
    /// Total length; nil until an origin response has said it.
    public var length: Int64?
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    public var created: Date
    public var lastUsed: Date
    public var completed: Date?
    public var sha256: String?
    public var pinned: Bool
    /// Bytes covered by `ranges` (kept in the row so `ls` is one query).
    public var cachedBytes: Int64
    /// Allocated bytes of `data` at the last checkpoint (what `du` would count).
    public var diskBytes: Int64
    public var ranges: RangeSet

    public var isComplete: Bool { completed != nil }

    public var validators: Validators {
        Validators(length: length, etag: etag, lastModified: lastModified)
    }
}

/// What identifies one version of a video: RFC 9110 validators plus the length.
public struct Validators: Equatable, Sendable {
    public var length: Int64?
    public var etag: String?
    public var lastModified: String?

    public init(length: Int64?, etag: String?, lastModified: String?) {
        self.length = length
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The request header asking whether the origin still has this version: `If-None-Match`
    /// with the ETag, else `If-Modified-Since` with the Last-Modified; nil without either (a
    /// 304 then says nothing of the bytes).
    public var conditionalHeader: String? {
        etag.map { "If-None-Match: \($0)" } ?? lastModified.map { "If-Modified-Since: \($0)" }
    }

    /// True when `other` (a response's validators) describes a different version than `self`
    /// (what the catalog holds). A validator that either side lacks is not evidence of change.
    public func differs(from other: Validators) -> Bool {
        if let a = length, let b = other.length, a != b { return true }
        if let a = etag, let b = other.etag, a != b { return true }
        if let a = lastModified, let b = other.lastModified, a != b { return true }
        return false
    }

    /// The `If-Range` value for a resume (RFC 9110 §13.1.5): a strong ETag; Last-Modified only when
    /// there is no ETag at all (a client that has an entity tag must not send a date); nothing for a
    /// weak ETag, which If-Range must never carry.
    public var ifRange: String? {
        if let e = etag { return e.hasPrefix("W/") ? nil : e }
        return lastModified
    }
}
