/// A value only its fetch loop's thread may use, checked at every access (swift-nio's
/// `NIOLoopBound`): it may be carried through other threads (a work queue handing a result back)
/// but never opened there.
public struct LoopBound<Value>: @unchecked Sendable {
    // @unchecked: `stored` is read and written only through `value`, whose accessors trap off the
    // loop's thread, so no two threads ever touch it.
    private var stored: Value
    public let loop: LoopThread

    /// Must be made on the loop's thread.
    public init(_ value: Value, loop: LoopThread) {
        loop.precondition()
        stored = value
        self.loop = loop
    }

    public var value: Value {
        get {
            loop.precondition()
            return stored
        }
        set {
            loop.precondition()
            stored = newValue
        }
    }
}
