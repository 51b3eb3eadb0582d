import CPAM

/// What the module reads from libpam's handle.
enum PAMHandle {
    static func user(_ handle: OpaquePointer) -> String? {
        var name: UnsafePointer<CChar>?
        guard pam_get_user(handle, &name, nil) == PAM_SUCCESS, let name else { return nil }
        let user = String(cString: name)
        return user.isEmpty || user.hasPrefix("-") ? nil : user
    }

    /// A token item (PAM_AUTHTOK, PAM_OLDAUTHTOK) as libpam holds it: its memory, not a copy.
    static func stringItem(_ handle: OpaquePointer, _ item: Int32) -> UnsafePointer<CChar>? {
        var value: UnsafeRawPointer?
        guard pam_get_item(handle, item, &value) == PAM_SUCCESS, let value else { return nil }
        let string = value.assumingMemoryBound(to: CChar.self)
        return string.pointee == 0 ? nil : string
    }

    static func log(_ handle: OpaquePointer, _ priority: Int32, _ message: String) {
        cpam_syslog(handle, priority, message)
    }

    /// A variable of the PAM environment (pam_systemd's XDG_RUNTIME_DIR).
    static func environment(_ handle: OpaquePointer, _ name: String) -> String? {
        pam_getenv(handle, name).map { String(cString: $0) }
    }
}
