import Foundation
import Glibc
import Testing

struct StatusReport {
    let json: String
    var pid: pid_t { pid_t(field("pid")) ?? 0 }
    var locked: Bool { field("locked") == "true" }

    func field(_ name: String) -> String {
        guard let range = json.range(of: "\"\(name)\":") else { return "" }
        return String(json[range.upperBound...].prefix { $0 != "," && $0 != "}" }).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }
}

func status(_ mountpoint: String) throws -> StatusReport {
    StatusReport(json: try run(keychainfsBinary, ["status", "--json", mountpoint]).stdoutText)
}

@Suite(.tags(.mount, .slow)) struct LockTests {
    @Test func lockedMountAnswersEACCESUntilUnlockedEvenThroughOpenDescriptors() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("app"), 0o700) == 0)
        #expect(writeFile(m.path("app/token"), Array("token".utf8)) == 0)
        let fd = open(m.path("app/token"), O_RDWR | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(try status(m.mountpoint).locked == false)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(try status(m.mountpoint).locked)
        var st = stat()
        #expect(stat(m.mountpoint, &st) == 0)  // the mountpoint itself stays visible
        #expect(errnoOf { stat(m.path("app/token"), &st) } == EACCES)
        #expect(errnoOf { open(m.path("app/token"), O_RDONLY) } == EACCES)
        #expect(errnoOf { opendir(m.mountpoint) == nil ? -1 : 0 } == EACCES)
        #expect(errnoOf { mkdir(m.path("new"), 0o700) } == EACCES)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(errnoOf { Int32(pread(fd, &buffer, 16, 0)) } == EACCES)
        #expect(errnoOf { Int32(pwrite(fd, "x", 1, 0)) } == EACCES)

        let wrong = try m.cli.write("not it\n", to: "wrong")
        let refused = try run(keychainfsBinary, ["unlock", "--passphrase-file", wrong, m.mountpoint])
        #expect(refused.exitStatus == .wrongPassphrase)
        #expect(try status(m.mountpoint).locked)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(try status(m.mountpoint).locked == false)
        #expect(pread(fd, &buffer, 16, 0) == 5 && Array(buffer[0..<5]) == Array("token".utf8))
        #expect(readFile(m.path("app/token")) == Array("token".utf8))
    }

    @Test func aWritePendingWhenTheLockComesIsRefusedWithAnErrorNeverStoredHalfWay() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("draft"), Array("user=alice\npassword=old\n".utf8)) == 0)
        let writer = try HeldDescriptor(m.path("draft"), "O_WRONLY|O_TRUNC")
        #expect(writer.send("pwrite 0 user=alice") == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(writer.send("pwrite 10 password=new") == EACCES)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(writer.send("pwrite 10 password=new") == EACCES)  // the descriptor stays refused
        #expect(writer.send("close") == EACCES)  // the close says so: nothing is dropped silently
        #expect(try storedContent(m, "draft") == "user=alice\npassword=old\n")
    }

    @Test func unlockingIsNotUndoneByTheIdleLock() throws {
        let m = try MountFixture()
        try m.unmount()
        #expect(try m.mount(extra: ["--idle-lock", "1s"]).exitStatus == .success)
        #expect(writeFile(m.path("x"), [7]) == 0)
        var locked = false
        for _ in 0..<50 where !locked {
            usleep(100_000)
            locked = try status(m.mountpoint).locked
        }
        #expect(locked)
        func idleSeconds(_ report: StatusReport) -> Int? { Int(report.field("idle_seconds").trimmingCharacters(in: .whitespaces)) }
        // Idle well past the idle time: an unlock that did not start it again would be undone at the next tick.
        #expect(try eventually { try idleSeconds(status(m.mountpoint)).map { $0 >= 3 } == true })
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        let unlocked = try status(m.mountpoint)
        #expect(unlocked.locked == false)
        #expect(idleSeconds(unlocked).map { $0 < 3 } == true, "the idle time did not start again: \(unlocked.json)")
        #expect(readFile(m.path("x")) == [7])
    }

    @Test func anOpenDirectoryAnswersEACCESOnceLocked() throws {
        let m = try MountFixture()
        fillWithLongNames(m, in: "")
        guard let dir = opendir(m.mountpoint) else { Issue.record("opendir failed"); return }
        defer { closedir(dir) }
        #expect(readdir(dir) != nil)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        var names = 0
        errno = 0
        while readdir(dir) != nil { names += 1 }
        // What the first getdents already fetched may still come out of libc's buffer, never more.
        #expect(names < 600)
        #expect(errno == EACCES)
    }

    /// A listing hands the kernel every entry with its attributes (readdirplus), as a lookup
    /// would: each must be counted, so the lock makes the kernel forget all of them. Entries of
    /// the mountpoint itself, since forgetting a subdirectory drops what lies below it anyway.
    @Test func entriesLearnedFromAListingAreForgottenAtLock() throws {
        let m = try MountFixture()
        for i in 0..<300 { #expect(writeFile(m.path("s\(i)"), Array("value \(i)".utf8)) == 0) }
        // Mounted afresh, so the kernel knows none of them but from the listing.
        try m.unmount()
        #expect(try m.mount().exitStatus == .success)
        // `ls -l` lists and stats: one LOOKUP for each entry would mean the listing carried none.
        #expect(try sh("ls -l \(m.mountpoint) > /dev/null").status == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        var refused = 0
        for i in 0..<300 {
            var st = stat()
            if errnoOf({ stat(m.path("s\(i)"), &st) }) == EACCES { refused += 1 }
        }
        #expect(refused == 300)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(try sh("cat \(m.path("s1")) \(m.path("s299"))").stdoutText == "value 1value 299")
    }

    /// A listing read in parts across a lock and unlock: the lock wipes its names; afterwards
    /// it goes on where it was if nothing changed meanwhile, and fails (EIO) rather than end
    /// early if something did.
    @Test(arguments: [false, true])
    func aListingReadAcrossALockGoesOnOrFailsNeverEndsEarly(changedWhileLocked: Bool) throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        fillWithLongNames(m, in: "d")
        let script = """
            import os, subprocess, sys
            d, kfs, mnt, vault, pw, change = sys.argv[1:7]
            entries = os.scandir(os.open(d, os.O_RDONLY | os.O_DIRECTORY))
            names = [next(entries).name]
            subprocess.run([kfs, 'lock', mnt], check=True)
            if change == 'true':
                subprocess.run([kfs, 'set', '--vault', vault, '--passphrase-file', pw, 'd/extra', 'x'], check=True)
            subprocess.run([kfs, 'unlock', '--passphrase-file', pw, mnt], check=True)
            try:
                names += [e.name for e in entries]
                print(len(names), len(set(names)))
            except OSError as e:
                print('error', e.errno)
            """
        let result = try run("/usr/bin/python3", ["-c", script, m.path("d"), keychainfsBinary, m.mountpoint, m.vault,
                                                  m.cli.passphraseFile, changedWhileLocked ? "true" : "false"])
        #expect(result.stdoutText == (changedWhileLocked ? "error \(EIO)\n" : "600 600\n"), "\(result.stderr)")
    }

    @Test func idleLockAndSIGUSR1() throws {
        let m = try MountFixture()
        try m.unmount()
        #expect(try m.mount(extra: ["--idle-lock", "2s"]).exitStatus == .success)
        #expect(writeFile(m.path("x"), [1]) == 0)
        let report = try status(m.mountpoint)
        #expect(report.field("idle_lock_seconds") == "2")
        var locked = false
        for _ in 0..<80 where !locked {
            usleep(100_000)
            locked = try status(m.mountpoint).locked
        }
        #expect(locked, "not locked after 8 s idle with --idle-lock 2s")
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(readFile(m.path("x")) == [1])
        kill(report.pid, SIGUSR1)
        var lockedBySignal = false
        for _ in 0..<50 where !lockedBySignal {
            usleep(20_000)
            lockedBySignal = try status(m.mountpoint).locked
        }
        #expect(lockedBySignal)
        #expect(errnoOf { open(m.path("x"), O_RDONLY) } == EACCES)
    }

    @Test func statusReportsTheMountAndOtherUsersAreRefused() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("a"), [1]) == 0)
        #expect(writeFile(m.path("b"), [2]) == 0)
        let report = try status(m.mountpoint)
        #expect(report.field("mountpoint") == m.mountpoint)
        #expect(report.field("vault") == m.vault)
        #expect(report.field("items") == "2")
        #expect(report.field("idle_lock_seconds") == "null")
        #expect(report.pid > 0 && kill(report.pid, 0) == 0)
        let human = try run(keychainfsBinary, ["status", m.mountpoint]).stdoutText
        #expect(human.contains("state:     unlocked") && human.contains("items:     2") && human.contains("pid \(report.pid)"))
        let all = try run(keychainfsBinary, ["status", "--json"]).stdoutText
        #expect(all.hasPrefix("[") && all.contains(m.mountpoint))
        let other = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                                 keychainfsBinary, "lock", m.mountpoint])
        #expect(other.exitStatus != .success)
        #expect(try status(m.mountpoint).locked == false)
    }

    /// `status --json` is JSON a parser takes: every field present (null when it has no
    /// value), an object for one mount and an array of them for all.
    @Test func statusJSONHasEveryFieldAndParses() throws {
        let m = try MountFixture()
        let fields: Set = ["mountpoint", "vault", "pid", "locked", "items", "idle_lock_seconds", "idle_seconds", "locks_in_seconds",
                                 "transport", "offline_since", "replica_copied_at", "server_generation", "replica_generation"]
        let one = try run(keychainfsBinary, ["status", "--json", m.mountpoint])
        #expect(one.exitStatus == .success)
        let object = try #require(try JSONSerialization.jsonObject(with: one.stdout) as? [String: Any], "\(one.stdoutText)")
        #expect(Set(object.keys) == fields)
        #expect(object["mountpoint"] as? String == m.mountpoint)
        #expect(object["idle_lock_seconds"] is NSNull && object["locks_in_seconds"] is NSNull)
        // A vault file has no offline replica.
        #expect(["offline_since", "replica_copied_at", "server_generation", "replica_generation"].allSatisfy { object[$0] is NSNull })
        #expect(object["locked"] as? Bool == false)
        // Whichever the run asked for (KEYCHAINFS_TRANSPORT), one of the two.
        #expect(["dev-fuse", "io-uring"].contains(object["transport"] as? String))
        let all = try run(keychainfsBinary, ["status", "--json"])
        let array = try #require(try JSONSerialization.jsonObject(with: all.stdout) as? [[String: Any]], "\(all.stdoutText)")
        #expect(array.contains { $0["mountpoint"] as? String == m.mountpoint && Set($0.keys) == fields })
    }

    @Test func theDaemonKeepsItsMemoryLockedAndUndumpable() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("a"), [1]) == 0)
        let pid = try status(m.mountpoint).pid
        let procStatus = procText("/proc/\(pid)/status")
        let vmLck = procStatus.split(separator: "\n").first { $0.hasPrefix("VmLck:") }.map { $0.split(separator: " ").dropFirst().first.map(String.init) ?? "0" } ?? "0"
        #expect((Int(vmLck) ?? 0) > 0, "VmLck is \(vmLck) kB")
        // Not dumpable: /proc/PID files belong to root, and core dumps are off.
        var st = stat()
        #expect(stat("/proc/\(pid)/mem", &st) == 0 && st.st_uid == 0)
        let limits = procText("/proc/\(pid)/limits")
        #expect(limits.split(separator: "\n").contains { $0.hasPrefix("Max core file size") && $0.contains(" 0 ") })
    }
}

