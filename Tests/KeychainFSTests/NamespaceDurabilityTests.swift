import CLinux
import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// Pages of the file at `path` that the kernel holds dirty (written, not yet on the disk): the
/// file mapped shared and every page read, each page's frame taken from /proc/self/pagemap and
/// its flags from /proc/kpageflags (both need root, as the mount tests have). nil when they
/// cannot be read.
func dirtyPageCount(_ path: String) -> Int? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_size > 0 else { return 0 }
    let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    let pages = (Int(info.st_size) + pageSize - 1) / pageSize
    guard let mapped = mmap(nil, pages * pageSize, PROT_READ, MAP_SHARED, fd, 0), mapped != MAP_FAILED else { return nil }
    defer { munmap(mapped, pages * pageSize) }
    let pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)
    let flags = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC)
    defer { if pagemap >= 0 { close(pagemap) }; if flags >= 0 { close(flags) } }
    guard pagemap >= 0, flags >= 0 else { return nil }
    var dirty = 0
    for page in 0..<pages {
        let address = mapped + page * pageSize
        // A read maps the page (from the page cache, where a write left it).
        var byte: UInt8 = 0
        withUnsafeMutableBytes(of: &byte) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: 1)) }
        var entry: UInt64 = 0
        let offset = off_t(UInt(bitPattern: address) / UInt(pageSize) * 8)
        guard pread(pagemap, &entry, 8, offset) == 8, entry & (1 << 63) != 0 else { return nil }
        let frame = entry & ((1 << 55) - 1)
        guard frame != 0 else { return nil }  // frames hidden: not root
        var pageFlags: UInt64 = 0
        guard pread(flags, &pageFlags, 8, off_t(frame * 8)) == 8 else { return nil }
        let kpfDirty: UInt64 = 1 << 4
        if pageFlags & kpfDirty != 0 { dirty += 1 }
    }
    return dirty
}

