import Synchronization

/// What a thread hands back to the test.
final class Slot<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)

    func put(_ value: Value) { stored.withLock { $0 = value } }

    var value: Value? { stored.withLock { $0 } }
}
