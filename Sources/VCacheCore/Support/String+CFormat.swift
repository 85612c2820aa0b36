#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// `printf`'s formatting (`vsnprintf`), for the few patterns vcache prints: `%.1f`, `%02X`,
    /// `%ld`. Foundation's `String(format:)` gives the same bytes for these, but linking it brings
    /// in ICU (Docs/performance.md, A lean binary). No `%@`: pass strings by concatenation.
    /// LC_NUMERIC stays "C" in vcache (only LC_CTYPE is set), so the decimal point is always '.'.
    package init(cFormat format: String, _ arguments: CVarArg...) {
        var buffer = [CChar](repeating: 0, count: 128)
        while true {
            let needed = withVaList(arguments) { list in
                buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, $0.count, format, list) }
            }
            if needed < 0 { self = ""; return }  // an encoding error: none of vcache's patterns can cause one
            if Int(needed) < buffer.count { break }
            buffer = [CChar](repeating: 0, count: Int(needed) + 1)
        }
        self = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
