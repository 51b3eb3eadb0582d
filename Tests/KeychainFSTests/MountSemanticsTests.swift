import CLinux
import Foundation
import Glibc
import Testing
import VaultCore

/// What the vault stores for `path`, read in this process: spawning the CLI while a descriptor
/// is open would close a copy of it in the child, and every close is a flush.
func storedContent(_ m: MountFixture, _ path: String) throws -> String {
    let phrase = try String(contentsOfFile: m.cli.passphraseFile, encoding: .utf8).dropLast()
    var passphrase = try SecureBuffer(capacity: phrase.utf8.count)
    try Array(phrase.utf8).withUnsafeBytes { try passphrase.append($0) }
    let content = try Vault.open(at: m.vault, passphrase: passphrase).read(VaultPath(path))
    return content.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

/// The finer points of sharing an open file, found by review and pinned here.
@Suite(.tags(.mount, .slow)) struct MountSemanticsTests {
    @Test func aReaderClosingNeverStoresAWritersHalfWrittenContent() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("OLD".utf8)) == 0)
        let writer = try HeldDescriptor(m.path("f"), "O_WRONLY|O_TRUNC")
        #expect(writer.send("pwrite 0 NEW-") == 0)
        #expect(readFile(m.path("f")) == Array("NEW-".utf8))  // readers share the open content...
        #expect(try storedContent(m, "f") == "OLD")  // ...and a reader's close stores nothing
        #expect(writer.send("pwrite 4 DONE") == 0)
        #expect(writer.send("close") == 0)
        #expect(try storedContent(m, "f") == "NEW-DONE")
    }

    /// As with RLIMIT_FSIZE: the write that would cross the limit fails alone, the descriptor
    /// stays usable, and a close stores what the item held before that write.
    @Test func anOversizedWriteFailsAloneAndTheDescriptorStaysUsable() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("OLD".utf8)) == 0)
        let first = try HeldDescriptor(m.path("f"), "O_WRONLY")
        let second = try HeldDescriptor(m.path("f"), "O_WRONLY")
        #expect(first.send("pwrite 0 good") == 0)
        #expect(second.send("pwrite \(1 << 20) x") == EFBIG)
        #expect(try storedContent(m, "f") == "OLD")
        #expect(second.send("pwrite 4 +more") == 0)
        #expect(second.send("close") == 0)
        #expect(try storedContent(m, "f") == "good+more")
        #expect(first.send("close") == 0)
        #expect(try storedContent(m, "f") == "good+more")
    }

    @Test func aStatByPathShowsTheSizeBeingWrittenSoAppendsLandAtTheEnd() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("abcde".utf8)) == 0)
        let writer = try HeldDescriptor(m.path("f"), "O_WRONLY|O_APPEND")
        #expect(writer.send("pwrite 0 fghij") == 0)  // with O_APPEND, at the end
        var st = stat()
        #expect(stat(m.path("f"), &st) == 0 && st.st_size == 10)
        #expect(writer.send("pwrite 0 XYZ") == 0)
        #expect(writer.send("close") == 0)
        #expect(try storedContent(m, "f") == "abcdefghijXYZ")
    }

    /// Once the kernel's cached entry expires, a lookup (and a listing) tells it the size again:
    /// it must be the writer's, as a stat's is, or the writer's end of file moves back.
    @Test func lookupsAndListingsShowTheSizeBeingWrittenToo() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        #expect(writeFile(m.path("d/f"), Array("abcde".utf8)) == 0)
        let writer = try HeldDescriptor(m.path("d/f"), "O_WRONLY")
        #expect(writer.send("pwrite 5 fghij") == 0)
        // Every listing is a readdirplus (the mount turns the kernel's choice off), whose
        // attributes replace what the kernel cached: no need to wait for the cache to expire.
        let listed = try sh("ls -l \(m.path("d")) | awk '$NF == \"f\" { print $5 }'")
        #expect(listed.stdoutText == "10\n")
        // An exclusive create looks the name up whatever the kernel cached (LOOKUP_EXCL), and
        // the lookup's attributes are what the stat below shows.
        #expect(errnoOf { open(m.path("d/f"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) } == EEXIST)
        var st = stat()
        #expect(stat(m.path("d/f"), &st) == 0 && st.st_size == 10)
        #expect(writer.send("close") == 0)
        #expect(try storedContent(m, "d/f") == "abcdefghij")
    }

    /// A listing longer than one getdents buffer is read in parts; what a later part tells the
    /// kernel about a name must be what holds when that part is read, not when the listing
    /// began. Here the name is replaced in between, through the mount (write and rename) or
    /// through the command line (another process's commit). The name replaced is the one the
    /// listing gives last (the order follows the sealed names, and a listing with no change
    /// between gives the same order): one in the first part was told to the kernel before the
    /// change, and a command line's commit reaches the kernel's cache only after it expires.
    @Test(arguments: ["mount", "cli"])
    func aLaterPartOfAListingTellsTheKernelWhatHoldsNow(replacedThrough: String) throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        fillWithLongNames(m, in: "d", content: Array("old".utf8))
        let script = """
            import os, subprocess, sys
            d, how, kfs, vault, pw = sys.argv[1:6]
            last = os.listdir(d)[-1]
            entries = os.scandir(os.open(d, os.O_RDONLY | os.O_DIRECTORY))
            next(entries)  # the first part of the listing is read
            if how == 'mount':
                with open(os.path.join(d, 'new'), 'w') as f:
                    f.write('new content')
                os.rename(os.path.join(d, 'new'), os.path.join(d, last))
            else:
                subprocess.run([kfs, 'rm', '--vault', vault, '--passphrase-file', pw, 'd/' + last], check=True)
                subprocess.run([kfs, 'set', '--vault', vault, '--passphrase-file', pw, 'd/' + last, 'new content'], check=True)
            # No wait for the kernel's cache of the name to expire: every part of a listing is a
            # readdirplus, whose entry and attributes replace whatever the kernel cached.
            rest = [e.name for e in entries]
            print(last in rest, open(os.path.join(d, last)).read(), os.stat(os.path.join(d, last)).st_size)
            """
        let result = try run("/usr/bin/python3", ["-c", script, m.path("d"), replacedThrough,
                                                  keychainfsBinary, m.vault, m.cli.passphraseFile])
        #expect(result.stdoutText == "True new content 11\n", "\(result.stderr)")
    }

    /// After a commit elsewhere in the middle of a listing, the rest of it is checked again:
    /// every entry still comes exactly once.
    @Test func aListingGoesOnWholeAfterACommitElsewhere() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        fillWithLongNames(m, in: "d")
        let script = """
            import os, sys
            d, other = sys.argv[1:3]
            entries = os.scandir(os.open(d, os.O_RDONLY | os.O_DIRECTORY))
            names = [next(entries).name]
            for i in range(3):
                with open(other, 'w') as f:
                    f.write('commit %d' % i)
                names.append(next(entries).name)
            names += [e.name for e in entries]
            print(len(names), len(set(names)))
            """
        #expect(try run("/usr/bin/python3", ["-c", script, m.path("d"), m.path("other")]).stdoutText == "600 600\n")
    }

    @Test func rewindingADirectoryBeforeReadingItShowsWhatIsThereNow() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        let script = """
            import os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
            open(os.path.join(sys.argv[1], 'h'), 'w').close()
            os.lseek(fd, 0, 0)
            print(sorted(os.listdir(fd)))
            """
        #expect(try run("/usr/bin/python3", ["-c", script, m.path("d")]).stdoutText == "['h']\n")
    }

    /// O_RDONLY with O_TRUNC still truncates: its close is a store like any writer's, made
    /// before close returns, and refused at close if a lock came in between.
    @Test func aReadOnlyOpenThatTruncatesStoresAtClose() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("abc".utf8)) == 0)
        let truncating = try HeldDescriptor(m.path("f"), "O_RDONLY|O_TRUNC")
        #expect(truncating.send("close") == 0)
        #expect(try storedContent(m, "f") == "")

        #expect(writeFile(m.path("g"), Array("abc".utf8)) == 0)
        let refused = try HeldDescriptor(m.path("g"), "O_RDONLY|O_TRUNC")
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(refused.send("close") == EACCES)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(try storedContent(m, "g") == "abc")
    }

    /// fsync makes the file's whole content durable, whichever descriptor wrote it; a close
    /// stores only for a descriptor that wrote.
    @Test func fsyncOfAnyDescriptorStoresTheSharedContent() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("old".utf8)) == 0)
        let writer = try HeldDescriptor(m.path("f"), "O_WRONLY")
        let reader = try HeldDescriptor(m.path("f"), "O_RDONLY")
        #expect(writer.send("pwrite 0 new") == 0)
        #expect(reader.send("close") == 0)
        #expect(try storedContent(m, "f") == "old")
        let syncer = try HeldDescriptor(m.path("f"), "O_RDONLY")
        #expect(syncer.send("fsync") == 0)
        #expect(try storedContent(m, "f") == "new")
        #expect(writer.send("pwrite 3 er") == 0)
        #expect(writer.send("close") == 0)
        #expect(try storedContent(m, "f") == "newer")
        #expect(syncer.send("close") == 0)
    }

    /// An item changed while the vault was locked: descriptors opened before answer EIO (they
    /// never read two versions), a new open reads what is stored now.
    @Test func afterAChangeWhileLockedNewOpensReadTheNewContent() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("old".utf8)) == 0)
        let before = try HeldDescriptor(m.path("f"), "O_RDONLY")
        #expect(before.send("read") == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).status == 0)
        #expect(try m.cli.cli(["set", "f", "changed"]).status == 0)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).status == 0)
        #expect(readFile(m.path("f")) == Array("changed".utf8))
        #expect(before.send("read") == EIO)
        #expect(before.send("close") == 0)
    }

    /// ftruncate and fallocate on a descriptor held across a lock act on the stored content,
    /// never on the buffer the lock wiped (found by review).
    @Test func truncateAndAllocateAcrossALockKeepTheContent() throws {
        let m = try MountFixture()
        let lock = { () throws -> Void in #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).status == 0) }
        let unlock = { () throws -> Void in
            #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).status == 0)
        }
        #expect(writeFile(m.path("f"), Array("0123456789".utf8)) == 0)
        let fd = try HeldDescriptor(m.path("f"), "O_RDWR")
        try lock()
        #expect(fd.send("ftruncate 0") == EACCES)
        try unlock()
        #expect(fd.send("fallocate 0 4") == 0)
        #expect(fd.send("close") == 0)
        #expect(try storedContent(m, "f") == "0123456789")

        let again = try HeldDescriptor(m.path("f"), "O_RDWR")
        try lock()
        try unlock()
        #expect(again.send("ftruncate 4") == 0)
        #expect(again.send("close") == 0)
        #expect(try storedContent(m, "f") == "0123")
    }

    @Test func twoProcessesAppendingAtOnceBothKeepTheirLines() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("log"), Array("base\n".utf8)) == 0)
        let first = try HeldDescriptor(m.path("log"), "O_WRONLY|O_APPEND")
        let second = try HeldDescriptor(m.path("log"), "O_WRONLY|O_APPEND")
        #expect(first.send("pwrite 0 from-first;") == 0)
        #expect(second.send("pwrite 0 from-second;") == 0)
        #expect(second.send("close") == 0)
        #expect(try storedContent(m, "log") == "base\nfrom-first;from-second;")
        #expect(first.send("pwrite 0 again;") == 0)
        #expect(first.send("close") == 0)
        #expect(try storedContent(m, "log") == "base\nfrom-first;from-second;again;")
    }

    @Test func ftruncateIsStoredWithTheContentAtClose() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("old secret".utf8)) == 0)
        let fd = try HeldDescriptor(m.path("f"), "O_WRONLY")
        #expect(fd.send("ftruncate 12") == 0)
        #expect(try storedContent(m, "f") == "old secret")
        #expect(fd.send("pwrite 0 new secret!!") == 0)
        #expect(fd.send("close") == 0)
        #expect(try storedContent(m, "f") == "new secret!!")
    }

    @Test func anUnlinkedOpenFileStillAnswersFstatAndFtruncate() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("content".utf8)) == 0)
        let fd = open(m.path("f"), O_RDWR | O_CLOEXEC)
        #expect(unlink(m.path("f")) == 0)
        var st = stat()
        #expect(fstat(fd, &st) == 0 && st.st_size == 7)
        #expect(ftruncate(fd, 3) == 0)
        #expect(fstat(fd, &st) == 0 && st.st_size == 3)
        #expect(fchmod(fd, 0o400) == 0)
        #expect(close(fd) == 0)
        #expect(listing(m.mountpoint) == [])
    }

    @Test func archivingRightAfterExtractingSeesNoChange() throws {
        let m = try MountFixture()
        let source = m.cli.directory + "/src"
        #expect(try sh("mkdir -p \(source)/d && for i in 1 2 3 4 5; do echo $i > \(source)/d/f$i; done && chmod 640 \(source)/d/f1").status == 0)
        let result = try sh("""
            tar -C \(source) -cf \(m.cli.directory)/a.tar d && tar -C \(m.mountpoint) -xf \(m.cli.directory)/a.tar &&
            tar -C \(m.mountpoint) -cf \(m.cli.directory)/b.tar d
            """)
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func rewindingADirectoryShowsNewEntries() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("a"), [1]) == 0)
        guard let dir = opendir(m.mountpoint) else { Issue.record("opendir failed"); return }
        defer { closedir(dir) }
        func names() -> [String] {
            var found: [String] = []
            while let entry = readdir(dir) {
                found.append(withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) })
            }
            return found.filter { $0 != "." && $0 != ".." }.sorted()
        }
        #expect(names() == ["a"])
        #expect(writeFile(m.path("b"), [2]) == 0)
        rewinddir(dir)
        #expect(names() == ["a", "b"])
    }

    @Test func oddNamesLookUpAsMissing() throws {
        let m = try MountFixture()
        // A name that is not UTF-8, built byte by byte.
        var bytes = Array((m.mountpoint + "/bad").utf8) + [0xFF, 0]
        let rc = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY) }
        }
        #expect(rc < 0 && errno == ENOENT)
        let created = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o600) }
        }
        #expect(created < 0 && errno == EINVAL)
    }

    @Test func thePageCacheHoldsNothingOnceAPrivateMappingIsClosed() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("mapped"), [UInt8](repeating: 0x41, count: 64 * 1024)) == 0)
        let probe = open(m.path("mapped"), O_RDONLY | O_CLOEXEC)
        defer { close(probe) }
        // Another process maps the file privately and reads it through the page cache.
        let mapped = try run("/usr/bin/python3", ["-c", """
            import mmap, sys
            f = open(sys.argv[1], 'rb')
            m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
            assert m[:4] == b'AAAA' and m[-1] == 0x41
            m.close(); f.close()
            """, m.path("mapped")])
        #expect(mapped.status == 0, "\(mapped.stderr)")
        var cached = clinux_cached_pages(probe)
        for _ in 0..<100 where cached > 0 {
            usleep(10_000)
            cached = clinux_cached_pages(probe)
        }
        #expect(cached == 0, "\(cached) pages of plaintext left in the page cache")
    }

    @Test func theDaemonDoesNotHoldItsLaunchDirectory() throws {
        let m = try MountFixture()
        let pid = try status(m.mountpoint).pid
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")) == "/")
    }
}
