// libFuzzer target: URL -> cache key rules, on arbitrary text. Built by `make fuzz-build` against
// VCacheCore. Line 0 is the URL, line 1 the parameters to strip (comma-separated), a `?` in
// line 2 ignores the query. Properties: normalising is idempotent (a normalised URL keys to
// itself), the key is 64 hex digits, and a stripped parameter (or an ignored query) never
// survives.
import Foundation
import VCacheCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = FuzzInput(data, size)
    let text = input.line(0)
    let strip = Set(input.line(1).split(separator: ",").map(String.init))
    let rules = CacheKeyRules(ignoreQuery: input.line(2).contains("?"), stripParameters: strip)
    let key = rules.key(for: text)
    precondition(CacheKey(key.hex) == key, "key '\(key)' is not 64 lower-case hex digits")
    // The properties hold for the URLs vcache takes (http or https, what libcurl accepts): for
    // others Foundation's URL parsing has quirks (a host of percent escapes) that never reach a key.
    guard PrefetchItem.urlProblem(text) == nil, let url = URL(string: text) else { return 0 }
    let once = rules.normalise(url)
    if let again = URL(string: once) {
        precondition(rules.normalise(again) == once, "normalise is not idempotent: '\(text)' -> '\(once)' -> '\(rules.normalise(again))'")
        precondition(rules.key(for: once) == key, "'\(once)' keys differently from '\(text)'")
        let parses = URLComponents(url: url, resolvingAgainstBaseURL: false) != nil
        if rules.ignoreQuery, parses {
            precondition(again.query == nil, "a query survived: '\(once)'")
        }
        if parses, let items = URLComponents(url: again, resolvingAgainstBaseURL: false)?.percentEncodedQueryItems, !rules.ignoreQuery {
            precondition(!items.contains { strip.contains($0.name) }, "a stripped parameter survived: '\(once)'")
        }
    }
    return 0
}
