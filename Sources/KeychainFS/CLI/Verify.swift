import ArgumentParser
import Support
import VaultCore

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt and authenticate every record; report each failure by path."
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print {\"verified\", \"problems\": [{\"path\", \"reason\"}]} on standard output (the exit status is the same).")
    var json = false

    /// `verify --json`.
    struct JSON: Encodable {
        struct Problem: Encodable {
            let path: String
            let reason: String
        }

        let verified: Bool
        let problems: [Problem]
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            var bar: ProgressBar? = nil
            let problems = try vault.openVault().verify { done, total in
                if bar == nil { bar = ProgressBar("verify", total: total) }
                bar?.update(done)
            }
            bar?.finish()
            if json {
                try JSONOutput.write(JSON(verified: problems.isEmpty, problems: problems.map { JSON.Problem(path: $0.path, reason: $0.reason) }))
                guard problems.isEmpty else { throw .integrityFailure("\(problems.count) damaged record(s)") }
                return
            }
            for problem in problems {
                Terminal.printError("integrity failure: \(problem)")
            }
            guard problems.isEmpty else { throw .integrityFailure("\(problems.count) damaged record(s)") }
            Terminal.printInfo("vault verified: every record authenticated")
        }
    }
}
