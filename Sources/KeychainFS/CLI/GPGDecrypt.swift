import Glibc
import VaultCore

/// Decrypts a file with the user's own `gpg` (their keys, agent and pinentry), reading its
/// output from a pipe straight into locked memory: the plaintext never touches a file.
enum GPGDecrypt {
    static func decrypt(_ path: String, limit: Int) throws(VaultError) -> SecureBuffer {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw .storageFailure("cannot create a pipe for gpg") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        let arguments = ["gpg", "--decrypt", "--quiet", "--batch", "--", path]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, "gpg", &actions, nil, argv, environ)
        close(pipeFDs[1])
        defer { close(pipeFDs[0]) }
        guard rc == 0 else { throw .invalidArgument("cannot run gpg: \(String(cString: strerror(rc)))") }
        var content = try SecureBuffer(capacity: 0)
        let outcome: SecretInput.ReadOutcome
        do {
            outcome = try SecretInput.read(pipeFDs[0], into: &content, limit: limit)
        } catch {
            kill(pid, SIGKILL)
            GPGDecrypt.wait(pid)
            throw error
        }
        if outcome == .overLimit { kill(pid, SIGKILL) }
        let status = GPGDecrypt.wait(pid)
        guard outcome == .complete else { throw .invalidArgument("\(path): larger than the vault's item size limit (\(limit) bytes)") }
        guard status == 0 else { throw .invalidArgument("\(path): gpg could not decrypt it (status \(status))") }
        return content
    }

    @discardableResult
    private static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }
}
