import Locking
import Testing

/// The lock order is checked, not only written: a debug build stops a thread that takes a
/// lock while holding one that comes after it, and lets the written order pass.
@Suite struct LockOrderTests {
    @Test func takingLocksInTheWrittenOrderPasses() {
        let outer = OrderedMutex(.fileSystem, 0)
        let inner = OrderedMutex(.vault, 0)
        let leaf = OrderedMutex(.daemonLog, 0)
        let sum = outer.withLock { a in inner.withLock { b in leaf.withLock { c in a + b + c + 1 } } }
        #expect(sum == 1)
        // Released in turn: the same locks can be taken again, one by one, in any order.
        leaf.withLock { _ in }
        outer.withLock { _ in }
    }

    @Test func takingALockBeforeItsPlaceStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let vault = OrderedMutex(.vault, 0)
            let fileSystem = OrderedMutex(.fileSystem, 0)
            vault.withLock { _ in fileSystem.withLock { _ in } }
        }
    }

    @Test func takingTheSameRankTwiceStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let one = OrderedMutex(.accessGateRules, 0)
            let other = OrderedMutex(.accessGateRules, 0)
            one.withLock { _ in other.withLock { _ in } }
        }
    }

    @Test func everyRankIsDistinctAndOrdered() {
        let ranks = LockRank.allCases.map(\.rawValue)
        #expect(ranks == ranks.sorted())
        #expect(Set(ranks).count == ranks.count)
    }
}
