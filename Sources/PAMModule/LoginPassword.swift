import CPAM
import CSodium
import Glibc

/// The login password between auth and session, as pam_gnome_keyring keeps it: a copy in
/// sodium_malloc memory (locked, guarded) attached to the PAM handle, wiped and freed by libpam's
/// cleanup when replaced or at pam_end.
enum LoginPassword {
    private static let dataName = "keychainfs_login_password"

    static func keep(from handle: OpaquePointer) -> Bool {
        guard sodium_init() >= 0, let token = PAMHandle.stringItem(handle, PAM_AUTHTOK) else { return false }
        let length = strlen(token)
        guard let copy = sodium_malloc(length + 1) else { return false }
        memcpy(copy, token, length + 1)
        guard pam_set_data(handle, dataName, copy, wipe) == PAM_SUCCESS else {
            sodium_free(copy)
            return false
        }
        return true
    }

    static func kept(in handle: OpaquePointer) -> UnsafePointer<CChar>? {
        var data: UnsafeRawPointer?
        guard pam_get_data(handle, dataName, &data) == PAM_SUCCESS, let data else { return nil }
        let password = data.assumingMemoryBound(to: CChar.self)
        return password.pointee == 0 ? nil : password
    }

    /// Replacing the data runs the cleanup on the copy; nothing is kept in its place.
    static func forget(in handle: OpaquePointer) {
        pam_set_data(handle, dataName, nil, nil)
    }
}

/// sodium_free zeroes the memory before it unmaps it.
private let wipe: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Void = { _, data, _ in
    if let data { sodium_free(data) }
}
