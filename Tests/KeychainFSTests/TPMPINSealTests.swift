import Foundation
import Glibc
import Testing
import TPMSeal

/// The TPM half of a PIN slot (issue 27 item 2), against a software TPM per test: a secret sealed
/// to PolicyAuthValue (and PolicyPCR) opens with its PIN only, wrong PINs count toward the TPM's
/// lockout, a changed PCR 7 refuses, another chip refuses.
@Suite(.tags(.tpm)) struct TPMPINSealTests {
    private let secret = Array("a key slot's 32-byte wrapping key".utf8.prefix(32))

    private func seal(_ tpm: SoftwareTPM, pin: String, pcrs: [Int] = []) throws -> [UInt8] {
        let connection = try TPMConnection(configuration: tpm.tcti)
        return try secret.withUnsafeBytes { s in try Array(pin.utf8).withUnsafeBytes { p in try connection.seal(s, authValue: p, pcrs: pcrs) } }
    }

    /// The secret, or the failure.
    private func unseal(_ tpm: SoftwareTPM, _ blob: [UInt8], pin: String, pcrs: [Int] = []) -> Result<[UInt8], TPMFailure> {
        do {
            let connection = try TPMConnection(configuration: tpm.tcti)
            var out = [UInt8](repeating: 0, count: 64)
            let count = try out.withUnsafeMutableBytes { o in
                try Array(pin.utf8).withUnsafeBytes { p in try connection.unseal(blob, authValue: p, pcrs: pcrs, into: o) }
            }
            return .success(Array(out.prefix(count)))
        } catch let error as TPMFailure {
            return .failure(error)
        } catch {
            return .failure(.failed("\(error)"))
        }
    }

    private func tool(_ tpm: SoftwareTPM, _ name: String, _ arguments: [String]) throws {
        let result = try run("/usr/bin/" + name, ["--tcti", tpm.tcti] + arguments)
        #expect(result.status == 0, "\(name): \(result.stderr)")
    }

    @Test func opensWithItsPINOnly() throws {
        let tpm = try SoftwareTPM()
        let blob = try seal(tpm, pin: "4711")
        #expect(try unseal(tpm, blob, pin: "4711").get() == secret)
        #expect(unseal(tpm, blob, pin: "4712") == .failure(.wrongAuthorization))
        #expect(unseal(tpm, blob, pin: "") == .failure(.wrongAuthorization))
        #expect(try unseal(tpm, blob, pin: "4711").get() == secret)
    }

    /// With the TPM's lockout set to 3 tries: the third wrong PIN locks every PIN object out,
    /// the right PIN included, until the lockout is reset.
    @Test func wrongPINsReachTheLockout() throws {
        let tpm = try SoftwareTPM()
        try tool(tpm, "tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=3", "--recovery-time=3600", "--lockout-recovery-time=3600"])
        let blob = try seal(tpm, pin: "4711")
        for _ in 0..<3 { #expect(unseal(tpm, blob, pin: "0000") == .failure(.wrongAuthorization)) }
        #expect(unseal(tpm, blob, pin: "0000") == .failure(.lockedOut))
        #expect(unseal(tpm, blob, pin: "4711") == .failure(.lockedOut))
        try tool(tpm, "tpm2_dictionarylockout", ["--clear-lockout"])
        #expect(try unseal(tpm, blob, pin: "4711").get() == secret)
    }

    /// Bound to PCR 7: extended (as a firmware or Secure Boot change does), the seal refuses
    /// even the right PIN; sealed again under the new value, it opens.
    @Test func aChangedPCR7Refuses() throws {
        let tpm = try SoftwareTPM()
        let blob = try seal(tpm, pin: "4711", pcrs: [7])
        #expect(try unseal(tpm, blob, pin: "4711", pcrs: [7]).get() == secret)
        try tool(tpm, "tpm2_pcrextend", ["7:sha256=" + String(repeating: "ab", count: 32)])
        #expect(unseal(tpm, blob, pin: "4711", pcrs: [7]) == .failure(.pcrsChanged))
        let again = try seal(tpm, pin: "4711", pcrs: [7])
        #expect(try unseal(tpm, again, pin: "4711", pcrs: [7]).get() == secret)
    }

    @Test func anotherTPMRefuses() throws {
        let here = try SoftwareTPM()
        let blob = try seal(here, pin: "4711")
        let there = try SoftwareTPM()
        #expect(unseal(there, blob, pin: "4711") == .failure(.otherTPM))
    }
}
