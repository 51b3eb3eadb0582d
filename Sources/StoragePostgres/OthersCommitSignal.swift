import Synchronization

/// Counts what a vault's change listener heard of other sessions' commits (or of a lost
/// connection, after which anything may have changed), for the storage of the same vault:
/// a notice may reach the listener's connection before the storage's own, and the storage
/// must not answer from rows it knows once either has heard of a commit.
final class OthersCommitSignal: Sendable {
    private let heard = Atomic<Int>(0)

    func raise() { heard.add(1, ordering: .sequentiallyConsistent) }

    var value: Int { heard.load(ordering: .sequentiallyConsistent) }
}
