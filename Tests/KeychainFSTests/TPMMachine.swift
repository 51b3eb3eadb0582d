/// A machine for the TPM tests: a vault and a state directory of its own (the host key, its
/// sealed object and the record of generations seen live there), the CLI run with
/// `KEYCHAINFS_TCTI` as given.
final class TPMMachine {
    let f: CLIFixture
    let state: String

    init() throws {
        f = try CLIFixture()
        state = f.directory + "/state"
    }

    var hostKeyFile: String { state + "/keychainfs/host.key" }
    var sealedObject: String { state + "/keychainfs/host.tpm" }
    var record: String { state + "/keychainfs/generations.sqlite" }

    /// The host key where this machine's state says, whatever the test run's own setting.
    func environment(_ tcti: String) -> [String: String] {
        ["XDG_STATE_HOME": state, "KEYCHAINFS_TCTI": tcti, "KEYCHAINFS_HOST_KEY": ""]
    }

    func cli(_ arguments: [String], tcti: String) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", f.vault, "--passphrase-file", f.passphraseFile], at: 1)
        return try run(keychainfsBinary, args, environment: environment(tcti))
    }
}
