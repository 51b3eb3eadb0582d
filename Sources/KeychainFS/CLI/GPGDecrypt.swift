import Glibc
import Support
import VaultCore

/// Decrypts a file with the user's own `gpg` (their keys, agent and pinentry), reading its
/// output from a pipe straight into locked memory: the plaintext never touches a file.
enum GPGDecrypt {
    static func decrypt(_ path: String, limit: Int) throws(VaultError) -> SecureBuffer {
        var content = try SecureBuffer(capacity: 0)
        let (outcome, status) = try SecretInput.output(of: ["gpg", "--decrypt", "--quiet", "--batch", "--", path], searchingPath: true,
                                                       into: &content, limit: limit) { .invalidArgument($0) }
        guard outcome == .complete else { throw .invalidArgument("\(path): larger than the vault's item size limit (\(limit) bytes)") }
        guard status == 0 else { throw .invalidArgument("\(path): gpg could not decrypt it (status \(status))") }
        return content
    }
}
