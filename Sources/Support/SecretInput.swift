import CLinux
import Glibc
import SystemCalls
import SystemPackage
import VaultCore

/// Reads secrets (passphrases, item values) from files, pipes, commands and the terminal
/// straight into locked memory.
package enum SecretInput {
    package static let maximumPassphraseBytes = 4096

    package enum ReadOutcome { case complete, overLimit }

    /// Reads `fd` to end of file into `buffer`, stopping once more than `limit` bytes arrived
    /// (the extra byte is kept so the caller can tell) or, with `stopAtNewline`, after a newline.
    package static func read(_ fd: Int32, into buffer: inout SecureBuffer, limit: Int, stopAtNewline: Bool = false) throws(VaultError) -> ReadOutcome {
        while true {
            if buffer.count > limit { return .overLimit }
            if buffer.capacity - buffer.count < 4096 { try buffer.reserve(min(max(buffer.capacity * 2, 4096), limit + 1 + 4096)) }
            var got = 0
            let before = buffer.count
            do {
                // One read, not until full: a terminal or a pipe answers a line at a time.
                try buffer.withUnsafeMutableStorage { (storage) throws(Errno) in
                    let room = min(storage.count - before, limit + 1 - before)
                    got = try SystemCall.typed { try FileDescriptor(rawValue: fd).read(into: UnsafeMutableRawBufferPointer(rebasing: storage[before..<before + room])) }
                    return before + got
                }
            } catch {
                throw .invalidArgument("cannot read input: \(error)")
            }
            if got == 0 { return .complete }
            if stopAtNewline, buffer.withUnsafeBytes({ $0[before..<before + got].contains(0x0A) }) { return .complete }
        }
    }

    /// Reads exactly `count` bytes (a length-prefixed secret on a socket); false on early end.
    package static func read(_ fd: Int32, into buffer: inout SecureBuffer, exactly count: Int) throws(VaultError) -> Bool {
        try buffer.reserve(count)
        let before = buffer.count
        guard before < count else { return true }
        do {
            try buffer.withUnsafeMutableStorage { (storage) throws(Errno) in
                before + (try FileDescriptor(rawValue: fd).readFully(into: UnsafeMutableRawBufferPointer(rebasing: storage[before..<count])))
            }
        } catch {
            return false
        }
        return buffer.count == count
    }

    /// Drops one trailing newline (and a carriage return before it).
    package static func dropTrailingNewline(_ buffer: inout SecureBuffer) {
        let count = buffer.count
        guard count > 0, buffer.withUnsafeBytes({ $0[count - 1] }) == 0x0A else { return }
        let crlf = count > 1 && buffer.withUnsafeBytes { $0[count - 2] } == 0x0D
        buffer.setCount(count - (crlf ? 2 : 1))
    }

    /// The passphrase from `--passphrase-file`, `--extpass`, or the terminal.
    package static func passphrase(file: String?, command: String?, prompt: String, confirm: Bool) throws(VaultError) -> SecureBuffer {
        var passphrase = try SecureBuffer(capacity: 256)
        if let file {
            try read(file, naming: "passphrase", into: &passphrase)
        } else if let command {
            try readFromCommand(command, into: &passphrase)
        } else {
            passphrase = try readFromTerminal(prompt: prompt)
            if confirm {
                let again = try readFromTerminal(prompt: "Repeat the passphrase: ")
                guard passphrase.hasSameBytes(as: again) else { throw .invalidArgument("the passphrases do not match") }
            }
        }
        dropTrailingNewline(&passphrase)
        guard passphrase.count > 0 else { throw .invalidArgument("the passphrase is empty") }
        return passphrase
    }

    /// A TPM PIN from `file` (`--pin-file`, '-' for standard input) or the terminal, there
    /// asked twice with `confirm` (a new PIN). One trailing newline is dropped.
    package static func pin(file: String?, prompt: String = "TPM PIN: ", confirm: Bool) throws(VaultError) -> SecureBuffer {
        var pin = try SecureBuffer(capacity: 256)
        if let file {
            try read(file, naming: "PIN", into: &pin)
        } else {
            let noTerminal = "no PIN: not on a terminal; use --pin-file FILE"
            pin = try readFromTerminal(prompt: prompt, noTerminal: noTerminal)
            if confirm {
                let again = try readFromTerminal(prompt: "Repeat the PIN: ", noTerminal: noTerminal)
                guard pin.hasSameBytes(as: again) else { throw .invalidArgument("the PINs do not match") }
            }
        }
        dropTrailingNewline(&pin)
        guard pin.count > 0 else { throw .invalidArgument("the PIN is empty") }
        return pin
    }

    /// The whole of `file` ('-': standard input), the `what` of its error messages.
    private static func read(_ file: String, naming what: String, into buffer: inout SecureBuffer) throws(VaultError) {
        let fd: Int32
        do {
            fd = file == "-" ? 0 : try SystemCall.retrying { open(file, O_RDONLY | O_CLOEXEC) }
        } catch {
            throw .invalidArgument("cannot open \(what) file \(file): \(error)")
        }
        defer { if fd != 0 { close(fd) } }
        guard try read(fd, into: &buffer, limit: maximumPassphraseBytes) == .complete else {
            throw .invalidArgument("the \(what) file is longer than \(maximumPassphraseBytes) bytes")
        }
    }

    /// `--extpass`: the standard output of `sh -c COMMAND`, as gocryptfs and ssh-askpass do.
    private static func readFromCommand(_ command: String, into buffer: inout SecureBuffer) throws(VaultError) {
        let (outcome, status) = try output(of: ["/bin/sh", "-c", command], searchingPath: false, into: &buffer,
                                           limit: maximumPassphraseBytes) { .invalidArgument("--extpass: \($0)") }
        guard outcome == .complete else { throw .invalidArgument("the --extpass output is longer than \(maximumPassphraseBytes) bytes") }
        guard status == 0 else { throw .invalidArgument("the --extpass command failed (status \(status))") }
    }

    /// Runs `arguments` (the program found on PATH when `searchingPath`) with its standard
    /// output read from a pipe into `buffer`, locked memory, at most `limit` bytes (a program
    /// that writes more, or whose output cannot be read, is killed), and waits for it: the
    /// read's outcome and the exit status as a shell reports it. `failure` words the error
    /// when it cannot be started; a pipe that cannot be made is a storage failure (no
    /// descriptors left), whoever asks.
    package static func output(of arguments: [String], searchingPath: Bool, into buffer: inout SecureBuffer, limit: Int,
                       failure: (String) -> VaultError) throws(VaultError) -> (outcome: ReadOutcome, status: Int32) {
        var pipeFDs: [Int32] = [0, 0]
        do {
            try SystemCall.once { pipe(&pipeFDs) }
        } catch {
            throw .storageFailure("cannot create a pipe for \(arguments[0]): \(error)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = searchingPath ? posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
                               : posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        close(pipeFDs[1])
        defer { close(pipeFDs[0]) }
        guard rc == 0 else { throw failure("cannot run \(arguments[0]): \(Errno(rawValue: rc))") }
        func reap() -> Int32 {
            Subprocess.exitStatus((try? SystemCall.waitStatus(of: pid)) ?? 0)
        }
        let outcome: ReadOutcome
        do throws(VaultError) {
            outcome = try read(pipeFDs[0], into: &buffer, limit: limit)
        } catch {
            kill(pid, SIGKILL)
            _ = reap()
            throw error
        }
        if outcome == .overLimit { kill(pid, SIGKILL) }
        return (outcome, reap())
    }

    /// A line from /dev/tty with echo off.
    private static func readFromTerminal(
        prompt: String, noTerminal: String = "no passphrase: not on a terminal; use --passphrase-file FILE or --extpass COMMAND"
    ) throws(VaultError) -> SecureBuffer {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { throw .invalidArgument(noTerminal) }
        defer { close(tty) }
        var saved = termios()
        let haveTermios = tcgetattr(tty, &saved) == 0
        if haveTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer { if haveTermios { tcsetattr(tty, TCSAFLUSH, &saved) } }
        Terminal.writeAll(tty, prompt)
        var line = try SecureBuffer(capacity: 256)
        guard try read(tty, into: &line, limit: maximumPassphraseBytes, stopAtNewline: true) == .complete else {
            throw .invalidArgument("the passphrase is longer than \(maximumPassphraseBytes) bytes")
        }
        dropTrailingNewline(&line)
        return line
    }
}