/// The proofs that locking and unmounting leave no plaintext in the daemon's memory.
@Suite(.tags(.mount, .slow)) struct WipeProofTests {
    @Test func aLockedDaemonHoldsNoCanaryAndUnlockBringsItBack() throws {
        let m = try MountFixture()
        let canary = Array(("CANARY-" + UUID().uuidString + "-" + UUID().uuidString).utf8)
        #expect(writeFile(m.path("canary"), canary) == 0)
        let fd = open(m.path("canary"), O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: canary.count)
        #expect(pread(fd, &buffer, canary.count, 0) == canary.count && buffer == canary)
        let report = try status(m.mountpoint)
        let pid = report.pid
        // The scan can see it: the open file's plaintext is in the daemon now.
        #expect(processMemoryContains(pid, canary), "scanner did not find the canary in an unlocked daemon \(report.json)")
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(!processMemoryContains(pid, canary), "canary found in a locked daemon's memory")
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(readFile(m.path("canary")) == canary)
    }

    /// Names are secrets too: after a lock, no decrypted name is left anywhere in the daemon,
    /// whether it was listed (and the listing's handle is still open), looked up, missed,
    /// renamed, removed or refused.
    @Test func aLockedDaemonHoldsNoName() throws {
        let m = try MountFixture()
        let tag = UUID().uuidString
        let dictionary = "NAMECANARY-dictionary-" + tag
        let item = "NAMECANARY-item-" + tag
        let missing = "NAMECANARY-missing-" + tag
        let renamed = "NAMECANARY-renamed-" + tag
        let removed = "NAMECANARY-removed-" + tag
        #expect(mkdir(m.path(dictionary), 0o700) == 0)
        #expect(writeFile(m.path(dictionary + "/" + item), Array("x".utf8)) == 0)
        #expect(writeFile(m.path(dictionary + "/" + removed), Array("x".utf8)) == 0)
        #expect(writeFile(m.path(dictionary + "/tmp"), Array("x".utf8)) == 0)
        #expect(rename(m.path(dictionary + "/tmp"), m.path(dictionary + "/" + renamed)) == 0)
        #expect(unlink(m.path(dictionary + "/" + removed)) == 0)
        #expect(try sh("ls -lR \(m.mountpoint) >/dev/null").status == 0)
        let held = try HeldDescriptor(m.path(dictionary), "O_RDONLY|O_DIRECTORY")
        #expect(held.send("list") == 0)
        let pid = try status(m.mountpoint).pid
        // Last before the lock, so what their errors left is not yet overwritten.
        #expect(errnoOf { open(m.path(dictionary + "/" + missing), O_RDONLY) } == ENOENT)
        #expect(errnoOf { mkdir(m.path(dictionary + "/" + item), 0o700) } == EEXIST)
        #expect(errnoOf { rename(m.path(dictionary + "/" + missing), m.path(dictionary + "/" + item)) } == ENOENT)
        // The scanner sees names while unlocked: the open listing holds them.
        #expect(processMemoryContains(pid, Array(item.utf8)), "scanner did not find a listed name in an unlocked daemon")
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).status == 0)
        for name in [dictionary, item, missing, renamed, removed] {
            #expect(!processMemoryContains(pid, Array(name.utf8)), "\(name) found in a locked daemon's memory")
        }
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).status == 0)
        #expect(held.send("list") == 0)  // the listing goes on after unlock: nothing changed
        #expect(held.send("close") == 0)
        #expect(listing(m.path(dictionary)) == [item, renamed])
    }

    @Test func thePassphraseIsGoneRightAfterMounting() throws {
        let phrase = "passphrase-canary-" + UUID().uuidString
        let m = try MountFixture(passphrase: phrase)
        let pid = try status(m.mountpoint).pid
        // The scanner works on this process: the vault's path (a plain string) is found.
        #expect(processMemoryContains(pid, Array(m.vault.utf8)))
        #expect(!processMemoryContains(pid, Array(phrase.utf8)), "passphrase found in the daemon's memory")
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(!processMemoryContains(pid, Array(phrase.utf8)), "passphrase found in the daemon's memory after unlock")
    }

    @Test func anUnmountedDaemonHoldsNoCanaryBeforeItExits() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint],
                              environment: ["KEYCHAINFS_TEST_PAUSE_BEFORE_EXIT": "20"])
        #expect(mounted.exitStatus == .success)
        defer { if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) } }
        let canary = Array(("UNMOUNT-CANARY-" + UUID().uuidString).utf8)
        let name = "UNMOUNT-NAMECANARY-" + UUID().uuidString
        #expect(writeFile(mountpoint + "/" + name, canary) == 0)
        let fd = open(mountpoint + "/" + name, O_RDONLY | O_CLOEXEC)
        var buffer = [UInt8](repeating: 0, count: canary.count)
        #expect(pread(fd, &buffer, canary.count, 0) == canary.count)
        let directory = try HeldDescriptor(mountpoint, "O_RDONLY|O_DIRECTORY")
        #expect(directory.send("list") == 0)  // a listing with the name, still open
        let pid = try status(mountpoint).pid
        #expect(processMemoryContains(pid, canary))
        #expect(processMemoryContains(pid, Array(name.utf8)))
        kill(pid, SIGTERM)  // with the file still open: the daemon must wipe it anyway
        var gone = false
        for _ in 0..<200 where !gone {
            usleep(20_000)
            gone = try run(keychainfsBinary, ["status", mountpoint]).exitStatus != .success
        }
        #expect(gone, "the daemon did not finish its wipe")
        #expect(kill(pid, 0) == 0, "the daemon should still be pausing")
        #expect(!processMemoryContains(pid, canary), "canary found in an unmounting daemon's memory")
        #expect(!processMemoryContains(pid, Array(name.utf8)), "a name found in an unmounting daemon's memory")
        close(fd)
        _ = directory.send("close")
        kill(pid, SIGKILL)
    }
}
