import Daemon

/// What `secret-service --status --json` prints; `owner` and `pid` are left out when nobody owns the name.
struct SecretServiceStatusJSON: Encodable {
    let owner: String?
    let pid: Int32?
    let command: String?
    let executable: String?
    let ours: Bool
    let vault: String?
    let activatable: Bool

    init(_ ownership: SecretServiceOwnership) {
        owner = ownership.owner?.uniqueName
        pid = ownership.owner?.pid
        command = ownership.command
        executable = ownership.executable
        ours = ownership.isKeychainFS
        vault = ownership.vault
        activatable = ownership.activatable
    }
}
