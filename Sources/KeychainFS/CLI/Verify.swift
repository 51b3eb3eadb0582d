import ArgumentParser
import VaultCore

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt and authenticate every record; report each failure by path."
    )

    @OptionGroup var vault: VaultOptions

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let problems = try vault.openVault().verify()
            for problem in problems {
                Terminal.printError("integrity failure: \(problem)")
            }
            guard problems.isEmpty else { throw .integrityFailure("\(problems.count) damaged record(s)") }
            Terminal.printInfo("vault verified: every record authenticated")
        }
    }
}
