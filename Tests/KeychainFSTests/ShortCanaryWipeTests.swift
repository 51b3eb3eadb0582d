import Foundation
import Glibc
import Testing

/// Short secrets are held inline in Swift values (15 bytes or less) and so pass through
/// thread stacks and registers; the lock and the unmount must wipe those too.
///
/// Every canary is distinct random text of its length. A scan of the whole process for 1 byte
/// says nothing (every process holds every byte value), so 1-byte contents and names are
/// stored, read and locked like the others, which runs the same code over them, but only
/// lengths of 4 bytes and more are searched for: 8 bytes and up of random letters and digits
/// cannot occur by chance in the daemon's memory (62^8 > 2^47).
@Suite(.serialized, .tags(.mount, .bus, .slow)) struct ShortCanaryWipeTests {
    static let lengths = [1, 8, 13, 15, 16, 31]
    static let scannable = 4

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// Distinct random names/contents of `length` bytes, none equal to another canary.
    private static func canaries(_ length: Int, count: Int) -> [String] {
        var chosen: [String] = []
        while chosen.count < count {
            let text = String(decoding: (0..<length).map { _ in alphabet.randomElement()! }, as: UTF8.self)
            if !chosen.contains(text) { chosen.append(text) }
        }
        return chosen
    }

    /// Contents and names stored by the CLI and through the mount; each read in turn (cat,
    /// then ls, then a lookup, then a lookup of a name that is not there) as the last request
    /// before `keychainfs lock`; then the whole daemon is scanned for all of them.
    @Test(arguments: lengths)
    func noContentOrNameOfThisLengthSurvivesALock(length: Int) throws {
        let m = try MountFixture()
        let c = Self.canaries(length, count: 5)
        let (cliName, cliContent, mountName, mountContent, missing) = (c[0], c[1], c[2], c[3], c[4])
        let set = try m.cli.cli(["set", cliName, cliContent])
        #expect(set.exitStatus == .success, "\(set.stderr)")
        #expect(writeFile(m.path(mountName), Array(mountContent.utf8)) == 0)
        let pid = try status(m.mountpoint).pid
        let labels = ["CLI name", "CLI content", "mount name", "mount content", "missing name"]
        let lastRequests: [(String, () throws -> Void)] = [
            ("cat of the CLI's item", { #expect(readFile(m.path(cliName)) == Array(cliContent.utf8)) }),
            ("cat of the mount's item", { #expect(readFile(m.path(mountName)) == Array(mountContent.utf8)) }),
            ("ls", { () throws in let listed = try sh("ls -l \(m.mountpoint) >/dev/null"); #expect(listed.status == 0) }),
            ("lookup", { var st = stat(); #expect(stat(m.path(cliName), &st) == 0 && stat(m.path(mountName), &st) == 0) }),
            ("lookup of a missing name", { #expect(errnoOf { open(m.path(missing), O_RDONLY) } == ENOENT) }),
        ]
        for (what, last) in lastRequests {
            try last()
            #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
            if length >= Self.scannable {
                let found = processMemoryHits(pid, c.map { Array($0.utf8) })
                #expect(found.isEmpty, "after \(what) and a lock, found: \(found.sorted().map { labels[$0] }) (\(length) bytes)")
            }
            #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        }
        // The scan sees these canaries when they are there: an open item holds its content.
        if length >= Self.scannable {
            let fd = open(m.path(mountName), O_RDONLY | O_CLOEXEC)
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: length)
            #expect(pread(fd, &buffer, length, 0) == length)
            #expect(processMemoryHits(pid, [Array(mountContent.utf8)]) == [0], "the scanner misses an open item's content")
        }
    }

    /// The other ways in: a secret and its label read through the Secret Service (the bus
    /// thread), and an item read by `keychainfs exec` through the control socket (a thread of
    /// its own per request), each as the last request before the lock.
    @Test func noShortSecretReadThroughTheBusOrTheControlSocketSurvivesALock() throws {
        let s = try SecretServiceFixture()
        let pid = try status(s.mountpoint).pid
        for length in Self.lengths where length >= Self.scannable {
            let c = Self.canaries(length, count: 4)
            let (label, secret, attribute, execSecret) = (c[0], c[1], c[2], c[3])
            let stored = try s.secretTool(["store", "--label=" + label, "canary", attribute], stdin: secret)
            #expect(stored.status == 0, "\(stored.stderr)")
            #expect(try s.cli.cli(["set", "exec-" + attribute, execSecret]).exitStatus == .success)
            let reads: [(String, () throws -> Void)] = [
                ("secret-tool lookup", {
                    let looked = try s.secretTool(["lookup", "canary", attribute])
                    #expect(looked.stdoutText == secret, "\(looked.stderr)")
                }),
                ("keychainfs exec", {
                    let script = "test \"$S\" = \(execSecret)"
                    let ran = try s.cli.cli(["exec", "--env", "S=exec-" + attribute, "--", "/bin/sh", "-c", script])
                    #expect(ran.exitStatus == .success, "\(ran.stderr)")
                }),
            ]
            for (what, last) in reads {
                try last()
                #expect(try run(keychainfsBinary, ["lock", s.mountpoint]).exitStatus == .success)
                let found = processMemoryHits(pid, c.map { Array($0.utf8) })
                #expect(found.isEmpty, "after \(what) and a lock, found: \(found.sorted().map { ["label", "secret", "attribute", "exec secret"][$0] }) (\(length) bytes)")
                #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", s.cli.passphraseFile, s.mountpoint]).exitStatus == .success)
            }
        }
    }

    /// The same canaries, read last before an unmount: what the daemon holds once its wipe is
    /// done and before it exits.
    @Test func noShortContentOrNameSurvivesAnUnmount() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        var canaries: [String] = []
        for length in Self.lengths where length >= Self.scannable {
            let c = Self.canaries(length, count: 2)
            canaries += c
            #expect(try f.cli(["set", c[0], c[1]]).exitStatus == .success)
        }
        let mounted = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint],
                              environment: ["KEYCHAINFS_TEST_PAUSE_BEFORE_EXIT": "20"])
        #expect(mounted.exitStatus == .success)
        defer { if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) } }
        let pid = try status(mountpoint).pid
        defer { kill(pid, SIGKILL) }
        var written: [String] = []
        for length in Self.lengths where length >= Self.scannable {
            let c = Self.canaries(length, count: 2)
            written += c
            #expect(writeFile(mountpoint + "/" + c[0], Array(c[1].utf8)) == 0)
        }
        canaries += written
        #expect(try sh("ls -l \(mountpoint) >/dev/null").status == 0)
        for index in stride(from: 0, to: canaries.count, by: 2) {
            #expect(readFile(mountpoint + "/" + canaries[index]) == Array(canaries[index + 1].utf8))
        }
        #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
        #expect(try eventually(within: 10) { try run(keychainfsBinary, ["status", mountpoint]).exitStatus != .success },
                "the daemon did not finish its wipe")
        #expect(kill(pid, 0) == 0, "the daemon should still be pausing")
        let found = processMemoryHits(pid, canaries.map { Array($0.utf8) })
        #expect(found.isEmpty, "after an unmount, found: \(found.sorted().map { canaries[$0] })")
    }
}
