import Foundation
import Testing

/// pam_keychainfs.so through pamtester, for a user with a known login password: login unlocks
/// the user's running keychain or mounts the vault, a password change rewraps it, and a vault
/// whose passphrase is another is left as it was with one log line, never a failed login.
@Suite(.serialized, .tags(.mount))
struct PAMLoginTests {
    /// Shell functions for the scripts: a vault with passphrase $1 holding `item`, its mount at
    /// ~/mnt, a login with $1 as the password.
    private static let steps = #"""
        makeVault() {
            printf %s "$1" | asuser sh -c 'umask 077; cat > pw'
            asuser "$KFS" init --kdf interactive --vault "$VAULT" --passphrase-file pw >/dev/null 2>&1
            asuser mkdir -p mnt
            asuser "$KFS" mount --vault "$VAULT" --passphrase-file pw mnt >/dev/null 2>&1
            asuser sh -c 'printf "the secret" > mnt/item'
        }
        lockVault() {
            asuser "$KFS" lock mnt
            if asuser cat mnt/item 2>/dev/null; then echo "readable while locked"; exit 1; fi
        }
        login() { printf '%s\n' "$1" | pamtester "$SERVICE" "$U" authenticate open_session close_session; }
        opens() { printf %s "$1" | asuser "$KFS" ls --vault "$VAULT" --passphrase-file - >/dev/null 2>&1; }
        NEW="new login password 2"

