import CLinux
import Foundation
import Glibc
import Testing

/// Shared mappings (FUSE_DIRECT_IO_ALLOW_MMAP, negotiated by InitNegotiation): as on
/// tmpfs, stored as a write is, and their pages dropped from the kernel's cache at the last
/// close and at lock.
@Suite(.tags(.mount)) struct SharedMmapTests {
    static let script = pythonOutcomeHelpers + #"""
        import errno, mmap, os, subprocess, sys
        d = sys.argv[1]
        with open(P('f'), 'wb') as f: f.write(b'0123456789' * 1000)
        fd = os.open(P('f'), os.O_RDONLY)
        m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        p('a shared read-only mapping reads:', m[:10], m[-10:], len(m))
        w = os.open(P('f'), os.O_WRONLY)
        os.pwrite(w, b'ABC', 0)
        p('a write(2) shows in the mapping at once:', m[:5])
        os.close(w)
        m.close(); os.close(fd)

        fd = os.open(P('f'), os.O_RDWR)
        m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:5] = b'HELLO'
        p('read(2) sees a write through the mapping before msync:', os.pread(fd, 8, 0))
        m.flush()
        r = os.open(P('f'), os.O_RDONLY)
        p('after msync, another descriptor and cat:', os.pread(r, 8, 0),
          subprocess.run(['head', '-c', '8', P('f')], capture_output=True).stdout)
        os.close(r)
        m[9995:10000] = b'WORLD'
        m.close()
        p('after munmap, before close:', os.pread(fd, 10, 9990), os.fstat(fd).st_size)
        os.close(fd)
        p('after the last close:', open(P('f'), 'rb').read()[:8], open(P('f'), 'rb').read()[-10:])

        fd = os.open(P('f'), os.O_RDONLY)
        p('a writable shared mapping of a read-only descriptor:',
          attempt(lambda: mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE) and 'mapped'))
        m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:5] = b'xxxxx'
        p('a private mapping keeps its writes to itself:', m[:5], os.pread(fd, 5, 0))
        m.close(); os.close(fd)

        # Two processes share one mapping's pages.
        with open(P('g'), 'wb') as f: f.write(b'\0' * 4096)
        fd = os.open(P('g'), os.O_RDWR)
        m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED)
        child = os.fork()
        if child == 0:
            m[0:6] = b'child!'
            os._exit(0)
        os.waitpid(child, 0)
        p('a forked child writes, the parent reads:', m[:6])
        m.close(); os.close(fd)
        p('stored:', open(P('g'), 'rb').read(6))
        print('\n'.join(out))
        """#

    @Test func sharedMappingsReadAndWriteAsOnTmpfs() throws {
        let m = try MountFixture()
        try expectSameOutputAsTmpfs(m, script: Self.script, atLeast: 10)
    }

    /// msync stores, as fsync does: the command line reads the vault itself while the mapping
    /// is still open, and a remount reads it back.
    @Test func aWriteThroughASharedMappingIsStoredAtMsync() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("mapped"), Array(String(repeating: "-", count: 4096).utf8)) == 0)
        let held = try HeldDescriptor(m.path("mapped"), "O_RDWR")
        #expect(held.send("map") == 0)
        #expect(held.send("mapwrite " + Array("through the map".utf8).map { String(format: "%02x", $0) }.joined()) == 0)
        #expect(try m.cli.cli(["get", "mapped"]).stdoutText.hasPrefix("-----"), "stored before msync")
        #expect(held.send("msync") == 0)
        #expect(try m.cli.cli(["get", "mapped"]).stdoutText.hasPrefix("through the map-"))
        #expect(held.send("unmap") == 0)
        #expect(held.send("close") == 0)
        try m.unmount()
        #expect(try m.mount().exitStatus == .success)
        let back = readFile(m.path("mapped")) ?? []
        #expect(back.count == 4096 && back.starts(with: Array("through the map-".utf8)))
    }

    /// A mapping's plaintext pages leave the kernel's cache at lock, though the mapping stays,
    /// and the daemon keeps nothing of what was written through it; unlocked, it reads back.
    @Test func aLockDropsASharedMappingsPagesAndTheDaemonKeepsNoneOfIt() throws {
        let m = try MountFixture()
        let canary = Array(("MAPPED-CANARY-" + UUID().uuidString + "-" + UUID().uuidString).utf8)
        #expect(writeFile(m.path("mapped"), [UInt8](repeating: 0x2D, count: 64 * 1024)) == 0)
        let probe = open(m.path("mapped"), O_RDONLY | O_CLOEXEC)
        defer { close(probe) }
        let held = try HeldDescriptor(m.path("mapped"), "O_RDWR")
        #expect(held.send("map") == 0)
        #expect(held.send("mapwrite " + canary.map { String(format: "%02x", $0) }.joined()) == 0)
        #expect(held.send("msync") == 0)
        let pid = try status(m.mountpoint).pid
        // What the scans look for is there before the lock.
        #expect(clinux_cached_pages(probe) > 0, "the mapping's pages are not in the page cache")
        #expect(processMemoryContains(pid, canary), "scanner did not find the canary in an unlocked daemon")
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(eventually(within: 2) { clinux_cached_pages(probe) == 0 }, "\(clinux_cached_pages(probe)) pages left in the page cache")
        #expect(!processMemoryContains(pid, canary), "canary found in a locked daemon's memory")
        #expect(held.send("unmap") == 0)
        _ = held.send("close")  // locked: whatever the close answers, the content was stored at msync
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(readFile(m.path("mapped"))?.starts(with: canary) == true)
    }

    /// The last close drops a shared mapping's pages, as a private mapping's.
    @Test func thePageCacheHoldsNothingOnceASharedMappingIsClosed() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("mapped"), [UInt8](repeating: 0x41, count: 64 * 1024)) == 0)
        let probe = open(m.path("mapped"), O_RDONLY | O_CLOEXEC)
        defer { close(probe) }
        let held = try HeldDescriptor(m.path("mapped"), "O_RDWR")
        #expect(held.send("map") == 0)
        #expect(held.send("mapwrite 42424242") == 0)
        #expect(clinux_cached_pages(probe) > 0)
        #expect(held.send("unmap") == 0)
        #expect(held.send("close") == 0)
        #expect(eventually(within: 2) { clinux_cached_pages(probe) == 0 }, "\(clinux_cached_pages(probe)) pages left in the page cache")
        #expect(readFile(m.path("mapped"))?.starts(with: Array("BBBBAAAA".utf8)) == true)
    }
}
