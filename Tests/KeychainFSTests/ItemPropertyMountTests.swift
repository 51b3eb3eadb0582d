import CLinux
import Foundation
import Glibc
import Testing

/// A node's label and content type through the mount: the extended attributes
/// `keychainfs.label` and `keychainfs.content_type`, readable and writable but never listed,
/// so the `user.` listing and copies out of the mount stay as they were.
@Suite(.tags(.mount, .slow)) struct ItemPropertyMountTests {
    @Test func labelAndContentTypeAreUnlistedExtendedAttributes() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), Array("secret".utf8)) == 0)
        #expect(mkdir(m.path("d"), 0o700) == 0)
        #expect(setxattr(m.path("f"), "user.service", "github", 6, 0) == 0)
        let result = try run("/usr/bin/python3", ["-c", """
            import errno, os, sys
            f, d = sys.argv[1], sys.argv[2]
            def attempt(fn, *a):
                try:
                    r = fn(*a)
                    return 'ok' if r is None else r
                except OSError as e:
                    return errno.errorcode[e.errno]
            print(attempt(os.getxattr, f, 'keychainfs.label'))
            print(attempt(os.setxattr, f, 'keychainfs.label', 'Deploy key ✓'.encode()), attempt(os.getxattr, f, 'keychainfs.label').decode())
            print(attempt(os.setxattr, f, 'keychainfs.label', b'x', os.XATTR_CREATE), attempt(os.setxattr, f, 'keychainfs.content_type', b'x', os.XATTR_REPLACE))
            print(attempt(os.setxattr, f, 'keychainfs.content_type', b'text/plain'), attempt(os.getxattr, f, 'keychainfs.content_type'))
            print(sorted(os.listxattr(f)), sorted(os.listxattr(d)))
            print(attempt(os.setxattr, d, 'keychainfs.label', b'Logins'), attempt(os.getxattr, d, 'keychainfs.label'))
            print(attempt(os.removexattr, f, 'keychainfs.content_type'), attempt(os.removexattr, f, 'keychainfs.content_type'))
            print(attempt(os.setxattr, f, 'keychainfs.other', b'x'), attempt(os.getxattr, f, 'keychainfs.other'))
            print(attempt(os.setxattr, f, 'keychainfs.label', b'v' * 65537))
            """, m.path("f"), m.path("d")])
        #expect(result.stdoutText == """
            ENODATA
            ok Deploy key ✓
            EEXIST ENODATA
            ok b'text/plain'
            ['user.service'] []
            ok b'Logins'
            ok ENODATA
            ENOTSUP ENODATA
            E2BIG

            """, "\(result.stderr)")

        // getfattr's dump of every namespace shows the user's attributes only.
        let dump = try sh("getfattr -d -m - --absolute-names \(m.path("f"))")
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdoutText == "# file: \(m.path("f"))\nuser.service=\"github\"\n\n")
        let named = try sh("getfattr -n keychainfs.label --only-values --absolute-names \(m.path("f"))")
        #expect(named.stdoutText == "Deploy key ✓")

        // What the mount stored is the vault's label, which the command line reads and sets.
        #expect(try m.cli.cli(["label", "f"]).stdoutText == "Deploy key ✓")
        #expect(try m.cli.cli(["attr", "f"]).stdoutText == "service=github\n")
        #expect(try m.cli.cli(["label", "d", "Logins and keys"]).status == 0)
        #expect(try sh("setfattr -n keychainfs.label -v 'Set by setfattr' \(m.path("f"))").status == 0)
        #expect(try m.cli.cli(["label", "f"]).stdoutText == "Set by setfattr")
        let got = try JSONSerialization.jsonObject(with: try m.cli.cli(["get", "--json", "f"]).stdout) as? [String: Any]
        #expect(got?["label"] as? String == "Set by setfattr")
        let listed = try JSONSerialization.jsonObject(with: try m.cli.cli(["ls", "--json"]).stdout) as? [[String: Any]]
        #expect(listed?.map { $0["label"] as? String } == ["Logins and keys", "Set by setfattr"])
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = getxattr(m.path("d"), "keychainfs.label", &buffer, 64)
        #expect(count == 15 && Array(buffer[0..<15]) == Array("Logins and keys".utf8))

        // A copy out of the mount carries the user's attributes, without a word about the label.
        let copy = m.cli.directory + "/copy"
        let copied = try sh("cp -a \(m.path("f")) \(copy) && getfattr -d -m - --absolute-names \(copy)")
        #expect(copied.status == 0 && copied.stderr.isEmpty, "\(copied.stderr)")
        #expect(copied.stdoutText == "# file: \(copy)\nuser.service=\"github\"\n\n")

        #expect(try m.cli.cli(["label", "f", "--clear"]).status == 0)
        #expect(errnoOf { Int32(getxattr(m.path("f"), "keychainfs.label", &buffer, 64)) } == ENODATA)
        #expect(try m.cli.cli(["label", "f"]).exitStatus != .success)
        let cleared = try JSONSerialization.jsonObject(with: try m.cli.cli(["get", "--json", "f"]).stdout) as? [String: Any]
        #expect(cleared != nil && cleared?["label"] == nil)
        #expect(try m.cli.cli(["verify"]).status == 0)
    }

    @Test func aLockedMountRefusesTheLabel() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("f"), [1]) == 0)
        #expect(setxattr(m.path("f"), "keychainfs.label", "Token", 5, 0) == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).status == 0)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(errnoOf { Int32(getxattr(m.path("f"), "keychainfs.label", &buffer, 64)) } == EACCES)
        #expect(errnoOf { setxattr(m.path("f"), "keychainfs.label", "Other", 5, 0) } == EACCES)
        #expect(try m.unmount().status == 0)
        #expect(try m.mount().status == 0)
        #expect(getxattr(m.path("f"), "keychainfs.label", &buffer, 64) == 5 && Array(buffer[0..<5]) == Array("Token".utf8))
    }
}