/// What the mount promises for mkdir, rmdir, unlink and rename (docs/durability.md, "Through
/// the mount"): committed at once, durable within the flusher's window, at an fsync of a directory
/// or a file, or at once with `--sync`. Durable is seen where it happens: the vault's WAL has no
/// page left dirty in the kernel's cache (the access log is off, so its once-a-second durable
/// batches sync nothing behind the test's back).
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct NamespaceDurabilityTests {
    static let noLog = ["--log-entries", "0"]
    /// Longer than any test: the flusher never syncs on its own while one runs.
    static let longWindow = ["--sync-window-ms", "600000"]

    private func mounted(_ extra: [String]) throws -> MountFixture {
        let m = try MountFixture(create: true)
        try m.unmount()
        let result = try m.mount(extra: extra)
        guard result.exitStatus == .success else { throw FixtureError("mount failed: \(result.stderr)") }
        return m
    }

    private func wal(_ m: MountFixture) -> String { m.vault + "-wal" }

    /// An item written and closed: durable at its close, so the WAL starts clean.
    private func prepared(_ m: MountFixture) throws {
        #expect(mkdir(m.path("d"), 0o700) == 0)
        #expect(writeFile(m.path("d/a"), Array("secret".utf8)) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
    }

    @Test func fsyncOfADirectoryMakesItsRenameDurable() throws {
        let m = try mounted(Self.noLog + Self.longWindow)
        try prepared(m)
        #expect(rename(m.path("d/a"), m.path("d/b")) == 0)
        // Committed (another process sees it), not yet synced.
        #expect(FileManager.default.fileExists(atPath: m.path("d/b")))
        let before = try #require(dirtyPageCount(wal(m)))
        #expect(before > 0)
        let directory = open(m.path("d"), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #expect(directory >= 0)
        #expect(fsync(directory) == 0)
        close(directory)
        #expect(dirtyPageCount(wal(m)) == 0)
    }

    @Test func fsyncOfAFileMakesEarlierUnlinksDurable() throws {
        let m = try mounted(Self.noLog + Self.longWindow)
        try prepared(m)
        #expect(writeFile(m.path("d/other"), [1]) == 0)
        #expect(unlink(m.path("d/a")) == 0)
        #expect(try #require(dirtyPageCount(wal(m))) > 0)
        let file = open(m.path("d/other"), O_RDONLY | O_CLOEXEC)
        #expect(file >= 0)
        #expect(fsync(file) == 0)
        close(file)
        #expect(dirtyPageCount(wal(m)) == 0)
    }

    /// An extended attribute is metadata like a mode: committed at once, durable within the
    /// window or at an fsync (a durable commit each made `setfattr` on 1 000 files ten times
    /// gocryptfs's time).
    @Test func setxattrIsDurableAtAnFsyncOfTheFile() throws {
        let m = try mounted(Self.noLog + Self.longWindow)
        try prepared(m)
        #expect(setxattr(m.path("d/a"), "user.service", "github", 6, 0) == 0)
        #expect(try run("/usr/bin/getfattr", ["--only-values", "-n", "user.service", m.path("d/a")]).stdoutText == "github")
        #expect(try #require(dirtyPageCount(wal(m))) > 0)
        let file = open(m.path("d/a"), O_RDONLY | O_CLOEXEC)
        #expect(file >= 0)
        #expect(fsync(file) == 0)
        close(file)
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(removexattr(m.path("d/a"), "user.service") == 0)
        #expect(try #require(dirtyPageCount(wal(m))) > 0)
    }

    @Test func theFlusherMakesChangesDurableWithinItsWindow() throws {
        let m = try mounted(Self.noLog)
        try prepared(m)
        #expect(rename(m.path("d/a"), m.path("d/b")) == 0)
        #expect(rmdir(m.path("d")) == -1)  // not empty: refused, nothing committed
        #expect(mkdir(m.path("e"), 0o700) == 0)
        // The default window is 50 ms; a loaded machine's fdatasync can take a while longer.
        #expect(eventually(within: 5) { dirtyPageCount(wal(m)) == 0 })
    }

    @Test func syncMakesEveryNamespaceChangeDurableAtOnce() throws {
        let m = try mounted(Self.noLog + Self.longWindow + ["--sync"])
        try prepared(m)
        #expect(rename(m.path("d/a"), m.path("d/b")) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(mkdir(m.path("e"), 0o700) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(rmdir(m.path("e")) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(setxattr(m.path("d/b"), "user.service", "github", 6, 0) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(unlink(m.path("d/b")) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
    }

    @Test func sigkillLosesNoNamespaceChangeThatReturned() throws {
        let m = try mounted(Self.noLog + Self.longWindow)
        try prepared(m)
        #expect(writeFile(m.path("d/gone"), [2]) == 0)
        #expect(mkdir(m.path("e"), 0o700) == 0)
        #expect(mkdir(m.path("f"), 0o700) == 0)
        #expect(rename(m.path("d/a"), m.path("e/b")) == 0)
        #expect(unlink(m.path("d/gone")) == 0)
        #expect(rmdir(m.path("f")) == 0)
        #expect(try #require(dirtyPageCount(wal(m))) > 0)  // none of them synced yet
        let status = try run(keychainfsBinary, ["status", "--json", m.mountpoint])
        let pid = try #require(status.stdoutText.split(separator: "\"pid\":").dropFirst().first
            .flatMap { Int32($0.prefix(while: \.isNumber)) })
        #expect(kill(pid, SIGKILL) == 0)
        #expect(eventually { kill(pid, 0) != 0 })
        m.unmountQuietly()
        #expect(try m.mount(extra: Self.noLog).exitStatus == .success)
        #expect(readFile(m.path("e/b")) == Array("secret".utf8))
        #expect(!FileManager.default.fileExists(atPath: m.path("d/a")))
        #expect(!FileManager.default.fileExists(atPath: m.path("d/gone")))
        #expect(!FileManager.default.fileExists(atPath: m.path("f")))
    }

    /// On PostgreSQL a namespace change commits with synchronous_commit off; fsync of its
    /// directory flushes the server's WAL past it. The walwriter, which would flush it anyway,
    /// waits 10 s here (its longest), so the flush seen is the fsync's.
    @Test func fsyncOfADirectoryFlushesPostgreSQLsWAL() throws {
        var options = PostgresServer.Options()
        options.settings = ["wal_writer_delay=10000ms"]
        let server = try PostgresServer(options)
        let uri = try server.createDatabase("durable")
        let m = try MountFixture(vault: uri)
        defer { m.unmountQuietly() }
        try m.unmount()
        #expect(try m.mount(extra: Self.noLog + Self.longWindow).exitStatus == .success)
        #expect(mkdir(m.path("d"), 0o700) == 0)
        #expect(rename(m.path("d"), m.path("e")) == 0)
        let committed = try server.sql("durable", "SELECT pg_current_wal_insert_lsn()").trimmingCharacters(in: .whitespacesAndNewlines)
        let directory = open(m.mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #expect(directory >= 0)
        #expect(fsync(directory) == 0)
        close(directory)
        let flushed = try server.sql("durable", "SELECT pg_current_wal_flush_lsn() >= '\(committed)'::pg_lsn")
        #expect(flushed.trimmingCharacters(in: .whitespacesAndNewlines) == "t")
    }

    /// A file created and closed with nothing written is a namespace change, as mkdir is: its
    /// close commits nothing more. What is written is durable at the close after it, the way
    /// `echo > file` works: open, dup2, close of the first descriptor, write, close.
    @Test func anEmptyCreatedFileIsDurableWithinTheWindowAndAWrittenOneAtItsClose() throws {
        let m = try mounted(Self.noLog + Self.longWindow)
        try prepared(m)
        let empty = open(m.path("d/empty"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(empty >= 0)
        #expect(close(empty) == 0)
        #expect(FileManager.default.fileExists(atPath: m.path("d/empty")))
        #expect(try #require(dirtyPageCount(wal(m))) > 0)
        let first = open(m.path("d/echoed"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        #expect(first >= 0)
        let copy = dup(first)
        #expect(close(first) == 0)
        #expect(write(copy, "x\n", 2) == 2)
        #expect(close(copy) == 0)
        // The written close synced the WAL, the empty file's create with it.
        #expect(dirtyPageCount(wal(m)) == 0)
        #expect(readFile(m.path("d/echoed")) == Array("x\n".utf8))
    }

    @Test func syncMakesAnEmptyCreatedFileDurableAtItsClose() throws {
        let m = try mounted(Self.noLog + Self.longWindow + ["--sync"])
        try prepared(m)
        let empty = open(m.path("d/empty"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(empty >= 0)
        #expect(close(empty) == 0)
        #expect(dirtyPageCount(wal(m)) == 0)
    }

    @Test func syncIsAMountOption() throws {
        let translated = try MountHelperArguments.translate(["/v", "/m", "-o", "sync,passfile=/p"], subcommands: [])
        #expect(translated == ["mount", "--quiet", "--vault", "/v", "--sync", "--passphrase-file", "/p", "/m"])
        #expect(throws: MountHelperArguments.Refusal.self) {
            try MountHelperArguments.translate(["/v", "/m", "-o", "sync=1"], subcommands: [])
        }
    }
}
