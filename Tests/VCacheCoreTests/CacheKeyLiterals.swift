@testable import VCacheCore

/// Tests name entries by short literal keys ("a", "root"): the catalog stores any text, and a
/// literal is clearer in a table of cases than a hash. Only here: vcache itself makes a key only
/// from a URL (`CacheKeyRules`), a catalog row or a user's text of a key's shape.
extension CacheKey: ExpressibleByStringLiteral {
    public init(stringLiteral text: String) { self.init(stored: text) }
}

/// Pause-point hooks hand their detail over as text (a key's hex): compared with a key here.
func == (text: String, key: CacheKey) -> Bool { text == key.hex }
func == (key: CacheKey, text: String) -> Bool { key.hex == text }
