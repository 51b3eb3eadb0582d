import Foundation
import Glibc
import Testing

/// The same script of descriptor and metadata cases, run on tmpfs and on the mount: any line
/// that differs is a bug. The modes given here have no group or other bits, which the mount
/// drops by choice; the mount is noatime by choice, so no case reads and then looks at atime.
/// tmpfs runs with RLIMIT_FSIZE at the vault's item limit, which is how the mount's limit
/// must behave; on the mount the limit is the daemon's alone (the kernel would enforce an
/// rlimit before the request reached us).
@Suite(.tags(.mount)) struct TmpfsComparisonTests {
    static let script = pythonOutcomeHelpers + #"""
        import ctypes, errno, os, resource, signal, stat, subprocess, sys
        d, limit_here = sys.argv[1], sys.argv[2] == 'rlimit'
        LIMIT = 1 << 20
        os.umask(0)

        # One content shared by every descriptor of a file.
        w = os.open(P('a'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(w, b'hello')
        r = os.open(P('a'), os.O_RDONLY)
        p('second descriptor reads what the first wrote:', os.read(r, 100), os.fstat(r).st_size)
        p('cat sees it too:', subprocess.run(['cat', P('a')], capture_output=True).stdout)
        os.close(r); os.close(w)

        with open(P('b'), 'wb') as f: f.write(b'old!')
        r = os.open(P('b'), os.O_RDONLY)
        w = os.open(P('b'), os.O_WRONLY)
        os.pwrite(w, b'NEW!', 0); os.close(w)
        p('a reader sees a store made after it opened:', os.pread(r, 100, 0))
        os.close(r)

        with open(P('c'), 'wb') as f: f.write(b'start')
        r = os.open(P('c'), os.O_RDONLY)
        p('reader to the end:', os.read(r, 100), os.read(r, 100))
        a = os.open(P('c'), os.O_WRONLY | os.O_APPEND)
        os.write(a, b'+more')
        p('reader at the end sees an append:', os.read(r, 100))
        os.close(a); os.close(r)

        with open(P('t'), 'wb') as f: f.write(b'to be truncated')
        t = os.open(P('t'), os.O_WRONLY | os.O_TRUNC)
        r = os.open(P('t'), os.O_RDONLY)
        p('while an O_TRUNC open is open, a reader reads:', os.read(r, 100), os.stat(P('t')).st_size)
        os.close(r); os.close(t)

        x = os.open(P('x'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        y = os.open(P('x'), os.O_RDWR)
        os.pwrite(x, b'AAAA', 0); os.pwrite(y, b'BB', 10)
        os.close(x); os.close(y)
        p('two writers at different offsets:', open(P('x'), 'rb').read())

        with open(P('log'), 'wb') as f: f.write(b'base\n')
        l1 = os.open(P('log'), os.O_WRONLY | os.O_APPEND)
        l2 = os.open(P('log'), os.O_WRONLY | os.O_APPEND)
        os.write(l1, b'one;'); os.write(l2, b'two;'); os.close(l2); os.write(l1, b'three;'); os.close(l1)
        p('two appenders:', open(P('log'), 'rb').read())

        # Metadata.
        u = os.open(P('u'), os.O_RDWR | os.O_CREAT, 0o600)
        os.write(u, b'12345')
        os.unlink(P('u'))
        st = os.fstat(u)
        p('fstat after unlink: nlink', st.st_nlink, 'size', st.st_size, 'read', os.pread(u, 10, 0))
        os.close(u)

        os.mkdir(P('dict'), 0o700)
        for sub in ('s1', 's2', 's3'): os.mkdir(P('dict/' + sub), 0o700)
        open(P('dict/item'), 'w').close()
        p('dictionary nlink with 3 sub-dictionaries:', os.stat(P('dict')).st_nlink, 'empty one:', os.stat(P('dict/s1')).st_nlink)
        os.rmdir(P('dict/s3')); os.rename(P('dict/s2'), P('s2moved'))
        p('after rmdir and a move out:', os.stat(P('dict')).st_nlink)

        with open(P('times'), 'wb') as f: f.write(b't')
        os.utime(P('times'), ns=(1_000_000_123, 2_000_000_456))
        st = os.stat(P('times'))
        p('utimensat distinct times:', st.st_atime_ns, st.st_mtime_ns)
        libc = ctypes.CDLL(None, use_errno=True)
        class timespec(ctypes.Structure): _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]
        UTIME_NOW, UTIME_OMIT, AT_FDCWD = (1 << 30) - 1, (1 << 30) - 2, -100
        def utimensat(path, a, m):
            ts = (timespec * 2)(a, m)
            return libc.utimensat(AT_FDCWD, path.encode(), ts, 0)
        utimensat(P('times'), timespec(3, 7), timespec(0, UTIME_OMIT))
        st = os.stat(P('times'))
        p('UTIME_OMIT on mtime:', st.st_atime_ns, st.st_mtime_ns)
        utimensat(P('times'), timespec(0, UTIME_OMIT), timespec(5, 9))
        st = os.stat(P('times'))
        p('UTIME_OMIT on atime:', st.st_atime_ns, st.st_mtime_ns)
        utimensat(P('times'), timespec(0, UTIME_NOW), timespec(0, UTIME_OMIT))
        st = os.stat(P('times'))
        p('UTIME_NOW on atime moves atime only:', st.st_atime_ns > 10**18, st.st_mtime_ns)
        subprocess.run(['touch', '-a', '-d', '2001-02-03 04:05:06.5 UTC', P('times')], check=True)
        subprocess.run(['touch', '-m', '-d', '2002-02-03 04:05:06.25 UTC', P('times')], check=True)
        st = os.stat(P('times'))
        p('touch -a and touch -m:', st.st_atime_ns, st.st_mtime_ns)

        f = os.open(P('modes'), os.O_WRONLY | os.O_CREAT, 0o4700)
        os.close(f)
        os.mkdir(P('sticky'), 0o1700)
        os.mkdir(P('setgid'), 0o2700)
        p('modes given at creation:', oct(os.stat(P('modes')).st_mode), oct(os.stat(P('sticky')).st_mode), oct(os.stat(P('setgid')).st_mode))

        # The size limit, as RLIMIT_FSIZE: the write that crosses it fails alone.
        if limit_here:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
        b = os.open(P('big'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        p('write up to the limit:', os.pwrite(b, b'7' * LIMIT, 0))
        p('one byte past it:', attempt(os.pwrite, b, b'8', LIMIT))
        p('the descriptor still reads and writes:', os.pread(b, 4, 0), os.pwrite(b, b'head', 0), os.fstat(b).st_size)
        p('its close:', attempt(os.close, b))
        with open(P('big'), 'rb') as f: data = f.read()
        p('stored:', len(data), data[:6], data[-2:])
        c = os.open(P('cross'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        p('one write across the limit writes what fits:', attempt(os.write, c, b'9' * (LIMIT + 10)))
        p('the next one:', attempt(os.write, c, b'9'))
        p('ftruncate past it:', attempt(os.ftruncate, c, LIMIT + 1))
        os.close(c)
        p('stored:', os.stat(P('cross')).st_size)

        fa = os.open(P('alloc'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fa, b'ab')
        p('posix_fallocate:', attempt(os.posix_fallocate, fa, 0, 100), os.fstat(fa).st_size, os.pread(fa, 4, 0))
        p('fallocate past the limit:', attempt(os.posix_fallocate, fa, 0, LIMIT + 1))
        os.close(fa)
        p('stored:', os.stat(P('alloc')).st_size)
        print('\n'.join(out))
        """#

    @Test func descriptorsAndMetadataBehaveAsOnTmpfs() throws {
        let m = try MountFixture()
        try expectSameOutputAsTmpfs(m, script: TmpfsComparisonTests.script, tmpfsArguments: ["rlimit"], mountArguments: ["none"],
                                    atLeast: 20)
        #expect(try m.cli.cli(["verify"]).status == 0)
    }

    /// Times and removed directories, as tmpfs keeps them: a write, ftruncate or fallocate
    /// through a descriptor moves mtime and ctime at once (not at the close that stores it),
    /// and an open directory removed or replaced answers fstat with no link and lists nothing.
    static let timesScript = pythonOutcomeHelpers + #"""
        import errno, os, sys, time
        d = sys.argv[1]
        # Times through a descriptor, at once: mtime and ctime both move to the same instant, seen by
        # fstat on any descriptor and by stat by path. Times are first set far back (ctime to now), so
        # each change is a step the comparison sees whatever the clock's grain.
        OLD = 1_000_000_000
        def after_clock_tick(ns):
            # Until the clock filesystems stamp with (the coarse one) has passed `ns`.
            while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= ns: pass
        CLOCK_REALTIME_COARSE = 5
        def times_after(name, change):
            fd = os.open(P(name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b'abc')
            other = os.open(P(name), os.O_RDONLY)
            os.utime(P(name), ns=(OLD, OLD))
            before = os.stat(P(name))
            after_clock_tick(before.st_ctime_ns)
            change(fd)
            mine, theirs, path = os.fstat(fd), os.fstat(other), os.stat(P(name))
            p(name, 'mtime moved:', mine.st_mtime_ns > OLD, 'ctime moved:', mine.st_ctime_ns > before.st_ctime_ns,
              'mtime == ctime:', mine.st_mtime_ns == mine.st_ctime_ns,
              'other descriptor and path agree:', (theirs.st_mtime_ns, theirs.st_ctime_ns) == (mine.st_mtime_ns, mine.st_ctime_ns) == (path.st_mtime_ns, path.st_ctime_ns),
              'size:', path.st_size)
            os.close(other); os.close(fd)
            after = os.stat(P(name))
            p(name, 'close keeps them:', (after.st_mtime_ns, after.st_ctime_ns) == (mine.st_mtime_ns, mine.st_ctime_ns))
        times_after('written', lambda fd: os.pwrite(fd, b'xyz', 1))
        times_after('truncated', lambda fd: os.ftruncate(fd, 1))
        times_after('grown', lambda fd: os.ftruncate(fd, 10))
        times_after('allocated', lambda fd: os.posix_fallocate(fd, 0, 100))
        def append(_fd):
            a = os.open(P('appended'), os.O_WRONLY | os.O_APPEND)
            os.write(a, b'more'); os.close(a)
        times_after('appended', append)
        # chmod after a write through a descriptor: the ctime is the chmod's, and stays after close.
        fd = os.open(P('chmodded'), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, b'abc'); os.utime(P('chmodded'), ns=(OLD, OLD))
        os.write(fd, b'def'); written = os.fstat(fd)
        after_clock_tick(written.st_ctime_ns); os.fchmod(fd, 0o640); chmodded = os.fstat(fd); os.close(fd)
        closed = os.stat(P('chmodded'))
        p('chmod after a write moves ctime past mtime:', chmodded.st_ctime_ns > written.st_mtime_ns, chmodded.st_mtime_ns == written.st_mtime_ns,
          'and close keeps it:', closed.st_ctime_ns == chmodded.st_ctime_ns, closed.st_mtime_ns == written.st_mtime_ns)

        # Open directories removed (rmdir) or replaced (rename over them).
        os.mkdir(P('gone'), 0o700)
        g = os.open(P('gone'), os.O_RDONLY | os.O_DIRECTORY)
        os.rmdir(P('gone'))
        p('fstat of a removed open directory:', attempt(lambda: os.fstat(g).st_nlink), 'listing:', attempt(os.listdir, g))
        os.close(g)
        os.mkdir(P('old'), 0o700); os.mkdir(P('new'), 0o700); open(P('old/inside'), 'w').close(); os.unlink(P('old/inside'))
        o = os.open(P('old'), os.O_RDONLY | os.O_DIRECTORY)
        os.rename(P('new'), P('old'))
        p('fstat of a replaced open directory:', attempt(lambda: os.fstat(o).st_nlink), 'listing:', attempt(os.listdir, o),
          'the new one:', os.stat(P('old')).st_nlink, os.listdir(P('old')))
        os.close(o)
        print('\n'.join(out))
        """#

    @Test func timesAndRemovedOpenDirectoriesBehaveAsOnTmpfs() throws {
        let m = try MountFixture()
        try expectSameOutputAsTmpfs(m, script: TmpfsComparisonTests.timesScript, atLeast: 13)
        #expect(try m.cli.cli(["verify"]).status == 0)
    }

    /// What tmpfs supports but a secret has no use for.
    @Test func holePunchingIsNotSupported() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("content".utf8)) == 0)
        let result = try run("/usr/bin/python3", ["-c", """
            import ctypes, errno, os, sys
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(sys.argv[1], os.O_RDWR)
            PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01
            rc = libc.fallocate(fd, PUNCH_HOLE_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(4))
            print(rc, errno.errorcode.get(ctypes.get_errno()))
            """, m.path("f")])
        #expect(result.stdoutText == "-1 ENOTSUP\n", "\(result.stderr)")
        #expect(readFile(m.path("f")) == Array("content".utf8))
    }
}
