#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch

/// SIGINT/SIGTERM: remember which, and ask the run to checkpoint and stop.
final class SignalTrap: @unchecked Sendable {
    // `caught` is written once on the signal queue and read after the run ends on the main thread;
    // the Fetcher's stop flag (an atomic with release/acquire) orders the two.
    private var sources: [DispatchSourceSignal] = []
    private(set) var caught: Int32?

    init(onSignal: @escaping @Sendable (Int32) -> Void) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [unowned self] in
                if self.caught == nil { self.caught = sig }
                onSignal(sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}
