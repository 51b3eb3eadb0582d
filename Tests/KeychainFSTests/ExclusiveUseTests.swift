import Foundation
import Glibc
import Testing
import VaultCore

/// The claim on a vault file: a holder that serves a mount is refused at once; one that no
/// longer does (a daemon ending after its unmount) is waited for, up to the bound.
@Suite struct ExclusiveUseTests {
    private func refusal(_ body: () throws(VaultError) -> Void) -> Bool {
        do throws(VaultError) {
            try body()
            return false
        } catch .vaultInUse {
            return true
        } catch {
            return false
        }
    }

    @Test func aServingHolderIsRefusedAtOnceWhateverTheWait() throws {
        let cli = try CLIFixture()
        defer { withExtendedLifetime(cli) {} }
        let vault = cli.vault
        let holder = try ExclusiveUse(of: vault)
        let started = Date()
        #expect(refusal { () throws(VaultError) in _ = try ExclusiveUse(of: vault, waitingUpTo: 10) })
        #expect(Date().timeIntervalSince(started) < 1)
        withExtendedLifetime(holder) {}
    }

    /// `umount` returns before the daemon reads that its mount is gone: a holder still saying
    /// it serves, whose mount the table no longer shows, is waited for as well.
    @Test func aServingHolderWhoseMountIsGoneIsWaitedFor() throws {
        let cli = try CLIFixture()
        defer { withExtendedLifetime(cli) {} }
        let vault = cli.vault
        func handOver() throws {
            let holder = try ExclusiveUse(of: vault)
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { withExtendedLifetime(holder) {} }
        }
        try handOver()
        var asked = false
        let claim = try ExclusiveUse(of: vault, waitingUpTo: 10) { _, _ in
            asked = true
            return false
        }
        #expect(asked)
        withExtendedLifetime(claim) {}
    }

    @Test func aHolderThatStoppedServingIsWaitedForUpToTheBound() throws {
        let cli = try CLIFixture()
        defer { withExtendedLifetime(cli) {} }
        let vault = cli.vault
        let holder = try ExclusiveUse(of: vault)
        holder.stopServing()
        #expect(refusal { () throws(VaultError) in _ = try ExclusiveUse(of: vault) }, "no wait asked: refused at once")
        let started = Date()
        #expect(refusal { () throws(VaultError) in _ = try ExclusiveUse(of: vault, waitingUpTo: 1) })
        #expect(Date().timeIntervalSince(started) >= 1)
        withExtendedLifetime(holder) {}
    }

    @Test func aHolderThatStoppedServingAndLetsGoIsFollowedAndTheNewOneServes() throws {
        let cli = try CLIFixture()
        defer { withExtendedLifetime(cli) {} }
        let vault = cli.vault
        // An ending daemon: no longer serving, letting go 0.3 s later (the block holds the
        // last reference, gone once it has run).
        func handOver() throws {
            let holder = try ExclusiveUse(of: vault)
            holder.stopServing()
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { withExtendedLifetime(holder) {} }
        }
        try handOver()
        #expect(refusal { () throws(VaultError) in _ = try ExclusiveUse(of: vault) }, "still held")
        let claim = try ExclusiveUse(of: vault, waitingUpTo: 10)
        // The new holder serves: the next one is refused at once.
        let started = Date()
        #expect(refusal { () throws(VaultError) in _ = try ExclusiveUse(of: vault, waitingUpTo: 10) })
        #expect(Date().timeIntervalSince(started) < 1)
        withExtendedLifetime(claim) {}
    }
}
