#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch

/// SIGINT/SIGTERM, SIGHUP (a closed terminal or ssh session) and SIGPIPE (`vcache ... | head -1`):
/// remember which, and ask the run to checkpoint and stop (they would otherwise kill it with
/// nothing saved).
final class SignalTrap: @unchecked Sendable {
    // `caught` is written once on the signal queue and read after the run ends on the main thread;
    // the Fetcher's stop flag (an atomic with release/acquire) orders the two.
    private var sources: [DispatchSourceSignal] = []
    private(set) var caught: Int32?

    init(_ signals: [Int32] = [SIGINT, SIGTERM, SIGHUP], onSignal: @escaping @Sendable (Int32) -> Void) {
        // SIGPIPE is ignored: a write to a closed pipe fails with EPIPE instead (Console.write
        // reports it through `Console.onBrokenPipe`), so the run can checkpoint before dying.
        signal(SIGPIPE, SIG_IGN)
        // SIGXFSZ too: a write past `ulimit -f` (or an origin's offset past what the file system
        // holds) fails with EFBIG, said in one line, instead of killing the run mid-checkpoint.
        signal(SIGXFSZ, SIG_IGN)
        for sig in signals {
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

    /// Records `sig` as if it had been caught (a write that failed with EPIPE: SIGPIPE itself is
    /// ignored, so a closed pipe is learnt from the write) and stops the run the same way.
    func raiseFromWrite(_ sig: Int32, onSignal: (Int32) -> Void) {
        if caught == nil { caught = sig }
        onSignal(sig)
    }

    /// After the clean checkpoint: die by `signal` itself, as curl and wget do, so a shell loop
    /// stops on Ctrl-C and systemd sees a clean stop; the shell still shows 128+signal.
    func dieBy(_ signal: Int32) -> Never {
        for s in sources { s.cancel() }
        Self.die(by: signal)
    }

    /// "SIGINT", "SIGTERM", "SIGHUP" (or "signal N"), for messages.
    static func name(_ sig: Int32) -> String {
        switch sig {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(sig)"
        }
    }

    /// Waits for the signal handler running on another thread to end the process (`die(by:)`),
    /// saying nothing: for a failure its own clean-up caused.
    static func awaitDeath() -> Never {
        while true { pause() }
    }

    /// Dies by `signal` at once (from the handler itself, when there is nothing to checkpoint).
    static func die(by signal: Int32) -> Never {
        fflush(nil)
        Glibc_signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        sigprocmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        exit(128 + signal)  // not reached unless the signal is blocked elsewhere
    }
}

@inline(__always) private func Glibc_signal(_ sig: Int32, _ handler: sighandler_t?) {
    #if canImport(Glibc)
    _ = Glibc.signal(sig, handler)
    #else
    _ = Darwin.signal(sig, handler)
    #endif
}
