import Foundation
import Glibc
import Testing

/// The background daemon's stderr is a journal stream when journald runs, so what the Swift
/// runtime says as the daemon dies is kept; without a journal it is /dev/null, as before. Each
/// test runs in a mount namespace of its own whose /run is a fresh tmpfs: a stand-in journald
/// listens on /run/systemd/journal/stdout there (or nothing does), whether or not this machine
/// runs journald, and the mount lives and dies in that namespace.
@Suite struct DaemonJournalTests {
    /// Mounts and prints the daemon's fd 2; then, with a journal, kills the daemon with SIGSEGV
    /// (as a bad pointer would end it) and waits for its crash report to reach the journal.
    private static let script = """
        mount -t tmpfs tmpfs /run
        [ -z "$XDG_RUNTIME_DIR" ] || mkdir -m 0700 -p "$XDG_RUNTIME_DIR"
        if [ -n "$JOURNAL" ]; then
            mkdir -p /run/systemd/journal
            /usr/bin/python3 -c '
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("/run/systemd/journal/stdout"); s.listen(4)
        s.settimeout(60)
        out = open(sys.argv[1], "wb")
        print("listening", flush=True)
        try:
            c, _ = s.accept()
            c.settimeout(60)
            while True:
                b = c.recv(65536)
                if not b: break
                out.write(b); out.flush()
        except socket.timeout:
            pass
        ' "$RECEIVED" > "$RECEIVED.ready" &
            until grep -q listening "$RECEIVED.ready" 2>/dev/null; do sleep 0.05; done
        fi
        "$KEYCHAINFS" mount --vault "$VAULT" --passphrase-file "$PW" "$MNT"
        pid=$(pgrep -f "[k]eychainfs mount --daemon $MNT")
        echo "fd2 $(readlink /proc/$pid/fd/2)"
        if [ -z "$CRASH" ]; then "$KEYCHAINFS" unmount "$MNT"; exit; fi
        kill -SEGV "$pid"
        # Detached, so that the lock the crash handler's SIGUSR1 sets off (it suspends threads
        # with it) cannot wait on the mount of a daemon that no longer answers.
        umount -l "$MNT"
        # The stand-in journal ends at the end of the stream: the daemon and its reporter gone.
        wait
        kill -KILL "$pid" 2>/dev/null || true
        """

    private static func crash(withJournal: Bool) throws -> (fd2: String, received: String) {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt", received = f.directory + "/journal-stream"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let result = try run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-ec", releaseOtherTestsMounts + script],
                             environment: ["KEYCHAINFS": keychainfsBinary, "VAULT": f.vault, "PW": f.passphraseFile, "MNT": mountpoint,
                                           "RECEIVED": received, "JOURNAL": withJournal ? "1" : "", "CRASH": withJournal ? "1" : ""])
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderr)")
        let fd2 = result.stdoutText.split(separator: "\n").first { $0.hasPrefix("fd2 ") }.map { String($0.dropFirst(4)) } ?? ""
        return (fd2, procText(received))
    }

    @Test func aCrashOfTheDaemonLeavesItsMessageInTheJournal() throws {
        let (fd2, received) = try Self.crash(withJournal: true)
        #expect(fd2.hasPrefix("socket:"), "\(fd2)")
        // journald's stream header: identifier, unit, priority (LOG_ERR), no level prefix.
        #expect(received.hasPrefix("keychainfs\n\n3\n0\n"), "\(received.prefix(200))")
        #expect(received.contains("Program crashed"), "\(received.prefix(400))")
        // Frames only: no register dump, whose lines show the bytes each register points at.
        #expect(!received.contains("Registers") && !received.contains("rax 0x"), "\(received)")
    }

    @Test func withoutAJournalTheDaemonsStderrIsDevNull() throws {
        let (fd2, received) = try Self.crash(withJournal: false)
        #expect(fd2 == "/dev/null")
        #expect(received.isEmpty)
    }
}
