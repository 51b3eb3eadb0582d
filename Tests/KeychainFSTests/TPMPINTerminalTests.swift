import Foundation
import Glibc
import Support
import Testing

/// The TPM PIN asked at a terminal (a pseudo-terminal as the command's own), a software TPM per
/// test: a new PIN is asked twice and two that differ make nothing; a PIN that opens is asked once.
@Suite(.tags(.tpm)) struct TPMPINTerminalTests {
    @Test func initAsksTheNewPINTwiceAndOpeningAsksItOnce() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        let vault = m.f.directory + "/terminal.vault"
        let env = m.environment(tpm.tcti)
        let initArguments = ["init", "--vault", vault, "--passphrase-file", m.f.passphraseFile, "--tpm-pin", "--kdf", "interactive"]

        let mismatched = try PseudoTerminal(keychainfsBinary, initArguments, environment: env)
        #expect(mismatched.waitFor("New TPM PIN: "), "\(mismatched.screen)")
        mismatched.type("4711")
        #expect(mismatched.waitFor("Repeat the PIN: "), "\(mismatched.screen)")
        mismatched.type("4712")
        #expect(mismatched.finish() == ExitStatus.invalidInput.rawValue)
        #expect(mismatched.screen.contains("the PINs do not match"), "\(mismatched.screen)")
        #expect(access(vault, F_OK) != 0)

        let made = try PseudoTerminal(keychainfsBinary, initArguments, environment: env)
        #expect(made.waitFor("New TPM PIN: "), "\(made.screen)")
        made.type("4711")
        #expect(made.waitFor("Repeat the PIN: "), "\(made.screen)")
        made.type("4711")
        #expect(made.finish() == 0, "\(made.screen)")
        // Echo was off: the PIN never appeared on the terminal (the vault's path, made of a
        // random UUID, is on it and may hold those digits).
        #expect(!made.screen.replacingOccurrences(of: vault, with: "").contains("4711"), "\(made.screen)")
        #expect(try run(keychainfsBinary, ["set", "--vault", vault, "--passphrase-file", m.f.passphraseFile, "app/token", "typed"],
                        environment: env).exitStatus == .success)

        let opened = try PseudoTerminal(keychainfsBinary, ["get", "--vault", vault, "--pin", "app/token"], environment: env)
        #expect(opened.waitFor("TPM PIN: "), "\(opened.screen)")
        opened.type("4711")
        #expect(opened.finish() == 0, "\(opened.screen)")
        #expect(opened.screen.contains("typed\(PseudoTerminal.statusMark)0"), "\(opened.screen)")
        #expect(!opened.screen.contains("Repeat"), "\(opened.screen)")
    }
}
