#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension DASHTemplate {
    /// Which `$Number$` or `$Time$` values give a URL whose last path segment is one of `names`
    /// (`CachedURLIndex.lastName`): the inverse of `substitute`, for `ls` of a stream that names
    /// a million segments of which a few are cached. Nil when the last path segment does not hold
    /// exactly one of them (none, or both), or the template is one this shortcut does not read
    /// (a `?`, `#`, `%` or `//` in it): the caller then names every segment.
    func values(namedBy names: Set<String>, representationID: String, bandwidth: Int64) -> (id: Identifier, values: Set<Int64>)? {
        var tail: [Part] = []
        for part in parts {
            switch part {
            case .literal(let s):
                guard !s.contains("?"), !s.contains("#"), !s.contains("%"), !s.contains("\\"), !s.contains("//") else { return nil }
                if let slash = s.lastIndex(of: "/") {
                    tail = [.literal(String(s[s.index(after: slash)...]))]
                } else {
                    tail.append(part)
                }
            case .value(.representationID, _):
                guard !representationID.contains("/"), !representationID.contains("%"), !representationID.contains("?"),
                      !representationID.contains("#") else { return nil }
                tail.append(.literal(representationID))
            case .value(.bandwidth, let width):
                tail.append(.literal(Self.padded(bandwidth, width)))
            case .value:
                tail.append(part)
            }
        }
        var prefix = "", suffix = "", variable: (id: Identifier, width: Int)?
        for part in tail {
            switch part {
            case .literal(let s): if variable == nil { prefix += s } else { suffix += s }
            case .value(let id, let width):
                guard variable == nil else { return nil }
                variable = (id == .subNumber ? .number : id, width)
            }
        }
        guard let variable, variable.id == .number || variable.id == .time else { return nil }
        var found = Set<Int64>()
        for name in names where name.utf8.count > prefix.utf8.count + suffix.utf8.count && name.hasPrefix(prefix) && name.hasSuffix(suffix) {
            let middle = name.dropFirst(prefix.count).dropLast(suffix.count)
            guard let value = Int64(middle), Self.padded(value, variable.width) == middle else { continue }
            found.insert(value)
        }
        return (variable.id, found)
    }

    /// `value` as `substitute` writes it: zero-padded to `width`.
    static func padded(_ value: Int64, _ width: Int) -> String {
        let s = String(value)
        return s.count < width && !s.hasPrefix("-") ? String(repeating: "0", count: width - s.count) + s : s
    }
}
