import Foundation
import Testing

/// Large items through the mount (format 9): contents of many blocks written, read, truncated
/// and grown at any offset, by several descriptors, unlinked or replaced while open, behave as
/// on tmpfs; what was stored reads the same after a remount, in blocks, and verifies.
@Suite(.tags(.mount)) struct ContentBlockMountTests {
    /// Prints one line per step with the size and a digest of what each file holds.
    static let script = pythonOutcomeHelpers + #"""
        import errno, hashlib, os, random, sys
        d = sys.argv[1]
        B = 4000
        rng = random.Random(9)
        names = ['f%d' % i for i in range(4)]
        def digest(name):
            try:
                with open(P(name), 'rb') as f: data = f.read()
            except OSError as e:
                return 'errno=' + errno.errorcode[e.errno]
            return '%d:%s' % (len(data), hashlib.sha256(data).hexdigest()[:16])
        def size(name):
            try: return os.stat(P(name)).st_size
            except OSError: return 0
        for step in range(240):
            name = rng.choice(names)
            k = rng.random()
            if k < 0.40:
                # Within, across or past block boundaries, holes included.
                data = rng.randbytes(rng.choice([1, 17, B - 1, B, B + 1, 3 * B + 5, rng.randrange(1, 40000)]))
                offset = rng.choice([0, B - 1, B, 2 * B + 3, rng.randrange(size(name) + 30000)])
                fd = os.open(P(name), os.O_RDWR | os.O_CREAT, 0o600)
                os.pwrite(fd, data, offset); os.close(fd)
                what = 'pwrite %d at %d' % (len(data), offset)
            elif k < 0.55:
                length = rng.choice([0, 1, B - 1, B, B + 1, 5 * B + 7, rng.randrange(size(name) + 9000)])
                what = 'truncate %d: %s' % (length, attempt(os.truncate, P(name), length))
            elif k < 0.65:
                # ftruncate then a write through the same descriptor: the cut block and the new end.
                length = rng.randrange(size(name) + 9000)
                fd = os.open(P(name), os.O_RDWR | os.O_CREAT, 0o600)
                os.ftruncate(fd, length); os.pwrite(fd, b'end', max(length - 1, 0)); os.close(fd)
                what = 'ftruncate %d and write at the end' % length
            elif k < 0.72:
                data = rng.randbytes(rng.randrange(1, 3 * B))
                fd = os.open(P(name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(fd, data); os.close(fd)
                what = 'rewritten whole with %d' % len(data)
            elif k < 0.80:
                # Two descriptors: what one writes across a boundary the other reads at once.
                w = os.open(P(name), os.O_RDWR | os.O_CREAT, 0o600)
                r = os.open(P(name), os.O_RDONLY)
                offset = rng.randrange(size(name) + B)
                os.pwrite(w, rng.randbytes(B + 10), offset)
                seen = hashlib.sha256(os.pread(r, 2 * B, max(offset - 5, 0))).hexdigest()[:16]
                os.close(w); os.close(r)
                what = 'second descriptor read %s' % seen
            elif k < 0.86:
                # Unlinked while open: the descriptor still reads all of it.
                if not os.path.exists(P(name)):
                    continue
                r = os.open(P(name), os.O_RDONLY)
                os.unlink(P(name))
                chunks = []
                while True:
                    chunk = os.read(r, 7000)
                    if not chunk: break
                    chunks.append(chunk)
                os.close(r)
                what = 'unlinked while open, read %s' % hashlib.sha256(b''.join(chunks)).hexdigest()[:16]
            elif k < 0.92:
                # Replaced by rename while open: the descriptor still reads what it opened.
                other = rng.choice([n for n in names if n != name])
                if not os.path.exists(P(name)) or not os.path.exists(P(other)):
                    continue
                r = os.open(P(name), os.O_RDONLY)
                os.rename(P(other), P(name))
                old = hashlib.sha256(os.pread(r, 1 << 20, 0)).hexdigest()[:16]
                os.close(r)
                what = 'replaced by %s while open, read %s' % (other, old)
            else:
                offset, length = rng.randrange(size(name) + 1), rng.choice([1, B, B + 1, 3 * B, 70000])
                fd = os.open(P(name), os.O_RDONLY | os.O_CREAT, 0o600)
                what = 'pread %d at %d: %s' % (length, offset, hashlib.sha256(os.pread(fd, length, offset)).hexdigest()[:16])
                os.close(fd)
            p(step, name, what, ' '.join(digest(n) for n in names))
        print('\n'.join(out))
        """#

    @Test func largeItemsBehaveAsOnTmpfsAndKeepAcrossARemount() throws {
        let m = try MountFixture()
        try expectSameOutputAsTmpfs(m, script: ContentBlockMountTests.script, atLeast: 200)
        let names = try FileManager.default.contentsOfDirectory(atPath: m.mountpoint).sorted()
        let before = try names.map { try Data(contentsOf: URL(fileURLWithPath: m.path($0))) }
        #expect(try m.unmount().status == 0)
        #expect(try m.mount().status == 0)
        let after = try names.map { try Data(contentsOf: URL(fileURLWithPath: m.path($0))) }
        #expect(before == after)
        #expect(before.contains { $0.count > 3 * 4000 }, "the script left no large item")
        #expect(try m.cli.cli(["verify"]).status == 0)
        m.unmountQuietly()
        #expect(try !ContentBlockMountTests.blocks(m.vault).isEmpty)
    }

    /// A write in the middle of a large item stores the blocks it touched, not the item: the
    /// other blocks keep their rows (and ciphertexts) as they were.
    @Test func aSmallWriteStoresOnlyTheBlocksItTouches() throws {
        let m = try MountFixture()
        let content = (0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(writeFile(m.path("big"), content) == 0)
        m.unmountQuietly()
        let before = try ContentBlockMountTests.blocks(m.vault)
        #expect(before.count == 100)
        #expect(try m.mount().status == 0)
        let written = try run("/usr/bin/python3", ["-c", """
            import os, sys
            fd = os.open(sys.argv[1], os.O_WRONLY); os.pwrite(fd, b'Z' * 10, 8000 * 5 - 5); os.close(fd)
            """, m.path("big")])
        #expect(written.status == 0)
        var expected = content
        for i in (40_000 - 5)..<(40_000 + 5) { expected[i] = UInt8(ascii: "Z") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path("big"))) == Data(expected))
        m.unmountQuietly()
        let after = try ContentBlockMountTests.blocks(m.vault)
        let changed = before.keys.filter { before[$0] != after[$0] }.sorted()
        #expect(changed == [9, 10])
    }

    /// Every block row's ciphertext by index (one item in the vault), as the file holds them.
    static func blocks(_ vault: String) throws -> [Int64: [UInt8]] {
        var rows: [Int64: [UInt8]] = [:]
        for (index, sealed) in try StorageEngine.sqlite.rawRows(vault).blobs("content_blocks", "sealed", key: "idx", where: "1 = 1") {
            rows[index] = sealed
        }
        return rows
    }
}
