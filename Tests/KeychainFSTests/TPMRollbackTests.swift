import Foundation
import Glibc
import Testing

/// The rollback counter in the TPM (a software TPM per test): the vault and this machine's
/// record of the generations seen (generations.sqlite) both put back from older copies, as a
/// restore of the whole home directory would, are refused still; without a TPM, as before.
@Suite(.tags(.tpm)) struct TPMRollbackTests {
    fileprivate static let sqlite3 = "/usr/bin/sqlite3"

    /// The vault and the record both put back: refused with status 15 by the command line and
    /// the mount, naming the counter; `--accept-rollback` opens it and then it is what this
    /// machine knows.
    @Test(.tags(.mount)) func anOlderVaultWithAnOlderRecordIsRefused() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        #expect(try m.cli(["set", "app/token", "old"], tcti: tpm.tcti).exitStatus == .success)
        let backup = m.f.directory + "/backup"
        try m.backup(to: backup)
        let before = try m.recordedCounter()
        #expect(before.split(separator: " ").count == 2, "the record names no TPM counter: '\(before)'")
        #expect(try m.cli(["set", "app/token", "new"], tcti: tpm.tcti).exitStatus == .success)
        #expect(try m.cli(["get", "app/token"], tcti: tpm.tcti).stdoutText == "new")
        #expect(try m.recordedCounter() != before)
        try m.restore(from: backup)

        let read = try m.cli(["get", "app/token"], tcti: tpm.tcti)
        #expect(read.exitStatus == .rolledBack, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("TPM rollback counter"), "\(read.stderr)")
        #expect(read.stdout.isEmpty)

        let mountpoint = m.f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let refused = try run(keychainfsBinary, ["mount", "--vault", m.f.vault, "--passphrase-file", m.f.passphraseFile, mountpoint],
                              environment: m.environment(tpm.tcti))
        if refused.exitStatus == .success { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(refused.exitStatus == .rolledBack, "mount: \(refused.status) \(refused.stderr)")

        let accepted = try m.cli(["get", "--accept-rollback", "app/token"], tcti: tpm.tcti)
        #expect(accepted.exitStatus == .success && accepted.stdoutText == "old", "get: \(accepted.status) \(accepted.stderr)")
        let after = try m.cli(["get", "app/token"], tcti: tpm.tcti)
        #expect(after.exitStatus == .success && after.stdoutText == "old", "get: \(after.status) \(after.stderr)")
    }

    /// The record removed, with the vault put back: the TPM still has the vault's counter, so
    /// this is refused as well.
    @Test func anOlderVaultWithTheRecordRemovedIsRefused() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        #expect(try m.cli(["set", "app/token", "old"], tcti: tpm.tcti).exitStatus == .success)
        let backup = m.f.directory + "/backup"
        try m.backup(to: backup)
        #expect(try m.cli(["set", "app/token", "new"], tcti: tpm.tcti).exitStatus == .success)
        try m.restore(from: backup)
        try FileManager.default.removeItem(atPath: m.record)

        let read = try m.cli(["get", "app/token"], tcti: tpm.tcti)
        #expect(read.exitStatus == .rolledBack, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("is gone or names no TPM rollback counter"), "\(read.stderr)")
    }

    /// Writes, locks and reopens in the ordinary way never trip it: the record follows the counter.
    @Test func ordinaryUseIsNeverRefused() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        for value in 0..<4 {
            #expect(try m.cli(["set", "app/token", "v\(value)"], tcti: tpm.tcti).exitStatus == .success)
            let read = try m.cli(["get", "app/token"], tcti: tpm.tcti)
            #expect(read.exitStatus == .success && read.stdoutText == "v\(value)", "\(read.stderr)")
        }
    }

    /// A TPM whose NV space is full (filled with indices and counters of others' by tpm2_nvdefine): the
    /// vault opens and writes as without a TPM, the record names no counter, and an older vault
    /// alone is still refused by the record.
    @Test func aFullTPMLeavesTheRecordAlone() throws {
        let tpm = try SoftwareTPM()
        var handle = 0x0150_0000, defined = 0
        // Ordinary indices first, then counters (which fit in what ordinary ones leave).
        for (size, attributes) in [(2048, "ownerread|ownerwrite"), (8, "ownerread|ownerwrite"), (8, "authread|authwrite|nt=counter")] {
            while defined < 1000 {
                let result = try run("/usr/bin/tpm2_nvdefine", ["--tcti", tpm.tcti, "-C", "o", "-s", "\(size)", "-a", attributes,
                                                                "0x" + String(handle, radix: 16)])
                guard result.status == 0 else { break }
                handle += 1
                defined += 1
            }
        }
        #expect(defined > 0 && defined < 1000, "\(defined) indices defined")
        let m = try TPMMachine()
        #expect(try m.cli(["set", "app/token", "old"], tcti: tpm.tcti).exitStatus == .success)
        let backup = m.f.directory + "/backup"
        try m.backup(to: backup)
        #expect(try m.recordedCounter().isEmpty)
        #expect(try m.cli(["set", "app/token", "new"], tcti: tpm.tcti).exitStatus == .success)
        let read = try m.cli(["get", "app/token"], tcti: tpm.tcti)
        #expect(read.exitStatus == .success && read.stdoutText == "new", "get: \(read.status) \(read.stderr)")
        try FileManager.default.copyItem(atPath: backup + "/vault", toPath: m.f.directory + "/older.vault")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: m.f.vault + suffix) }
        try FileManager.default.copyItem(atPath: backup + "/vault", toPath: m.f.vault)
        #expect(try m.cli(["get", "app/token"], tcti: tpm.tcti).exitStatus == .rolledBack)
    }

    /// Without a TPM the record alone holds, as before: the same restore goes unnoticed (the
    /// limit the counter removes), and the record names no counter.
    @Test func withoutATPMTheRecordAlone() throws {
        let m = try TPMMachine()
        #expect(try m.cli(["set", "app/token", "old"], tcti: "none").exitStatus == .success)
        let backup = m.f.directory + "/backup"
        try m.backup(to: backup)
        #expect(try m.recordedCounter().isEmpty)
        #expect(try m.cli(["set", "app/token", "new"], tcti: "none").exitStatus == .success)
        try m.restore(from: backup)
        let read = try m.cli(["get", "app/token"], tcti: "none")
        #expect(read.exitStatus == .success && read.stdoutText == "old", "get: \(read.status) \(read.stderr)")
    }
}

private extension TPMMachine {
    /// Consistent copies of the vault and of the record, as a backup tool takes them.
    func backup(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (file, copy) in [(f.vault, directory + "/vault"), (record, directory + "/generations.sqlite")] {
            let result = try run(TPMRollbackTests.sqlite3, [file, ".backup '\(copy)'"])
            #expect(result.status == 0, "sqlite3 .backup: \(result.stderr)")
        }
    }

    /// Both put back in place, as a restore from that backup does.
    func restore(from directory: String) throws {
        for (file, copy) in [(f.vault, directory + "/vault"), (record, directory + "/generations.sqlite")] {
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: file + suffix) }
            try FileManager.default.copyItem(atPath: copy, toPath: file)
        }
    }

    /// The counter's handle and count as the record's row names them (empty: none).
    func recordedCounter() throws -> String {
        try run(TPMRollbackTests.sqlite3, [record, "SELECT nv_handle || ' ' || nv_count FROM seen"]).stdoutText
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
