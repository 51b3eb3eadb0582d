import CLinux
import Foundation
import Glibc
import Testing

/// Extended attributes through the mount: the `user.` namespace is the vault's sealed item
/// attributes; the same script runs on tmpfs and on the mount where both should agree.
@Suite(.tags(.mount, .slow)) struct ExtendedAttributeTests {
    static let script = pythonOutcomeHelpers + #"""
        import errno, os, sys
        d = sys.argv[1]
        open(P('item'), 'w').close()
        os.mkdir(P('dict'))
        for target in ('item', 'dict'):
            t = P(target)
            p(target, 'missing:', attempt(os.getxattr, t, 'user.service'))
            p(target, 'set:', attempt(os.setxattr, t, 'user.service', b'github'))
            p(target, 'get:', attempt(os.getxattr, t, 'user.service'))
            p(target, 'create on existing:', attempt(os.setxattr, t, 'user.service', b'x', os.XATTR_CREATE))
            p(target, 'replace on missing:', attempt(os.setxattr, t, 'user.account', b'x', os.XATTR_REPLACE))
            p(target, 'replace:', attempt(os.setxattr, t, 'user.service', b'gitlab', os.XATTR_REPLACE))
            p(target, 'create:', attempt(os.setxattr, t, 'user.account', b'me@example.org', os.XATTR_CREATE))
            p(target, 'empty value:', attempt(os.setxattr, t, 'user.empty', b''), attempt(os.getxattr, t, 'user.empty'))
            p(target, 'list:', sorted(attempt(os.listxattr, t)))
            p(target, 'remove:', attempt(os.removexattr, t, 'user.empty'), attempt(os.removexattr, t, 'user.empty'))
            p(target, 'binary value:', attempt(os.setxattr, t, 'user.bin', bytes(range(256))), attempt(os.getxattr, t, 'user.bin') == bytes(range(256)))
            p(target, '255-byte name:', attempt(os.setxattr, t, 'user.' + 'n' * 250, b'v'))
            p(target, '256-byte name:', attempt(os.setxattr, t, 'user.' + 'n' * 251, b'v'))
            p(target, '64 KiB value:', attempt(os.setxattr, t, 'user.big', b'v' * 65536), len(attempt(os.getxattr, t, 'user.big')))
            p(target, 'over 64 KiB:', attempt(os.setxattr, t, 'user.bigger', b'v' * 65537))
            p(target, 'other namespaces:', attempt(os.getxattr, t, 'security.capability'), attempt(os.getxattr, t, 'trusted.x'))
        renamed = P('renamed')
        os.rename(P('item'), renamed)
        p('after rename:', attempt(os.getxattr, renamed, 'user.service'))
        print('\n'.join(out))
        """#

    @Test func userAttributesBehaveAsOnTmpfs() throws {
        let m = try MountFixture()
        try expectSameOutputAsTmpfs(m, script: ExtendedAttributeTests.script, atLeast: 30)
        // What the mount stored is the vault's: the command line reads it without the prefix.
        #expect(try m.cli.cli(["attr", "renamed", "service"]).stdoutText == "gitlab")
        #expect(try m.cli.cli(["find", "account=me@example.org"]).stdoutText == "renamed\n")
        #expect(try m.cli.cli(["verify"]).status == 0)
    }

    /// The vault's own limit on what one node may carry, and the namespaces it does not keep.
    @Test func limitsAndOtherNamespaces() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        let result = try run("/usr/bin/python3", ["-c", """
            import errno, os, sys
            f = sys.argv[1]
            def attempt(fn, *a):
                try:
                    fn(*a); return 'ok'
                except OSError as e:
                    return errno.errorcode[e.errno]
            results = [attempt(os.setxattr, f, 'user.v%d' % i, b'x' * 65000) for i in range(5)]
            print(results, len(os.listxattr(f)))
            print(attempt(os.setxattr, f, 'trusted.t', b'1'), attempt(os.setxattr, f, 'security.s', b'1'),
                  attempt(os.removexattr, f, 'trusted.t'), attempt(os.getxattr, f, 'system.posix_acl_access'))
            os.setxattr(f, 'user.small', b'abc')
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            buf = ctypes.create_string_buffer(2)
            rc = libc.getxattr(f.encode(), b'user.small', buf, ctypes.c_size_t(2))
            print(rc, errno.errorcode.get(ctypes.get_errno()), libc.getxattr(f.encode(), b'user.small', None, ctypes.c_size_t(0)))
            rc = libc.listxattr(f.encode(), buf, ctypes.c_size_t(2))
            print(rc, errno.errorcode.get(ctypes.get_errno()))
            """, m.path("f")])
        #expect(result.stdoutText == """
            ['ok', 'ok', 'ok', 'ok', 'ENOSPC'] 4
            ENOTSUP ENOTSUP ENOTSUP ENODATA
            -1 ERANGE 3
            -1 ERANGE

            """, "\(result.stderr)")
    }

    /// cp, rsync and tar carry the attributes into the mount and out of it again.
    @Test func toolsKeepAttributesBothWays() throws {
        let m = try MountFixture()
        let source = m.cli.directory + "/source"
        let script = """
            set -e
            mkdir -p \(source)/d && printf one > \(source)/d/one && printf two > \(source)/d/two
            setfattr -n user.service -v github \(source)/d/one && setfattr -n user.label -v 'Deploy key' \(source)/d/two
            setfattr -n user.comment -v dictionary \(source)/d
            cp -r --preserve=xattr \(source)/d \(m.mountpoint)/cp
            cp -a \(source)/d \(m.mountpoint)/cpa
            rsync -rX \(source)/d/ \(m.mountpoint)/rsync/
            tar --xattrs -C \(source) -cf \(m.cli.directory)/in.tar d && mkdir \(m.mountpoint)/tar && tar --xattrs -C \(m.mountpoint)/tar -xf \(m.cli.directory)/in.tar
            for t in cp cpa rsync tar/d; do getfattr -d --absolute-names \(m.mountpoint)/$t/one \(m.mountpoint)/$t/two | grep user.; done
            getfattr -n user.comment --only-values --absolute-names \(m.mountpoint)/cpa; echo
            mkdir \(m.cli.directory)/out
            cp -a \(m.mountpoint)/cpa \(m.cli.directory)/out/cpa
            rsync -rX \(m.mountpoint)/rsync/ \(m.cli.directory)/out/rsync/
            tar --xattrs -C \(m.mountpoint) -cf \(m.cli.directory)/out.tar tar/d && mkdir \(m.cli.directory)/out/tar && tar --xattrs -C \(m.cli.directory)/out/tar -xf \(m.cli.directory)/out.tar
            for t in cpa rsync tar/tar/d; do getfattr -d --absolute-names \(m.cli.directory)/out/$t/one \(m.cli.directory)/out/$t/two | grep user.; done
            """
        let result = try sh(script)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        let pair: [String] = ["user.service=\"github\"", "user.label=\"Deploy key\""]
        var expected: [String] = []
        for _ in 0..<4 { expected += pair }
        expected.append("dictionary")
        for _ in 0..<3 { expected += pair }
        #expect(lines == expected, "\(result.stdoutText)")
    }

    @Test func aLockedMountRefusesAttributesAndAnUnmountKeepsThem() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        #expect(setxattr(m.path("f"), "user.service", "github", 6, 0) == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).status == 0)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(errnoOf { Int32(getxattr(m.path("f"), "user.service", &buffer, 64)) } == EACCES)
        #expect(try m.unmount().status == 0)
        #expect(try m.mount().status == 0)
        #expect(getxattr(m.path("f"), "user.service", &buffer, 64) == 6 && Array(buffer[0..<6]) == Array("github".utf8))
    }

    /// Attribute values swapped between two items in the file: each read through the mount
    /// fails with EIO, never returns the other item's value, and verify names both.
    @Test func swappedAttributeRecordsReadAsEIO() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0 && writeFile(m.path("g"), [2]) == 0)
        #expect(setxattr(m.path("f"), "user.service", "ffff", 4, 0) == 0)
        #expect(setxattr(m.path("g"), "user.service", "gggg", 4, 0) == 0)
        #expect(try m.unmount().status == 0)
        let swap = try run("/usr/bin/sqlite3", [m.vault, """
            CREATE TEMP TABLE original AS SELECT node, value FROM attributes;
            UPDATE attributes SET value = (SELECT value FROM original WHERE original.node != attributes.node);
            """])
        #expect(swap.status == 0, "\(swap.stderr)")
        #expect(try m.mount().status == 0)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(errnoOf { Int32(getxattr(m.path("f"), "user.service", &buffer, 16)) } == EIO)
        #expect(errnoOf { Int32(getxattr(m.path("g"), "user.service", &buffer, 16)) } == EIO)
        let verify = try m.cli.cli(["verify"])
        #expect(verify.exitStatus == .integrityFailure && verify.stderr.contains("f:") && verify.stderr.contains("g:"), "\(verify.stderr)")
    }

    /// setxattr changes ctime, as on Linux, and an open descriptor's fstat shows it.
    @Test func anAttributeChangeMovesTheChangeTimeOfAnOpenFile() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        let fd = open(m.path("f"), O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        var before = stat(), after = stat()
        #expect(fstat(fd, &before) == 0)
        #expect(setxattr(m.path("f"), "user.service", "github", 6, 0) == 0)
        #expect(fstat(fd, &after) == 0)
        #expect((after.st_ctim.tv_sec, after.st_ctim.tv_nsec) > (before.st_ctim.tv_sec, before.st_ctim.tv_nsec))
    }
}
