import ArgumentParser
import VaultCore

/// `--tpm-pcrs`: the PCRs a new TPM PIN slot is bound to.
struct PCRSelection: ParsableArguments {
    @Option(name: .customLong("tpm-pcrs"),
            help: ArgumentHelp("Bind the TPM PIN slot to these PCRs (SHA-256 bank, comma-separated, e.g. 7: Secure Boot's state); the slot then refuses once one changes, and the passphrase opens the vault.", valueName: "LIST"))
    var list: String?

    /// The PCR numbers given, in order, each once; none without the option.
    func pcrs() throws(VaultError) -> [Int] {
        guard let list else { return [] }
        var chosen: [Int] = []
        for word in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard let pcr = Int(word.trimmingPrefix(" ")), (0..<24).contains(pcr) else {
                throw .invalidArgument("--tpm-pcrs takes PCR numbers from 0 to 23, comma-separated (7, or 0,7), not \(list)")
            }
            if !chosen.contains(pcr) { chosen.append(pcr) }
        }
        return chosen.sorted()
    }
}
