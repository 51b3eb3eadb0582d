import Foundation
import Glibc

/// A machine with a software TPM of its own and a vault with a TPM PIN slot on it: the PIN
/// `pin` in `pinFile`, the passphrase in the fixture's file, a wrong PIN in `wrongPINFile`.
final class TPMPINMachine {
    let tpm: SoftwareTPM
    let m: TPMMachine
    let pin = "4711"
    let pinFile: String
    let wrongPINFile: String

    /// `pcrs`: what the slot is bound to (`--tpm-pcrs`), none when nil.
    init(pcrs: String? = nil) throws {
        tpm = try SoftwareTPM()
        m = try TPMMachine()
        pinFile = try m.f.write(pin + "\n", to: "pin")
        wrongPINFile = try m.f.write("0000\n", to: "wrong-pin")
        let added = try run(keychainfsBinary, ["tpm-pin", "add", "--vault", m.f.vault, "--passphrase-file", m.f.passphraseFile,
                                                "--pin-file", pinFile, "--kdf", "interactive"] + (pcrs.map { ["--tpm-pcrs", $0] } ?? []),
                            environment: m.environment(tpm.tcti))
        guard added.exitStatus == .success else { throw FixtureError("tpm-pin add: \(added.status) \(added.stderr)") }
    }

    var vault: String { m.f.vault }
    var tcti: String { tpm.tcti }

    /// `keychainfs SUBCOMMAND --vault V --pin-file FILE ARGS...` (no passphrase given) on `tcti`.
    func withPIN(_ arguments: [String], pinFile: String? = nil, tcti: String? = nil) throws -> RunResult {
        try cli(arguments, ["--vault", vault, "--pin-file", pinFile ?? self.pinFile], tcti: tcti)
    }

    /// The same with the passphrase, as the recovery.
    func withPassphrase(_ arguments: [String], tcti: String? = nil) throws -> RunResult {
        try cli(arguments, ["--vault", vault, "--passphrase-file", m.f.passphraseFile], tcti: tcti)
    }

    /// `options` after the subcommand (both words of `tpm-pin add` or `member add`).
    private func cli(_ arguments: [String], _ options: [String], tcti: String?) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: options, at: ["tpm-pin", "member"].contains(arguments.first ?? "") ? 2 : 1)
        return try run(keychainfsBinary, args, environment: m.environment(tcti ?? self.tcti))
    }

    /// Runs one of tpm2-tools against this machine's TPM.
    func tool(_ name: String, _ arguments: [String]) throws {
        let result = try run("/usr/bin/" + name, ["--tcti", tcti] + arguments)
        guard result.status == 0 else { throw FixtureError("\(name): \(result.stderr)") }
    }

    /// A mount of the vault with `-o pinfile=FILE` (mount(8)'s form), or the passphrase with
    /// `pinFile` nil: its result, and the mountpoint.
    func mount(pinFile: String?, tcti: String? = nil) throws -> (RunResult, String) {
        let mountpoint = m.f.directory + "/mnt-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let option = pinFile.map { "pinfile=\($0)" } ?? "passfile=\(m.f.passphraseFile)"
        let result = try run(keychainfsBinary, [vault, mountpoint, "-o", option], environment: m.environment(tcti ?? self.tcti))
        return (result, mountpoint)
    }

    func unmount(_ mountpoint: String) {
        if isMounted(mountpoint) { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
    }
}
