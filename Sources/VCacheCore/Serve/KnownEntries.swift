#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Synchronization

/// What serve read of a cached entry a moment ago, so that the requests following it read no
/// catalog (issue 36: a cached request spent most of its time in SQLite, one connection shared by
/// every player thread and by the storing jobs' commits).
///
/// A record is a snapshot as `ReadThrough.snapshot` takes it, of an entry whose claims cover its
/// length: the catalog's entry, read while the entry's `data` path named one file (by device and
/// inode). It is used only by a request whose
/// own `data`, opened (and locked LOCK_SH) before it looks, is that very file, and only for
/// `lifetime` after the catalog was read: such a request acts on claims at most that old about
/// the file it holds, as a response that began that long ago does on the snapshot it took at
/// its start (claims about a file stay true of it; a new version is a new `data`). A claim the
/// catalog took back meanwhile (`verify --fix` keeping only the chunks that still hash) is
/// trusted for no longer than that, and a claim it made since is found by the reader's own
/// catalog read at a gap (`RangeReader.refresh`).
///
/// The record holds its file open (read-only, no lock: an entry served a moment ago stays
/// evictable), so the file system cannot give its inode number to another file while the record
/// stands: a `data` made again under the same number after an eviction would otherwise pass for
/// the old one, and its holes would be read as the old one's bytes. Records are few (a share of
/// the descriptors serve may open) and closed once past their lifetime (by a timer, so an idle
/// serve holds no evicted file's blocks).
final class KnownEntries: Sendable {
    private struct Record {
        /// Holds the inode: nothing else can have `id` while this is open.
        let file: RawFile
        let id: FileID
        let entry: CacheEntry
        let until: ContinuousClock.Instant
    }
    private struct Records {
        var byKey: [CacheKey: Record] = [:]
        /// When the first record expires (nil: none kept), and whether a sweep is scheduled.
        var sweepDue: ContinuousClock.Instant?
        var sweepScheduled = false
    }
    private let records = Locked(Records())
    private let timer = DispatchQueue(label: "vcache.serve.known-entries")

    /// How long a record stands after the catalog read it describes.
    static let lifetime: Duration = .seconds(1)

    /// The entry as the catalog claimed it for the file `id` less than `lifetime` ago, if known.
    /// The caller holds that file open (so `id` is not another file's since).
    func entry(_ key: CacheKey, file id: FileID) -> CacheEntry? {
        let now = ContinuousClock.now
        return records.withLock { r in
            guard let record = r.byKey[key], record.id == id, now < record.until else { return nil }
            return record.entry
        }
    }

    /// Records `entry`, read from the catalog at `readAt` while `path` named the file `id`:
    /// `path` is opened again and kept open, and the record made only if it is still that file.
    /// Nothing is recorded when serve may open few descriptors, or none is left.
    func record(_ key: CacheKey, entry: CacheEntry, file id: FileID, path: String, readAt: ContinuousClock.Instant) {
        let capacity = Self.capacity
        guard capacity > 0, let file = try? RawFile.open(path, flags: O_RDONLY) else { return }
        guard (try? file.identity()) == id else {
            file.close()
            return
        }
        let record = Record(file: file, id: id, entry: entry, until: readAt + Self.lifetime)
        let (dropped, schedule) = records.withLock { r -> ([RawFile], Bool) in
            var out: [RawFile] = []
            if let old = r.byKey.updateValue(record, forKey: key) { out.append(old.file) }
            if r.byKey.count > capacity, let oldest = r.byKey.min(by: { $0.value.until < $1.value.until }) {
                out.append(oldest.value.file)
                r.byKey[oldest.key] = nil
            }
            r.sweepDue = min(r.sweepDue ?? record.until, record.until)
            defer { r.sweepScheduled = true }
            return (out, !r.sweepScheduled)
        }
        for f in dropped { f.close() }
        if schedule { scheduleSweep(after: Self.lifetime) }
    }

    private func scheduleSweep(after delay: Duration) {
        let ms = Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000) + 1
        timer.asyncAfter(deadline: .now() + .milliseconds(ms)) { [self] in
            if let next = sweep() { scheduleSweep(after: next) }
        }
    }

    /// Closes the records past their lifetime; returns when to sweep again (nil: nothing left).
    @discardableResult
    func sweep() -> Duration? {
        let now = ContinuousClock.now
        let (expired, again) = records.withLock { r -> ([RawFile], Duration?) in
            guard let due = r.sweepDue else {
                r.sweepScheduled = false
                return ([], nil)
            }
            guard due <= now else { return ([], due - now) }
            var out: [RawFile] = []
            var next: ContinuousClock.Instant?
            for (key, record) in r.byKey {
                if record.until <= now {
                    out.append(record.file)
                    r.byKey[key] = nil
                } else {
                    next = min(next ?? record.until, record.until)
                }
            }
            r.sweepDue = next
            if next == nil { r.sweepScheduled = false }
            return (out, next.map { $0 - now })
        }
        for f in expired { f.close() }
        return again
    }

    /// Records kept now (for tests).
    var count: Int { records.withLock { $0.byKey.count } }

    /// Records serve may keep: 1 in 32 of the descriptors it may open, beyond the 64 kept for the
    /// rest, and at most 256 (none under a limit of 96).
    static var capacity: Int {
        max(0, min(256, (Resources.descriptorLimit() - 64) / 32))
    }
}
