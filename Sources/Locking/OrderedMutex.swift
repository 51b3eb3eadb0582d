import Synchronization

/// A `Mutex` with its place in the lock order. Release builds add nothing; debug builds (the
/// tests' builds, daemon included) stop the process when a thread takes it while holding a
/// lock of the same or a higher rank, naming both: a deadlock no test happened to hit still
/// shows as an order no test may break.
package struct OrderedMutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    // Inlinable, with what it reaches: the session loop takes a lock per request, and an
    // unspecialized generic call across modules would cost each of them.
    @usableFromInline let mutex: Mutex<Value>
    package let rank: LockRank

    package init(_ rank: LockRank, _ value: consuming sending Value) {
        self.rank = rank
        mutex = Mutex(value)
    }

    @inlinable
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if DEBUG
        HeldLocks.willTake(rank)
        defer { HeldLocks.released(rank) }
        #endif
        return try mutex.withLock(body)
    }
}
