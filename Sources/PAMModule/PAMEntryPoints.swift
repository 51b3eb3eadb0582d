import CPAM
import CSodium

// The entry points libpam looks up by name. None of them ever fails a login or a password
// change: what the keychain could not do is one line in the system log, and the stack decides.

public typealias PAMArguments = UnsafeMutablePointer<UnsafePointer<CChar>?>?

/// auth: the login password, kept in locked memory until the session opens (or the handle ends).
@_cdecl("pam_sm_authenticate")
public func keychainfsAuthenticate(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: PAMArguments) -> Int32 {
    guard let handle else { return PAM_IGNORE }
    return LoginPassword.keep(from: handle) ? PAM_SUCCESS : PAM_IGNORE
}

@_cdecl("pam_sm_setcred")
public func keychainfsSetCredentials(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: PAMArguments) -> Int32 {
    PAM_SUCCESS
}

/// session: unlock the user's running keychain with the kept password, or start the configured one.
@_cdecl("pam_sm_open_session")
public func keychainfsOpenSession(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: PAMArguments) -> Int32 {
    guard let handle, let user = PAMHandle.user(handle) else { return PAM_SUCCESS }
    // Fingerprint, autologin, an ssh key: no password, nothing to unlock with.
    guard let password = LoginPassword.kept(in: handle) else { return PAM_SUCCESS }
    let arguments = ModuleArguments(argc: argc, argv: argv)
    let child = KeychainFSChild(program: arguments.program, handle: handle)
    child.run(["pam-session", "--user", user] + arguments.passedOn, secrets: [password], name: "login")
    // Used once: the password leaves this process's memory now rather than at pam_end.
    LoginPassword.forget(in: handle)
    return PAM_SUCCESS
}

@_cdecl("pam_sm_close_session")
public func keychainfsCloseSession(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: PAMArguments) -> Int32 {
    PAM_SUCCESS
}

/// password: once the new login password is set, the vault's passphrase follows it, when the
/// old login password was the vault's passphrase.
@_cdecl("pam_sm_chauthtok")
public func keychainfsChangeAuthenticationToken(_ handle: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: PAMArguments) -> Int32 {
    guard let handle, flags & Int32(PAM_UPDATE_AUTHTOK) != 0, let user = PAMHandle.user(handle),
          let old = PAMHandle.stringItem(handle, PAM_OLDAUTHTOK), let new = PAMHandle.stringItem(handle, PAM_AUTHTOK)
    else { return PAM_IGNORE }
    let arguments = ModuleArguments(argc: argc, argv: argv)
    let child = KeychainFSChild(program: arguments.program, handle: handle)
    child.run(["pam-passwd", "--user", user] + arguments.passedOn, secrets: [old, new], name: "password change")
    return PAM_SUCCESS
}
