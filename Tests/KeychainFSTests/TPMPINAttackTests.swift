import Foundation
import Glibc
import Testing
@testable import VaultCore
import VaultStorageKit

/// Attacks on the TPM PIN slot (issue 27 item 2), a software TPM per test: guessing the PIN
/// runs into the TPM's dictionary-attack lockout, a changed PCR 7 or another TPM refuse the slot
/// (status 16) while the passphrase still opens, and a seal broken open gives nothing without the PIN.
@Suite(.tags(.tpm)) struct TPMPINAttackTests {
    /// With the TPM's lockout at 3 tries: 3 wrong PINs are status 2, then every PIN, the right
    /// one too, is status 16 saying so, through the command line and the mount; the passphrase
    /// opens the vault and mounts it. Once the lockout is cleared, the PIN opens again.
    @Test(.tags(.mount)) func wrongPINsReachTheLockoutAndThePassphraseStillOpens() throws {
        let p = try TPMPINMachine()
        try p.tool("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=3", "--recovery-time=3600", "--lockout-recovery-time=3600"])
        #expect(try p.withPassphrase(["set", "app/token", "guarded"]).exitStatus == .success)
        for attempt in 1...3 {
            let wrong = try p.withPIN(["get", "app/token"], pinFile: p.wrongPINFile)
            #expect(wrong.exitStatus == .wrongPassphrase && wrong.stdout.isEmpty, "attempt \(attempt): \(wrong.status) \(wrong.stderr)")
        }
        for pinFile in [p.wrongPINFile, p.pinFile] {
            let locked = try p.withPIN(["get", "app/token"], pinFile: pinFile)
            #expect(locked.exitStatus == .pinSlotRefused && locked.stdout.isEmpty, "\(locked.status) \(locked.stderr)")
            #expect(locked.stderr.contains("lockout") && locked.stderr.contains("passphrase"), "\(locked.stderr)")
        }
        let (refused, refusedAt) = try p.mount(pinFile: p.pinFile)
        p.unmount(refusedAt)
        #expect(refused.exitStatus == .pinSlotRefused, "mount: \(refused.status) \(refused.stderr)")

        #expect(try p.withPassphrase(["get", "app/token"]).stdoutText == "guarded")
        let (mounted, mountpoint) = try p.mount(pinFile: nil)
        defer { p.unmount(mountpoint) }
        #expect(mounted.exitStatus == .success, "\(mounted.stderr)")
        #expect(readFile(mountpoint + "/app/token") == Array("guarded".utf8))
        // Locked, the mount's unlock with the PIN is refused as well; the passphrase unlocks it.
        let env = p.m.environment(p.tcti)
        #expect(try run(keychainfsBinary, ["lock", mountpoint], environment: env).exitStatus == .success)
        let byPIN = try run(keychainfsBinary, ["unlock", "--pin-file", p.pinFile, mountpoint], environment: env)
        #expect(byPIN.exitStatus == .pinSlotRefused && byPIN.stderr.contains("lockout"), "\(byPIN.status) \(byPIN.stderr)")
        #expect(errnoOf { open(mountpoint + "/app/token", O_RDONLY) } == EACCES)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", p.m.f.passphraseFile, mountpoint], environment: env).exitStatus == .success)
        #expect(readFile(mountpoint + "/app/token") == Array("guarded".utf8))
        p.unmount(mountpoint)

        try p.tool("tpm2_dictionarylockout", ["--clear-lockout"])
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "guarded")
    }

    /// Bound to PCR 7, which a firmware or Secure Boot update changes (here extended by
    /// tpm2_pcrextend): the PIN slot refuses with status 16 through the command line and the
    /// mount, the passphrase opens, and `tpm-pin remove` then `add` enrol the PIN again.
    @Test(.tags(.mount)) func aChangedPCR7RefusesThePINSlotAndReEnrollingWorks() throws {
        let p = try TPMPINMachine(pcrs: "7")
        #expect(try p.withPassphrase(["set", "app/token", "bound"]).exitStatus == .success)
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "bound")
        #expect(try run("/usr/bin/sqlite3", [p.vault, "SELECT pcr_mask FROM pin_slots"]).stdoutText == "\(1 << 7)\n")

        try p.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: "ab", count: 32)])
        let refused = try p.withPIN(["get", "app/token"])
        #expect(refused.exitStatus == .pinSlotRefused && refused.stdout.isEmpty, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("PCRs that changed") && refused.stderr.contains("tpm-pin add"), "\(refused.stderr)")
        let (notMounted, at) = try p.mount(pinFile: p.pinFile)
        p.unmount(at)
        #expect(notMounted.exitStatus == .pinSlotRefused, "mount: \(notMounted.status) \(notMounted.stderr)")
        #expect(try p.withPassphrase(["get", "app/token"]).stdoutText == "bound")

        #expect(try p.withPassphrase(["tpm-pin", "remove"]).exitStatus == .success)
        let again = try p.withPassphrase(["tpm-pin", "add", "--pin-file", p.pinFile, "--tpm-pcrs", "7", "--kdf", "interactive"])
        #expect(again.exitStatus == .success, "\(again.stderr)")
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "bound")
        let (mounted, mountpoint) = try p.mount(pinFile: p.pinFile)
        defer { p.unmount(mountpoint) }
        #expect(mounted.exitStatus == .success, "\(mounted.stderr)")
        #expect(readFile(mountpoint + "/app/token") == Array("bound".utf8))
    }

    /// The vault and its state copied to another machine (another TPM): the PIN slot refuses,
    /// whatever the PIN, without a try counted there; the passphrase opens.
    @Test func aCopyOfTheVaultOnAnotherTPMIsRefused() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["set", "app/token", "here"]).exitStatus == .success)
        let there = try SoftwareTPM()
        let refused = try p.withPIN(["get", "app/token"], tcti: there.tcti)
        #expect(refused.exitStatus == .pinSlotRefused && refused.stdout.isEmpty, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("another machine's TPM"), "\(refused.stderr)")
        #expect(try p.withPassphrase(["get", "app/token"], tcti: there.tcti).stdoutText == "here")
        let none = try p.withPIN(["get", "app/token"], tcti: "none")
        #expect(none.exitStatus == .pinSlotRefused && none.stderr.contains("has no TPM"), "\(none.stderr)")
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "here")
    }

    /// The seal broken: an attacker who read the sealed key out of the TPM (here unsealed with
    /// the PIN's authorization value, which breaking the chip gives as well) still needs the PIN,
    /// one Argon2id per guess: the key alone, or with a wrong PIN, unwraps nothing.
    @Test func aBrokenSealWithoutThePINOpensNothing() throws {
        let p = try TPMPINMachine()
        setenv("KEYCHAINFS_TCTI", p.tcti, 1)
        defer { unsetenv("KEYCHAINFS_TCTI") }
        let row = try #require(try VaultLocation.openStorage(at: p.vault).pinSlots().first)
        func buffer(_ text: String) throws -> SecureBuffer {
            var buffer = try SecureBuffer(capacity: text.utf8.count)
            try Array(text.utf8).withUnsafeBytes { try buffer.append($0) }
            return buffer
        }
        let stretched = try PINSlot.stretch(try buffer(p.pin), for: row)
        let tpmKey = try PINSlot.unsealKey(row, authValue: try PINSlot.authValue(fromStretched: stretched))

        for guess in ["0000", "4712", "1234"] {
            #expect(try PINSlot.unwrap(row, tpmKey: tpmKey, stretchedPIN: try PINSlot.stretch(try buffer(guess), for: row)) == nil)
        }
        // The TPM's key as the wrapping key itself, or as the PIN's half: nothing either.
        #expect(try PINSlot.unwrap(row, tpmKey: tpmKey, stretchedPIN: tpmKey) == nil)
        var master = try SecureBuffer(capacity: 32)
        #expect(!AEAD.open(row.wrappedMasterKey, key: tpmKey, associatedData: RecordCipher.pinSlotAssociatedData(
            slotID: row.id, parameters: row.parameters, pcrMask: row.pcrMask, sealedKey: row.sealedKey), into: &master))
        // With the PIN, the same key unwraps the vault's master key: the test could fail.
        let unwrapped = try PINSlot.unwrap(row, tpmKey: tpmKey, stretchedPIN: stretched)?.count
        #expect(unwrapped == 32)
    }
}
