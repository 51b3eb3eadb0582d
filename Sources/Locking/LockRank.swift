/// The order in which the program's locks may be taken, written once: a thread holding a lock
/// may take only a lock of a higher rank. Debug builds check every `withLock` against it
/// (`OrderedMutex`); docs/architecture.md says why each lock sits where it does.
package enum LockRank: Int, Comparable, Sendable, CaseIterable {
    // Daemon and ways in: held around calls into the layers below.
    case secretServicePrompts = 10
    case secretServiceOutcomes
    case vaultLockCount
    case confirmationBroker
    case fileSystemOnStart
    case fileSystem
    case accessGateRules
    case accessGateGovernance
    case accessLogFlushing
    case accessLogPending
    case processLabels
    case groupCommit
    case pageCacheDropper
    case sessionStackThread
    case sessionStackState
    case busShared
    // The vault: taken inside any of the above, never around them.
    case vaultSyncing = 100
    case vault
    case processIdentity
    case processClearances
    case thisDeviceOnlyKey
    case secureMemorySlots
    // Leaves: nothing is taken inside them.
    case daemonLog = 200
    /// The io_uring entries' answers (FUSERing): libfuse's writev, from any thread.
    case fuseRing

    package static func < (a: LockRank, b: LockRank) -> Bool { a.rawValue < b.rawValue }
}
