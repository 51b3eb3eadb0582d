#if DEBUG
import Glibc

/// The ranks this thread holds, in a thread-specific slot (debug builds only).
package enum HeldLocks {
    private final class Stack {
        var ranks: [LockRank] = []
    }

    nonisolated(unsafe) private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { if let slot = $0 { Unmanaged<AnyObject>.fromOpaque(slot).release() } }
        return key
    }()

    private static var stack: Stack {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<Stack>.fromOpaque(existing).takeUnretainedValue()
        }
        let stack = Stack()
        pthread_setspecific(key, Unmanaged.passRetained(stack).toOpaque())
        return stack
    }

    package static func willTake(_ rank: LockRank) {
        let stack = stack
        if let top = stack.ranks.max(), top >= rank {
            fatalError("lock order broken: taking \(rank) while holding \(top) (see LockRank)")
        }
        stack.ranks.append(rank)
    }

    package static func released(_ rank: LockRank) {
        let stack = stack
        if let at = stack.ranks.lastIndex(of: rank) { stack.ranks.remove(at: at) }
    }
}
#endif