        """#

    @Test func loginUnlocksTheRunningLockedMountOfTheUsersVault() throws {
        let f = try PAMLogin()
        let result = try f.run(Self.steps + #"""
            makeVault "$PASSWORD"
            lockVault
            login "$PASSWORD"
            asuser cat mnt/item
            """#)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        #expect(result.stdoutText.hasSuffix("the secret"))
        #expect(f.moduleLogLines.count == 1 && f.moduleLogLines.first?.contains("unlocked") == true, "\(f.moduleLogLines)")
    }

    /// The running keychain may be a `secret-service` without a mount: login unlocks it too.
    @Test(.tags(.bus)) func loginUnlocksTheRunningLockedSecretService() throws {
        let f = try PAMLogin()
        // After the fixture: usermod does not move the home of a user whose processes run.
        let bus = try PrivateSessionBus(user: PAMLogin.userName)
        let result = try f.run(Self.steps + """
            makeVault "$PASSWORD"
            asuser "$KFS" unmount mnt
            # Not through asuser, a function: $! must be the daemon's pid, not a subshell's.
            setpriv --reuid "$U" --regid "$U" --clear-groups --reset-env env -i HOME="$HOME_" XDG_RUNTIME_DIR="/run/user/$UID_" \\
                PATH=/usr/bin:/bin DBUS_SESSION_BUS_ADDRESS='\(bus.address)' \\
                "$KFS" secret-service --vault "$VAULT" --passphrase-file pw >/dev/null 2>&1 &
            service=$!
            tries=0
            until asuser "$KFS" get item --vault "$VAULT" >/dev/null 2>&1; do
                tries=$((tries + 1)); [ $tries -lt 400 ] || { echo "the secret-service did not serve"; exit 1; }; sleep 0.05
            done
            asuser "$KFS" lock --vault "$VAULT"
            if asuser "$KFS" get item --vault "$VAULT" 2>/dev/null; then echo "readable while locked"; exit 1; fi
            login "$PASSWORD"
            asuser "$KFS" get item --vault "$VAULT"
            """)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        #expect(result.stdoutText.hasSuffix("the secret"))
    }

    @Test func aWrongPasswordUnlocksNothing() throws {
        let f = try PAMLogin()
        let result = try f.run(Self.steps + #"""
            makeVault "$PASSWORD"
            lockVault
            if login "not the password"; then echo "logged in"; exit 1; fi
            if asuser cat mnt/item; then echo "unlocked"; exit 1; fi
            echo "still locked"
            """#)
        #expect(result.status == 0 && result.stdoutText.contains("still locked"), "\(result.stdoutText) \(result.stderr)")
        #expect(f.moduleLogLines.isEmpty, "\(f.moduleLogLines)")
    }

    @Test func aVaultWithAnotherPassphraseStaysLockedAndTheLoginSucceedsWithOneLogLine() throws {
        let f = try PAMLogin()
        let result = try f.run(Self.steps + #"""
            makeVault "a vault passphrase of its own"
            lockVault
            login "$PASSWORD"
            if asuser cat mnt/item; then echo "unlocked"; exit 1; fi
            echo "still locked"
            """#)
        #expect(result.status == 0 && result.stdoutText.contains("still locked"), "\(result.stdoutText) \(result.stderr)")
        #expect(f.moduleLogLines.count == 1, "\(f.moduleLogLines)")
        #expect(f.moduleLogLines.first?.contains("not the login password; left locked") == true, "\(f.moduleLogLines)")
        #expect(!procText(f.log).contains(f.password))
    }

    /// With no daemon serving the vault, login mounts it where the module's line
    /// (`mount=~/secrets`) or the user's ~/.config/keychainfs/login-mount says.
    @Test(arguments: [true, false])
    func withNothingRunningLoginMountsTheConfiguredVault(byModuleArgument: Bool) throws {
        let f = try PAMLogin(moduleArguments: byModuleArgument ? "mount=~/secrets" : "")
        let configure = byModuleArgument ? "" : #"asuser sh -c 'mkdir -p .config/keychainfs && echo "~/secrets" > .config/keychainfs/login-mount'"#
        let result = try f.run(Self.steps + """
            makeVault "$PASSWORD"
            asuser "$KFS" unmount mnt
            \(configure)
            login "$PASSWORD"
            asuser cat secrets/item
            """)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        #expect(result.stdoutText.hasSuffix("the secret"))
        #expect(f.moduleLogLines.count == 1 && f.moduleLogLines.first?.contains("mounted") == true, "\(f.moduleLogLines)")
    }

    @Test func withoutAVaultLoginDoesNothingAndSaysNothing() throws {
        let f = try PAMLogin(moduleArguments: "mount=~/secrets")
        let result = try f.run(Self.steps + #"""
            login "$PASSWORD"
            if [ -e secrets ]; then echo "made a mountpoint"; exit 1; fi
            """#)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        #expect(f.moduleLogLines.isEmpty, "\(f.moduleLogLines)")
    }

    /// While the vault is mounted (and locked) too: the next login unlocks it with the new password.
    @Test func aPasswordChangeKeepsTheVaultsPassphraseInStep() throws {
        let f = try PAMLogin()
        let result = try f.run(Self.steps + #"""
            makeVault "$PASSWORD"
            lockVault
            printf '%s\n%s\n%s\n' "$PASSWORD" "$NEW" "$NEW" | pamtester "$SERVICE" "$U" 'chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)'
            login "$NEW"
            asuser cat mnt/item >/dev/null || { echo "the next login did not unlock the running mount"; exit 1; }
            opens "$NEW" || { echo "the new password does not open the vault"; exit 1; }
            if opens "$PASSWORD"; then echo "the old password still opens the vault"; exit 1; fi
            echo "in step"
            """#)
        #expect(result.status == 0 && result.stdoutText.contains("in step"), "\(result.stdoutText) \(result.stderr)")
        // One for the change, one for the unlock at the next login.
        #expect(f.moduleLogLines.count == 2 && f.moduleLogLines.first?.contains("follows") == true, "\(f.moduleLogLines)")
    }

    @Test func aPasswordChangeLeavesAVaultWithAnotherPassphraseAlone() throws {
        let f = try PAMLogin()
        let result = try f.run(Self.steps + #"""
            makeVault "a vault passphrase of its own"
            asuser "$KFS" unmount mnt
            printf '%s\n%s\n%s\n' "$PASSWORD" "$NEW" "$NEW" | pamtester "$SERVICE" "$U" 'chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)'
            opens "a vault passphrase of its own" || { echo "the vault's own passphrase no longer opens it"; exit 1; }
            if opens "$NEW"; then echo "the new login password opens the vault"; exit 1; fi
            echo "untouched"
            """#)
        #expect(result.status == 0 && result.stdoutText.contains("untouched"), "\(result.stdoutText) \(result.stderr)")
        #expect(f.moduleLogLines.count == 1, "\(f.moduleLogLines)")
        #expect(f.moduleLogLines.first?.contains("not the old login password; left as it was") == true, "\(f.moduleLogLines)")
    }

    /// The passwords reach `keychainfs pam-session` and `pam-passwd` on pipes: not in their
    /// arguments or environment, which other processes read in /proc.
    @Test func thePasswordsAreInNoArgumentOrEnvironment() throws {
        let f = try PAMLogin(moduleArguments: "mount=~/secrets", recording: true)
        let result = try f.run(Self.steps + #"""
            makeVault "$PASSWORD"
            asuser "$KFS" unmount mnt
            login "$PASSWORD"
            asuser cat secrets/item >/dev/null
            printf '%s\n%s\n%s\n' "$PASSWORD" "$NEW" "$NEW" | pamtester "$SERVICE" "$U" 'chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)'
            """#)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        #expect(f.recorded.contains("pam-session") && f.recorded.contains("pam-passwd"), "\(f.recorded)")
        #expect(!f.recorded.contains(f.password) && !f.recorded.contains("new login password"), "\(f.recorded)")
    }

    /// `keychainfs pam-session` and `pam-passwd` become the user only when root runs them (the
    /// PAM host): a user who runs them for another user is refused before anything is read.
    @Test func aUserCannotActAsAnotherThroughTheHiddenCommands() throws {
        let f = try PAMLogin()
        let result = try f.run(#"""
            for command in pam-session pam-passwd; do
                if printf 'guess' | asuser "$KFS" "$command" --user root 3</dev/null 2>"$SCRATCH/err"; then
                    echo "$command ran as root"; exit 1
                fi
                grep -q "cannot become root" "$SCRATCH/err" || { cat "$SCRATCH/err"; exit 1; }
            done
            echo refused
            """#)
        #expect(result.status == 0 && result.stdoutText.contains("refused"), "\(result.stdoutText) \(result.stderr)")
    }
}
