import Foundation
import Glibc
import Testing

/// this-device-only items with a TPM: the host key sealed by it (a software TPM per test, as the
/// machine's chip), only its sealed object on disk, another TPM refused as another machine is.
@Suite(.tags(.tpm)) struct TPMHostKeyTests {
    @Test func anItemSealedByTheTPMReadsBackAndOnlyTheSealedObjectIsOnDisk() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        let stored = try m.cli(["set", "local", "bound to this chip", "--class", "this-device-only"], tcti: tpm.tcti)
        #expect(stored.exitStatus == .success, "\(stored.stderr)")
        let read = try m.cli(["get", "local"], tcti: tpm.tcti)
        #expect(read.stdoutText == "bound to this chip" && read.stderr.isEmpty, "\(read.stderr)")

        #expect(access(m.hostKeyFile, F_OK) != 0, "a host key file was written beside the TPM's sealed object")
        var info = stat()
        #expect(stat(m.sealedObject, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // A sealed data object's public and private areas, not a 32-byte key.
        #expect(info.st_size > 100)
        #expect(try m.hostKeyLines(tcti: tpm.tcti) == ["this-device-only items: sealed by the TPM (\(tpm.tcti)), sealed object \(m.sealedObject)"])

        // The file alone opens nothing: the same state without the TPM refuses as another machine.
        let withoutTPM = try m.cli(["get", "local"], tcti: "none")
        #expect(withoutTPM.exitStatus == .otherDevice, "\(withoutTPM.stderr)")
        #expect(withoutTPM.stdout.isEmpty)
        #expect(try m.hostKeyLines(tcti: "none") == ["this-device-only items: sealed by a TPM, but none answers here (sealed object \(m.sealedObject))"])
    }

    /// The same vault and state files on another chip: refused with status 13, and its items
    /// still read on the chip that sealed them.
    @Test func anotherTPMIsAnotherMachine() throws {
        let here = try SoftwareTPM()
        let m = try TPMMachine()
        #expect(try m.cli(["set", "local", "bound to this chip", "--class", "this-device-only"], tcti: here.tcti).exitStatus == .success)
        #expect(try m.cli(["set", "shared", "anywhere"], tcti: here.tcti).exitStatus == .success)

        let there = try SoftwareTPM()
        let refused = try m.cli(["get", "local"], tcti: there.tcti)
        #expect(refused.exitStatus == .otherDevice)
        #expect(refused.stderr.contains("local: this item is this-device-only and cannot be read on this machine"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        #expect(try m.cli(["get", "shared"], tcti: there.tcti).stdoutText == "anywhere")
        // Nor does the other chip seal new this-device-only items with a key of its own beside it.
        #expect(try m.cli(["set", "other", "x", "--class", "this-device-only"], tcti: there.tcti).exitStatus == .otherDevice)

        #expect(try m.cli(["get", "local"], tcti: here.tcti).stdoutText == "bound to this chip")
    }

    /// No TPM answers (nothing listens where `KEYCHAINFS_TCTI` points, and no /dev/tpmrm0 is
    /// used then): the host key file as before, one line of `status` saying so, and no noise
    /// from tpm2-tss.
    @Test func withoutATPMTheHostKeyFile() throws {
        let m = try TPMMachine()
        let nowhere = "swtpm:host=127.0.0.1,port=\(try freeLocalPort())"
        let stored = try m.cli(["set", "local", "in a file", "--class", "this-device-only"], tcti: nowhere)
        #expect(stored.exitStatus == .success && stored.stderr.isEmpty, "\(stored.stderr)")
        #expect(try m.cli(["get", "local"], tcti: nowhere).stdoutText == "in a file")
        var info = stat()
        #expect(stat(m.hostKeyFile, &info) == 0 && info.st_size == 32 && info.st_mode & 0o777 == 0o600)
        #expect(access(m.sealedObject, F_OK) != 0)
        #expect(try m.hostKeyLines(tcti: nowhere) == ["this-device-only items: host key file \(m.hostKeyFile) (no TPM)"])
    }

    /// Through a mount: the daemon unseals with the TPM it was started with; on another chip
    /// the item is refused (EACCES) and the others read.
    @Test(.tags(.mount)) func aMountUnsealsWithItsTPM() throws {
        let here = try SoftwareTPM()
        let m = try TPMMachine()
        #expect(try m.cli(["set", "local", "bound to this chip", "--class", "this-device-only"], tcti: here.tcti).exitStatus == .success)
        #expect(try m.cli(["set", "shared", "anywhere"], tcti: here.tcti).exitStatus == .success)
        do {
            let mount = try EnvironmentMount(vault: m.f.vault, passphraseFile: m.f.passphraseFile, directory: m.f.directory,
                                             environment: m.environment(here.tcti))
            #expect(readFile(mount.mountpoint + "/local") == Array("bound to this chip".utf8))
        }
        let there = try SoftwareTPM()
        do {
            let mount = try EnvironmentMount(vault: m.f.vault, passphraseFile: m.f.passphraseFile, directory: m.f.directory,
                                             environment: m.environment(there.tcti))
            #expect(readFile(mount.mountpoint + "/shared") == Array("anywhere".utf8))
            #expect(errnoOf { open(mount.mountpoint + "/local", O_RDONLY) } == EACCES)
        }
    }
}

private extension TPMMachine {
    /// `status`'s line about the host key (tests running beside may list mounts of theirs).
    func hostKeyLines(tcti: String) throws -> [Substring] {
        let status = try run(keychainfsBinary, ["status"], environment: environment(tcti))
        #expect(status.exitStatus == .success && status.stderr.isEmpty, "\(status.stderr)")
        return status.stdoutText.split(separator: "\n").filter { $0.hasPrefix("this-device-only items:") }
    }
}
