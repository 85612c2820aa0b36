import CCurl
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The event loop: one libcurl multi handle (shared connection pool) driving every transfer of a
/// run, plus timers for retries and lock waits. Everything registered here — delegates, timers —
/// runs on the loop's thread (`loop`: the first thread to use it, which then calls `run`); each
/// entry point checks that at run time. Only `stop(reason:)` and `wake()` may be called from others.
public final class Fetcher {
    /// The longest wait a timer, timeout or deadline is set to (`Units.maxDuration`, ten years):
    /// longer ones, and NaN, would overflow the clock (`Checked` clamps to it).
    public static let longestWaitMilliseconds = Int64(Units.maxDuration) * 1000

    /// The thread everything below belongs to.
    public let loop = LoopThread()
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var timers: [(due: ContinuousClock.Instant, seq: Int, action: () -> Void)] = []
    private var timerSeq = 0
    /// Work handed to other threads whose results come back through `inbox`.
    private var offloaded = 0
    private let inbox: Inbox

    /// Results of offloaded work, posted from other threads, run on the loop's thread (each is a
    /// `LoopBound` continuation, so running one anywhere else traps).
    private final class Inbox: Sendable {
        private struct State {
            var actions: [@Sendable () -> Void] = []
            /// The multi handle to wake (curl_multi_wakeup is safe from any thread); 0 once detached.
            var multi = 0
        }
        private let state = Locked(State())

        init(waking multi: UnsafeMutableRawPointer) { state.withLock { $0.multi = Int(bitPattern: multi) } }

        func post(_ action: @escaping @Sendable () -> Void) {
            state.withLock { s in
                s.actions.append(action)
                if let p = UnsafeMutableRawPointer(bitPattern: s.multi) { curl_multi_wakeup(p) }
            }
        }

        func take() -> [@Sendable () -> Void] {
            state.withLock { s in
                defer { s.actions = [] }
                return s.actions
            }
        }

        var isEmpty: Bool { state.withLock { $0.actions.isEmpty } }

        func detach() { state.withLock { $0.multi = 0 } }
    }
    /// Set from another thread (a signal handler's queue) to make `run` return promptly.
    private let stopFlag: StopFlag

    /// Shared with other threads (signal handlers): stopping sets the reason and wakes the loop.
    public final class StopFlag: Sendable {
        let value = Atomic<Int32>(0)
        // The multi handle to wake; curl_multi_wakeup is safe to call from any thread.
        private let waker = Locked<Int>(0)  // the pointer's bit pattern; 0 when detached
        public init() {}
        public var reason: Int32 { value.load(ordering: .acquiring) }

        public func stop(reason: Int32) {
            value.store(reason, ordering: .releasing)
            waker.withLock { m in if let p = UnsafeMutableRawPointer(bitPattern: m) { curl_multi_wakeup(p) } }
        }

        func attach(_ multi: UnsafeMutableRawPointer?) { waker.withLock { $0 = Int(bitPattern: multi) } }

        /// Wakes the loop from any thread, so it looks again at what changed (a commit landed).
        public func wake() {
            waker.withLock { m in if let p = UnsafeMutableRawPointer(bitPattern: m) { curl_multi_wakeup(p) } }
        }
    }

    /// `curl_global_init`'s result, once per process: a failure fails every transfer (`add`).
    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

    private let limiter: RateLimiter?

    /// `maxRate`: bytes per second for all transfers together (nil: unlimited).
    public init(stopFlag: StopFlag = StopFlag(), maxRate: Int64? = nil) {
        limiter = maxRate.map { RateLimiter(bytesPerSecond: $0) }
        _ = Self.globalInit
        // curl_multi_init fails only on allocation failure.
        multi = curl_multi_init()!
        inbox = Inbox(waking: multi)
        self.stopFlag = stopFlag
        stopFlag.attach(multi)
    }

    deinit {
        stopFlag.attach(nil)
        inbox.detach()
        for (easy, _) in active { detach(easy) }
        active = [:]
        _ = curl_multi_cleanup(multi)  // fails only for a bad handle or from inside a callback: never here
    }

