#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension String {
    /// The extension of the path's last component (`mp4` for `/a/b.mp4`), as NSString's
    /// `pathExtension` gives it; "" when there is none. Only the last component goes to NSString:
    /// swift-corelibs-foundation traps on some whole paths (`a///b//`; found by the ProxyRules
    /// fuzzer, through a percent-encoded file name of a proxy URL).
    var fileExtension: String {
        let last = split(separator: "/").last.map(String.init) ?? ""
        return PathText.pathExtension(last)
    }
}
