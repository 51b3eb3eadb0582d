import FUSEDriver
import Glibc
import Support

/// What locks a mount besides the control socket: SIGUSR1, and a period without requests.
package enum LockTriggers {
    /// Blocks SIGUSR1 in the calling thread; call it before any other thread starts.
    static func blockSIGUSR1() {
        var usr1 = sigset_t()
        sigemptyset(&usr1)
        sigaddset(&usr1, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &usr1, nil)
    }

    /// Locks whenever SIGUSR1 arrives (a screen locker's or suspend hook's one line).
    static func lockOnSIGUSR1(_ fileSystem: FileSystem) {
        HelperThread.start {
            var wanted = sigset_t()
            sigemptyset(&wanted)
            sigaddset(&wanted, SIGUSR1)
            while true {
                var received: Int32 = 0
                if sigwait(&wanted, &received) == 0 && received == SIGUSR1 {
                    fileSystem.lock()
                    DaemonLog.lockedBySIGUSR1()
                }
            }
        }
    }

    static func lockWhenIdle(_ fileSystem: FileSystem, after seconds: Int) {
        HelperThread.start {
            while true {
                sleep(1)
                if !fileSystem.isLocked && fileSystem.secondsSinceActivity >= Int64(seconds) {
                    fileSystem.lock()
                    DaemonLog.lockedWhenIdle(seconds: seconds)
                }
            }
        }
    }

    /// Locks the mount once a rotation of the master key by another process (`member remove`)
    /// shuts its vault out (opened with a passphrase, or by the member removed): its requests
    /// already fail with EACCES, and this makes the mount's own state, `status` and the wipe of
    /// open items' plaintext follow within a second. A member's mount follows a rotation by
    /// itself and is never locked by one.
    static func lockWhenRotatedAway(_ fileSystem: FileSystem) {
        HelperThread.start {
            while true {
                sleep(1)
                if !fileSystem.isLocked, (try? fileSystem.vault.followRotation()) == true {
                    fileSystem.lock()
                    DaemonLog.lockedByRotation()
                }
            }
        }
    }

    /// "30s", "15m", "1h", "1h30m", or plain seconds.
    package static func parseDuration(_ text: String) -> Int? {
        if let seconds = Int(text), seconds > 0 { return seconds }
        var total = 0
        var number = ""
        for character in text {
            if character.isNumber {
                number.append(character)
                continue
            }
            guard let value = Int(number) else { return nil }
            switch character {
            case "s": total += value
            case "m": total += value * 60
            case "h": total += value * 3600
            case "d": total += value * 86400
            default: return nil
            }
            number = ""
        }
        return number.isEmpty && total > 0 ? total : nil
    }
}
