import CLinux
import Foundation
import Glibc
import Testing

@Suite(.tags(.mount, .slow)) struct MountOperationTests {
    /// The kernel sends READs of at most 16 KiB (`FUSESession.maximumRead`); one read(2) of a
    /// larger item still returns all of it, in as many READs as it takes.
    @Test func oneReadReturnsALargeItemWholeThroughSmallReads() throws {
        let m = try MountFixture()
        let mounts = try String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)
        let line = try #require(mounts.split(separator: "\n").first { $0.split(separator: " ").dropFirst().first.map(String.init) == m.mountpoint })
        #expect(line.contains("max_read=16384"), "\(line)")
        let content = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        #expect(writeFile(m.path("large"), content) == 0)
        let fd = open(m.path("large"), O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 131_072)
        let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        #expect(got == content.count)
        #expect(Array(buffer[..<max(got, 0)]) == content)
    }

    @Test func filesAndDirectoriesRoundTrip() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("token"), Array("hello\n".utf8)) == 0)
        #expect(readFile(m.path("token")) == Array("hello\n".utf8))
        #expect(mkdir(m.path("app"), 0o755) == 0)
        #expect(mkdir(m.path("app/nested"), 0o755) == 0)
        let binary = (0...255).map { UInt8($0) }
        #expect(writeFile(m.path("app/nested/bin"), binary) == 0)
        #expect(readFile(m.path("app/nested/bin")) == binary)
        #expect(listing(m.mountpoint) == ["app", "token"])
        #expect(listing(m.path("app")) == ["nested"])
        // The CLI sees the same vault.
        #expect(try m.cli.cli(["get", "app/nested/bin"]).stdout == Data(binary))
    }

    @Test func newFilesAre0600AndDirectories0700AndChmodIsStored() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        #expect(mkdir(m.path("d"), 0o777) == 0)
        var st = stat()
        #expect(stat(m.path("f"), &st) == 0 && st.st_mode & 0o7777 == 0o600 && st.st_mode & S_IFMT == S_IFREG)
        #expect(stat(m.path("d"), &st) == 0 && st.st_mode & 0o7777 == 0o700 && st.st_mode & S_IFMT == S_IFDIR)
        #expect(st.st_uid == getuid())
        #expect(chmod(m.path("f"), 0o640) == 0)
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 5), timespec(tv_sec: 1_234_567_890, tv_nsec: 123_456_789)]
        #expect(utimensat(AT_FDCWD, m.path("f"), &times, 0) == 0)
        #expect(stat(m.path("f"), &st) == 0 && st.st_mode & 0o7777 == 0o640)
        #expect(st.st_mtim.tv_sec == 1_234_567_890 && st.st_mtim.tv_nsec == 123_456_789)
        // Stored, not just cached: still there after a remount.
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.mount().exitStatus == .success)
        #expect(stat(m.path("f"), &st) == 0 && st.st_mode & 0o7777 == 0o640 && st.st_mtim.tv_sec == 1_234_567_890)
    }

    @Test func createFlagsExclTruncAndAppend() throws {
        let m = try MountFixture()
        let file = m.path("f")
        #expect(writeFile(file, Array("abcdef".utf8)) == 0)
        #expect(errnoOf { open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600) } == EEXIST)
        #expect(writeFile(file, Array("xy".utf8), flags: O_WRONLY | O_APPEND) == 0)
        #expect(readFile(file) == Array("abcdefxy".utf8))
        #expect(writeFile(file, Array("z".utf8), flags: O_WRONLY | O_TRUNC) == 0)
        #expect(readFile(file) == Array("z".utf8))
        let fd = open(m.path("new"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        close(fd)
        #expect(readFile(m.path("new")) == [])
    }

    @Test func writesAtOffsetsLeaveHolesOfZerosAndTruncateBothWays() throws {
        let m = try MountFixture()
        let file = m.path("sparse")
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        #expect(pwrite(fd, "end", 3, 100) == 3)
        #expect(pwrite(fd, "start", 5, 0) == 5)
        var buffer = [UInt8](repeating: 0xFF, count: 200)
        #expect(pread(fd, &buffer, 200, 0) == 103)
        #expect(Array(buffer[0..<5]) == Array("start".utf8))
        #expect(buffer[5..<100].allSatisfy { $0 == 0 })
        #expect(Array(buffer[100..<103]) == Array("end".utf8))
        #expect(ftruncate(fd, 50) == 0)
        #expect(ftruncate(fd, 60) == 0)
        #expect(pread(fd, &buffer, 200, 0) == 60)
        #expect(buffer[5..<60].allSatisfy { $0 == 0 })
        #expect(fsync(fd) == 0)
        #expect(close(fd) == 0)
        #expect(truncate(file, 10) == 0)
        #expect(readFile(file) == Array("start".utf8) + [0, 0, 0, 0, 0])
        var st = stat()
        #expect(stat(file, &st) == 0 && st.st_size == 10)
        #expect(try m.cli.cli(["get", "sparse"]).stdout == Data(Array("start".utf8) + [0, 0, 0, 0, 0]))
    }

    @Test func removalAndItsErrors() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        #expect(writeFile(m.path("d/f"), [1]) == 0)
        #expect(errnoOf { rmdir(m.path("d")) } == ENOTEMPTY)
        #expect(errnoOf { rmdir(m.path("d/f")) } == ENOTDIR)
        #expect(errnoOf { unlink(m.path("d")) } == EISDIR)
        #expect(errnoOf { mkdir(m.path("d"), 0o700) } == EEXIST)
        #expect(errnoOf { unlink(m.path("missing")) } == ENOENT)
        #expect(unlink(m.path("d/f")) == 0)
        #expect(rmdir(m.path("d")) == 0)
        #expect(listing(m.mountpoint) == [])
    }

    @Test func renameReplacesRefusesAndMovesTrees() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("a"), Array("A".utf8)) == 0)
        #expect(writeFile(m.path("b"), Array("B".utf8)) == 0)
        #expect(errnoOf { clinux_renameat2(AT_FDCWD, m.path("a"), AT_FDCWD, m.path("b"), UInt32(RENAME_NOREPLACE)) } == EEXIST)
        #expect(rename(m.path("a"), m.path("b")) == 0)
        #expect(readFile(m.path("b")) == Array("A".utf8))
        #expect(listing(m.mountpoint) == ["b"])
        #expect(mkdir(m.path("dir"), 0o700) == 0)
        #expect(mkdir(m.path("dir/sub"), 0o700) == 0)
        #expect(writeFile(m.path("dir/sub/deep"), Array("deep".utf8)) == 0)
        #expect(errnoOf { rename(m.path("dir"), m.path("dir/sub/inside")) } == EINVAL)
        #expect(errnoOf { rename(m.path("b"), m.path("dir")) } == EISDIR)
        #expect(errnoOf { rename(m.path("dir/sub"), m.path("b")) } == ENOTDIR)
        #expect(mkdir(m.path("empty"), 0o700) == 0)
        #expect(errnoOf { rename(m.path("empty"), m.path("dir")) } == ENOTEMPTY)
        #expect(rename(m.path("dir"), m.path("empty")) == 0)  // onto an empty directory
        #expect(readFile(m.path("empty/sub/deep")) == Array("deep".utf8))
        #expect(errnoOf { clinux_renameat2(AT_FDCWD, m.path("b"), AT_FDCWD, m.path("c"), UInt32(RENAME_EXCHANGE)) } != 0)
        #expect(try m.cli.cli(["get", "empty/sub/deep"]).stdoutText == "deep")
        #expect(try m.cli.cli(["verify"]).exitStatus == .success)
    }

    @Test func unsupportedNodeTypesAndLimits() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        #expect(errnoOf { symlink("f", m.path("link")) } == EPERM)
        #expect(errnoOf { link(m.path("f"), m.path("hard")) } == EPERM)
        #expect(errnoOf { mknod(m.path("fifo"), S_IFIFO | 0o600, 0) } == EPERM)
        // A regular file made by mknod is an empty item (tar --xattrs makes files this way).
        #expect(mknod(m.path("made"), S_IFREG | 0o600, 0) == 0)
        #expect(readFile(m.path("made")) == [])
        let longName = String(repeating: "n", count: 256)
        #expect(errnoOf { open(m.path(longName), O_WRONLY | O_CREAT, 0o600) } == ENAMETOOLONG)
        #expect(writeFile(m.path(String(repeating: "n", count: 255)), [2]) == 0)
        // Past the item limit (1 MiB) a write fails with EFBIG, as past RLIMIT_FSIZE: what fits
        // of one write is written (the kernel sends it in parts), the rest is refused.
        #expect(writeFile(m.path("big"), [UInt8](repeating: 7, count: 1 << 20)) == 0)
        #expect(writeFile(m.path("big"), [UInt8](repeating: 8, count: (1 << 20) + 1)) == EFBIG)
        #expect(try m.cli.cli(["get", "big"]).stdout == Data(repeating: 8, count: 1 << 20))
        #expect(errnoOf { truncate(m.path("big"), (1 << 20) + 1) } == EFBIG)
        var fs = statvfs()
        #expect(statvfs(m.mountpoint, &fs) == 0 && fs.f_namemax == 255)
        #expect(access(m.path("f"), R_OK | W_OK) == 0)
        #expect(errnoOf { access(m.path("missing"), F_OK) } == ENOENT)
    }

    @Test func readersShareTheOpenContentAndUnlinkedFilesStayReadable() throws {
        let m = try MountFixture()
        let file = m.path("shared")
        #expect(writeFile(file, Array("one".utf8)) == 0)
        let writer = open(file, O_WRONLY | O_CLOEXEC)
        let reader = open(file, O_RDONLY | O_CLOEXEC)
        #expect(pwrite(writer, "TWO", 3, 0) == 3)
        var buffer = [UInt8](repeating: 0, count: 8)
        // One content per open file, as on tmpfs: the reader sees the write at once.
        #expect(pread(reader, &buffer, 8, 0) == 3 && Array(buffer[0..<3]) == Array("TWO".utf8))
        #expect(close(writer) == 0)
        #expect(readFile(file) == Array("TWO".utf8))
        #expect(unlink(file) == 0)
        #expect(pread(reader, &buffer, 8, 0) == 3)  // still readable through the open descriptor
        var st = stat()
        #expect(fstat(reader, &st) == 0 && st.st_size == 3 && st.st_nlink == 0)
        #expect(close(reader) == 0)
        #expect(errnoOf { open(file, O_RDONLY) } == ENOENT)
    }

    @Test func anotherUserIsRefused() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("secret"), Array("s".utf8)) == 0)
        let denied = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", m.path("secret")])
        #expect(denied.status != 0)
        #expect(denied.stderr.contains("Permission denied"))
        let listingDenied = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "ls", m.mountpoint])
        #expect(listingDenied.status != 0)
        #expect(listingDenied.stderr.contains("Permission denied"))
    }
}