    /// libcurl's version line, e.g. "libcurl/7.88.1 OpenSSL/3.0.17 zlib/1.2.13 ...".
    public static var libraryVersion: String { String(cString: curl_version()) }

    public var isStopped: Bool { stopFlag.reason != 0 }
    public var stopReason: Int32 { stopFlag.reason }

    /// Wakes the loop from any thread (see `StopFlag.wake`).
    public var waker: @Sendable () -> Void { { [stopFlag] in stopFlag.wake() } }

    /// Interrupts `run` from any thread; `reason` is kept (e.g. the signal number).
    public func stop(reason: Int32) { stopFlag.stop(reason: reason) }

    /// Traps unless called on the loop's thread (see `LoopThread`).
    public func preconditionOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        loop.precondition(file: file, line: line)
    }

    public func add(_ transfer: CurlTransfer) {
        loop.precondition()
        transfer.share(limiter)
        let error: TransportError? = if Self.globalInit != CURLE_OK {
            TransportError(kind: .other, message: "libcurl could not be initialised: \(String(cString: curl_easy_strerror(Self.globalInit)))", code: Int(Self.globalInit.rawValue))
        } else {
            Self.multiError(curl_multi_add_handle(multi, transfer.easy), "could not start the transfer")
        }
        if let error {
            // Never started: it fails on the loop's next turn, as any transfer ends (its owner
            // expects no call back from inside `add`).
            after(0) { transfer.fail(error) }
            return
        }
        active[transfer.easy] = transfer
    }

    /// Lets a transfer held by its delegate (`HeadDecision.hold`) deliver its body again.
    public func release(_ transfer: CurlTransfer) {
        loop.precondition()
        guard transfer.held, active[transfer.easy] != nil else { return }
        resume(transfer)
    }

    /// The run stops itself with `reason` at `instant` (e.g. `--max-time`). Unlike a timer, a
    /// deadline is not work: the loop ends as soon as the work does, however far away it is.
    public func setDeadline(_ instant: ContinuousClock.Instant, reason: Int32) {
        loop.precondition()
        deadline = (instant, reason)
    }
    private var deadline: (at: ContinuousClock.Instant, reason: Int32)?

    /// Removes a transfer without completing it (used when stopping).
    public func cancel(_ transfer: CurlTransfer) {
        loop.precondition()
        guard active.removeValue(forKey: transfer.easy) != nil else { return }
        detach(transfer.easy)
    }

    /// Runs `action` on the loop thread after `seconds`.
    public func after(_ seconds: Double, _ action: @escaping () -> Void) {
        loop.precondition()
        timerSeq += 1
        timers.append((ContinuousClock.now + .milliseconds(Checked.int64(seconds * 1000, clampedTo: 0...Self.longestWaitMilliseconds) ?? 0), timerSeq, action))
    }

    /// Runs `work` on `queue`, then `then` with its result back on the loop thread. The loop keeps
    /// running until the result has been delivered. `work` is `@Sendable` (it cannot capture
    /// loop-owned state); `then` travels as a `LoopBound`, so it can only run on the loop.
    public func offload<T: Sendable>(to queue: DispatchQueue, _ work: @escaping @Sendable () -> T, then: @escaping (T) -> Void) {
        loop.precondition()
        offloaded += 1
        let deliver = LoopBound(then, loop: loop)
        let inbox = self.inbox
        queue.async {
            let value = work()
            inbox.post { deliver.value(value) }
        }
    }

    private func deliverOffloaded() {
        for action in inbox.take() {
            offloaded -= 1
            action()
        }
    }

    private var hasWork: Bool { !active.isEmpty || !timers.isEmpty || offloaded > 0 }

    /// Forgets the timers and delivered results no loop will run any more (the run that set them
    /// has ended): they hold their callers' closures, which hold this fetcher's owner, so kept
    /// they would keep the owner, this multi handle and its connections alive for ever (serve
    /// stops storing jobs all day: each left a socket pair and a connection behind).
    public func discardPending() {
        loop.precondition()
        timers = []
        offloaded -= inbox.take().count
    }

    /// Drives transfers and timers until there is nothing left to do, until stopped, or until `done`.
    /// `tick` runs after every wake-up (checkpoints live there, never in a data callback).
    public func run(until done: () -> Bool = { false }, tick: () -> Void = {}) {
        loop.precondition()
        while !isStopped && hasWork && !done() {
            if let d = deadline, ContinuousClock.now >= d.at {
                stop(reason: d.reason)
                break
            }
            var running: Int32 = 0
            if let error = Self.multiError(curl_multi_perform(multi, &running), "stopped driving the transfers") { failAll(error) }
            drainMessages()
            resumePaused()
            abandonStalled()
            deliverOffloaded()
            fireDueTimers()
            tick()
            if isStopped { break }
            if !hasWork { break }
            var timeoutMs: Int32 = 250
            if let limiter, active.values.contains(where: \.paused) { timeoutMs = min(timeoutMs, limiter.millisecondsUntilTokens) }
            if let next = (timers.map(\.due) + [deadline?.at].compactMap { $0 }).min() {
                let ms = ContinuousClock.now.duration(to: next).inMilliseconds
                timeoutMs = Int32(max(0, min(Int64(timeoutMs), ms)))
            }
            if inbox.isEmpty && (!active.isEmpty || timeoutMs > 0),
               let error = Self.multiError(curl_multi_poll(multi, nil, 0, timeoutMs, nil), "could not wait for the transfers") {
                failAll(error)
            }
        }
    }

    private func drainMessages() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle else { continue }
            let code = msg.pointee.data.result
            detach(easy)
            if let t = active.removeValue(forKey: easy) {
                t.complete(code: code)
            }
        }
    }

    private func resumePaused() {
        guard let limiter else { return }
        // Longest-waiting first, so every download gets its turn at the bucket.
        for t in active.values.filter({ $0.paused && !$0.held }).sorted(by: { $0.lastActivity < $1.lastActivity }) {
            guard limiter.hasTokens else { return }
            resume(t)
        }
    }

    /// Transfers with no byte for their stall timeout end with a `.stalled` error.
    private func abandonStalled() {
        let now = ContinuousClock.now
        for (easy, t) in active where !t.paused && !t.held && now - t.lastActivity > t.stallTimeout {
            active.removeValue(forKey: easy)
            detach(easy)
            t.fail(TransportError(kind: .stalled, message: "no data received for \(Units.formatDuration(t.stallTimeout.inSeconds))", code: Int(CURLE_OPERATION_TIMEDOUT.rawValue)))
        }
    }

    /// Lets a paused transfer go on; one libcurl cannot resume ends with the reason.
    private func resume(_ t: CurlTransfer) {
        guard let error = t.resume() else { return }
        active.removeValue(forKey: t.easy)
        detach(t.easy)
        t.fail(error)
    }

    /// A multi-handle call's failure as a transport error (nil when it succeeded).
    private static func multiError(_ rc: CURLMcode, _ what: String) -> TransportError? {
        guard rc != CURLM_OK else { return nil }
        return TransportError(kind: .other, message: "libcurl \(what): \(String(cString: curl_multi_strerror(rc)))", code: Int(rc.rawValue))
    }

    /// The multi handle failed (out of memory, a poll it cannot recover from): no transfer can go
    /// on, each ends with the reason.
    private func failAll(_ error: TransportError) {
        let all = active
        active = [:]
        for (easy, t) in all {
            detach(easy)
            t.fail(error)
        }
    }

    /// `curl_multi_remove_handle`. It fails only for a handle not in the multi handle, or when
    /// called from inside a libcurl callback, which this loop never does: a handle left in would
    /// be used after its transfer frees it, so that is stopped here.
    private func detach(_ easy: UnsafeMutableRawPointer) {
        let rc = curl_multi_remove_handle(multi, easy)
        precondition(rc == CURLM_OK, "curl_multi_remove_handle: \(String(cString: curl_multi_strerror(rc)))")
    }

    private func fireDueTimers() {
        let now = ContinuousClock.now
        let due = timers.filter { $0.due <= now }.sorted { ($0.due, $0.seq) < ($1.due, $1.seq) }
        guard !due.isEmpty else { return }
        let dueSeqs = Set(due.map(\.seq))
        timers.removeAll { dueSeqs.contains($0.seq) }
        for t in due { t.action() }
    }
}
