import CLinux
import Foundation
import Glibc
import Synchronization
import Testing

/// Two members' mounts of one team vault in PostgreSQL (two daemons, two member keys: two
/// machines as far as the vault can tell) see each other's changes within a second, and a
/// change on one under a file open on the other behaves as the same change would on tmpfs.
@Suite(.serialized, .tags(.mount, .postgres, .bus, .slow)) struct TeamMountTests {
    /// Every kind of change, in both directions. The reader looks at each name first, so the
    /// kernel holds it cached when the change lands; measured delays go to the test's output.
    @Test func changesOnOneMountShowOnTheOtherWithinASecond() throws {
        let team = try TeamVault()
        for (writer, reader) in [(team.ann, team.bob), (team.bob, team.ann)] {
            let tag = "\(writer.name)-to-\(reader.name)"
            func seen(_ what: String, _ condition: () -> Bool) {
                let delay = secondsUntil(1, condition)
                #expect(delay != nil, "\(tag): \(what) not seen within a second")
                print("live \(tag): \(what) seen after \(delay.map { String(format: "%.0f ms", $0 * 1000) } ?? "more than 1 s")")
            }
            // The listener is up once an open descriptor on the reader follows a change:
            // nothing else makes a descriptor opened before a store read what it stored.
            #expect(writeFile(writer.path("\(tag)-held"), Array("first".utf8)) == 0)
            #expect(eventually { readFile(reader.path("\(tag)-held")) == Array("first".utf8) })
            let held = open(reader.path("\(tag)-held"), O_RDONLY | O_CLOEXEC)
            #expect(held >= 0)
            defer { close(held) }
            #expect(writeFile(writer.path("\(tag)-held"), Array("second!".utf8)) == 0)
            #expect(eventually { readAll(held) == Array("second!".utf8) }, "\(tag): the open descriptor never caught up")

            let file = "\(tag)-file"
            #expect(access(reader.path(file), F_OK) != 0)
            #expect(writeFile(writer.path(file), Array("new".utf8)) == 0)
            seen("new file") { readFile(reader.path(file)) == Array("new".utf8) }

            var before = stat()
            #expect(stat(reader.path(file), &before) == 0)
            #expect(writeFile(writer.path(file), Array("changed content".utf8)) == 0)
            seen("changed content") {
                var now = stat()
                return stat(reader.path(file), &now) == 0 && now.st_size == 15 && readFile(reader.path(file)) == Array("changed content".utf8)
            }

            #expect(setxattr(writer.path(file), "user.service", "github", 6, 0) == 0)
            seen("extended attribute") {
                var value = [UInt8](repeating: 0, count: 64)
                let n = getxattr(reader.path(file), "user.service", &value, value.count)
                return n == 6 && Array(value[..<6]) == Array("github".utf8)
            }

            // Looked up just before: the kernel holds the old name, which the reader's daemon
            // cannot name once it is gone from the vault, so it lasts until the entry expires.
            var looked = stat()
            #expect(stat(reader.path(file), &looked) == 0)
            #expect(rename(writer.path(file), writer.path(file + "-renamed")) == 0)
            seen("rename") {
                access(reader.path(file), F_OK) != 0 && readFile(reader.path(file + "-renamed")) == Array("changed content".utf8)
            }

            #expect(stat(reader.path(file + "-renamed"), &looked) == 0)
            #expect(unlink(writer.path(file + "-renamed")) == 0)
            seen("delete") { access(reader.path(file + "-renamed"), F_OK) != 0 && !listing(reader.mountpoint).contains(file + "-renamed") }

            #expect(stat(reader.path("\(tag)-dir"), &looked) != 0)
            #expect(mkdir(writer.path("\(tag)-dir"), 0o700) == 0)
            seen("mkdir") {
                var st = stat()
                return stat(reader.path("\(tag)-dir"), &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
            }
        }
    }

    /// Each member writes a whole value to the same item and both close at the same moment:
    /// both closes succeed and the item holds one writer's value entirely, the same on both.
    @Test func twoWritersClosingAtOnceLeaveOneWholeValue() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("shared"), Array("start".utf8)) == 0)
        #expect(eventually { readFile(team.bob.path("shared")) == Array("start".utf8) })
        for round in 0..<5 {
            let values = [[UInt8](repeating: UInt8(ascii: "a"), count: 40_000 + round),
                          [UInt8](repeating: UInt8(ascii: "b"), count: 50_000 + round)]
            let opened = [team.ann, team.bob].map { member -> (fd: Int32, errno: Int32) in
                let fd = open(member.path("shared"), O_WRONLY | O_TRUNC | O_CLOEXEC)
                return (fd, fd >= 0 ? 0 : errno)
            }
            let descriptors = opened.map(\.fd)
            #expect(opened.map(\.errno) == [0, 0], "round \(round): an open failed; ann said \(team.ann.said), bob said \(team.bob.said)")
            for (fd, value) in zip(descriptors, values) {
                #expect(value.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == value.count)
            }
            let closed = Mutex<[Int32]>([0, 0])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let result = close(descriptors[index]) == 0 ? 0 : errno
                closed.withLock { $0[index] = result }
            }
            #expect(closed.withLock { $0 } == [0, 0], "round \(round): a close failed")
            let stored = try team.owner.cli(["get", "shared"]).stdout
            #expect(values.contains(Array(stored)), "round \(round): \(stored.count) bytes, not one writer's whole value")
            for member in [team.ann, team.bob] {
                #expect(eventually(within: 1) { readFile(member.path("shared")).map { Data($0) } == stored },
                        "round \(round): \(member.name)'s mount does not show the stored value")
            }
        }
    }

    /// A delete on one mount under a file open on the other, against two descriptors on tmpfs
    /// with an unlink between: the open descriptor reads and writes on, its close succeeds,
    /// and the name does not come back.
    @Test func aDeleteElsewhereUnderAnOpenFileIsAnUnlink() throws {
        let team = try TeamVault()
        let tmpfs = try Tmpfs(team.owner.directory + "/tmpfs")
        let expected = deleteUnderOpenFile(writer: tmpfs.path, holder: tmpfs.path)
        let got = deleteUnderOpenFile(writer: team.ann.mountpoint, holder: team.bob.mountpoint)
        #expect(got == expected)
        print("delete under an open file, tmpfs and two mounts alike: \(got.joined(separator: "; "))")
        #expect(!(try team.owner.cli(["ls"]).stdoutText.contains("doomed")))
    }

    /// The same with an item of many content blocks: the mount that holds it open read it whole,
    /// so the blocks the delete took elsewhere are still read here, as on tmpfs.
    @Test func aDeleteElsewhereUnderAnOpenLargeFileIsAnUnlink() throws {
        let team = try TeamVault()
        let tmpfs = try Tmpfs(team.owner.directory + "/tmpfs")
        let content = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let expected = deleteUnderOpenFile(writer: tmpfs.path, holder: tmpfs.path, content: content)
        let got = deleteUnderOpenFile(writer: team.ann.mountpoint, holder: team.bob.mountpoint, content: content)
        #expect(got == expected)
        #expect(!(try team.owner.cli(["ls"]).stdoutText.contains("doomed")))
    }

    /// A rename on one mount under a file open on the other: the open file's write and close
    /// land in the renamed item, as on tmpfs.
    @Test func aRenameElsewhereUnderAnOpenFileWritesIntoTheRenamedItem() throws {
        let team = try TeamVault()
        let tmpfs = try Tmpfs(team.owner.directory + "/tmpfs")
        let expected = renameUnderOpenFile(writer: tmpfs.path, holder: tmpfs.path)
        let got = renameUnderOpenFile(writer: team.ann.mountpoint, holder: team.bob.mountpoint)
        #expect(got == expected)
        print("rename under an open file, tmpfs and two mounts alike: \(got.joined(separator: "; "))")
        #expect(try team.owner.cli(["get", "moved"]).stdoutText == "renamed!")
    }

    /// Anyone who may connect to the database may NOTIFY on a vault's channel: ids no node has
    /// (negative, zero, past Int64), garbage and the longest payload the server takes neither
    /// crash nor stop a mount's follower, which still brings the next real change at once.
    @Test func hostileNoticesLeaveTheMountsWorking() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("watched"), Array("one".utf8)) == 0)
        #expect(eventually { readFile(team.bob.path("watched")) == Array("one".utf8) })
        let held = open(team.bob.path("watched"), O_RDONLY | O_CLOEXEC)
        #expect(held >= 0)
        defer { close(held) }
        let channel = try team.sql("SELECT name FROM vaults").split(separator: "\n").first.map { "keychainfs_" + $0 } ?? ""
        let longest = "x:" + Array(repeating: "-1", count: 2600).joined(separator: ",")
        for payload in ["x:-5", "x:0", "x:1,-9223372036854775808", "x:99999999999999999999", "x:\u{7f}\\N", longest, ":", "x:1,2,3"] {
            try team.sql("NOTIFY \(channel), '\(payload)'")
        }
        for member in [team.ann, team.bob] {
            var looked = stat()
            #expect(stat(member.path("watched"), &looked) == 0, "\(member.name)'s mount is gone: \(member.said)")
        }
        #expect(writeFile(team.ann.path("watched"), Array("two".utf8)) == 0)
        #expect(secondsUntil(1) { readAll(held) == Array("two".utf8) } != nil, "the follower stopped: \(team.bob.said)")
    }

    /// The listeners' backends are terminated: each daemon logs the loss and the recovery,
    /// and a change made afterwards still reaches a descriptor held open on the other mount.
    @Test func theListenerSurvivesADroppedConnection() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("watched"), Array("one".utf8)) == 0)
        #expect(eventually { readFile(team.bob.path("watched")) == Array("one".utf8) })
        let held = open(team.bob.path("watched"), O_RDONLY | O_CLOEXEC)
        #expect(held >= 0)
        #expect(writeFile(team.ann.path("watched"), Array("two".utf8)) == 0)
        #expect(eventually { readAll(held) == Array("two".utf8) }, "no listener before the drop")
        // Only the listeners' backends still show LISTEN as their last statement: the mounts'
        // own connections have run others since (the reads and writes above).
        let listeners = "SELECT pid FROM pg_stat_activity WHERE datname = 'team' AND query LIKE 'LISTEN%'"
        #expect(try team.sql(listeners).split(separator: "\n").count == 2)
        #expect(try team.sql("SELECT count(pg_terminate_backend(pid)) FROM (\(listeners)) AS listening") == "2\n")
        for member in [team.ann, team.bob] {
            #expect(eventually { member.said.contains("not hearing other mounts' changes") }, "\(member.name): \(member.said)")
            #expect(eventually { member.said.contains("hearing other mounts' changes again") }, "\(member.name): \(member.said)")
        }
        #expect(writeFile(team.ann.path("watched"), Array("three".utf8)) == 0)
        let delay = secondsUntil(1) { readAll(held) == Array("three".utf8) }
        #expect(delay != nil, "the descriptor did not catch up after the reconnect")
        print("live after reconnect: seen after \(delay.map { String(format: "%.0f ms", $0 * 1000) } ?? "more than 1 s")")
        // One line per loss and per recovery, naming the server, never an item.
        for member in [team.ann, team.bob] {
            let lines = member.said.split(separator: "\n")
            #expect(lines.filter { $0.contains("not hearing other mounts' changes") }.count == 1, "\(member.said)")
            #expect(lines.filter { $0.contains("hearing other mounts' changes again") }.count == 1, "\(member.said)")
            #expect(!member.said.contains("watched"), "\(member.said)")
        }
        print("live: \(team.bob.said.split(separator: "\n").filter { $0.contains("hearing other mounts") }.joined(separator: "\n"))")

        // An unmount ends the listener and its connection with the daemon.
        close(held)
        for member in [team.ann, team.bob] {
            #expect(try run(keychainfsBinary, ["unmount", member.mountpoint]).exitStatus == .success)
        }
        #expect(eventually { (try? team.sql(listeners)) == "" }, "listeners left: \((try? team.sql(listeners)) ?? "?")")
    }

    /// A Secret Service beside ann's mount announces an item bob made on his mount within a
    /// second (the follower wakes it instead of its quarter-second tick); the delay is printed.
    @Test func aSecretServiceBesideOneMountAnnouncesTheOthersNewItem() throws {
        let bus = try PrivateSessionBus()
        defer { bus.stop() }
        let team = try TeamVault(annExtra: ["--secret-service"], annEnvironment: bus.environment)
        let watched = try run("/usr/bin/python3", ["-c", """
            import os, time
            from jeepney import MatchRule
            from jeepney.io.blocking import open_dbus_connection, Proxy
            from jeepney.bus_messages import message_bus
            conn = open_dbus_connection(bus='SESSION')
            rule = MatchRule(type='signal', interface='org.freedesktop.Secret.Collection')
            Proxy(message_bus, conn).AddMatch(rule)
            with conn.filter(rule) as queue:
                path = os.environ['MNT'] + '/login/from-bob'
                start = time.monotonic()
                with open(path, 'w') as f: f.write('made by bob')
                os.setxattr(path, 'user.service', b'remote')
                seen = []
                while 'ItemCreated' not in seen:
                    msg = conn.recv_until_filtered(queue, timeout=1.0)
                    seen.append(msg.header.fields[3])
                print('created after %d ms' % round((time.monotonic() - start) * 1000))
            """], environment: bus.environment.merging(["MNT": team.bob.mountpoint]) { $1 })
        #expect(watched.status == 0 && watched.stdoutText.contains("created"), "\(watched.stdoutText) \(watched.stderr)")
        print("live: ann's Secret Service announced bob's item, \(watched.stdoutText)")
        #expect(eventually(within: 1) {
            (try? run("/usr/bin/secret-tool", ["lookup", "service", "remote"], environment: bus.environment).stdoutText) == "made by bob"
        })
    }

    /// holder opens `doomed`, writer unlinks it, holder reads, writes and closes.
    private func deleteUnderOpenFile(writer: String, holder: String, content: [UInt8] = Array("before".utf8)) -> [String] {
        var lines: [String] = []
        lines.append("create: \(errnoText(writeFile(writer + "/doomed", content)))")
        lines.append("holder sees it: \(eventually(within: 1) { readFile(holder + "/doomed") == content })")
        let fd = open(holder + "/doomed", O_RDWR | O_CLOEXEC)
        lines.append("open: \(fd >= 0)")
        lines.append("unlink: \(errnoText(errnoOf { unlink(writer + "/doomed") }))")
        lines.append("holder sees it gone: \(eventually(within: 1) { access(holder + "/doomed", F_OK) != 0 })")
        // Long contents by their size and a sum: the lines stay short either way.
        func shown(_ bytes: [UInt8]?) -> String {
            guard let bytes else { return "failed" }
            return bytes.count <= 64 ? String(decoding: bytes, as: UTF8.self) : "\(bytes.count) bytes, sum \(bytes.reduce(0) { $0 &+ Int($1) })"
        }
        lines.append("read: \(shown(readAll(fd)))")
        lines.append("write: \(pwrite(fd, "after!", 6, 0))")
        lines.append("read again: \(shown(readAll(fd)))")
        lines.append("close: \(errnoText(errnoOf { close(fd) }))")
        for (who, directory) in [("holder", holder), ("writer", writer)] {
            lines.append("\(who) after close: \(errnoText(errnoOf { access(directory + "/doomed", F_OK) }))")
            lines.append("\(who) lists: \(listing(directory).filter { $0 == "doomed" })")
        }
        return lines
    }

    /// holder opens `original`, writer renames it to `moved`, holder writes and closes.
    private func renameUnderOpenFile(writer: String, holder: String) -> [String] {
        var lines: [String] = []
        lines.append("create: \(errnoText(writeFile(writer + "/original", Array("original".utf8))))")
        lines.append("holder sees it: \(eventually(within: 1) { readFile(holder + "/original") == Array("original".utf8) })")
        let fd = open(holder + "/original", O_RDWR | O_CLOEXEC)
        lines.append("open: \(fd >= 0)")
        lines.append("rename: \(errnoText(errnoOf { rename(writer + "/original", writer + "/moved") }))")
        lines.append("holder sees it moved: \(eventually(within: 1) { access(holder + "/original", F_OK) != 0 && access(holder + "/moved", F_OK) == 0 })")
        lines.append("write: \(pwrite(fd, "renamed!", 8, 0))")
        lines.append("close: \(errnoText(errnoOf { close(fd) }))")
        for (who, directory) in [("holder", holder), ("writer", writer)] {
            lines.append("\(who) reads moved: \(eventually(within: 1) { readFile(directory + "/moved") == Array("renamed!".utf8) })")
            lines.append("\(who) original: \(errnoText(errnoOf { access(directory + "/original", F_OK) }))")
        }
        return lines
    }
}

/// A tmpfs of its own, unmounted when released: what a local filesystem does, to compare with.
final class Tmpfs {
    let path: String

    init(_ path: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard try run("/bin/mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", path]).status == 0 else {
            throw FixtureError("cannot mount a tmpfs at \(path)")
        }
    }

    deinit { _ = try? run("/bin/umount", [path]) }
}
