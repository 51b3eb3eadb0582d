import Foundation
import Glibc
import Testing

/// `allow --exe` refuses a program that someone other than root could rewrite or replace (the
/// file or a directory above it), unless `--force`: `nobody` plays the user whose every
/// program could otherwise become the admitted one.
@Suite struct ReplaceableExecutableTests {
    let nobody = getpwnam("nobody").pointee.pw_uid
    let nogroup = getpwnam("nobody").pointee.pw_gid

    /// A root-owned 0755 directory under the scratch space (world-writable and sticky: the
    /// check must pass through it) holding each case.
    final class Tree {
        let root = NSTemporaryDirectory() + "kcfs-owned-" + UUID().uuidString
        init() { mkdir(root, 0o755) }
        deinit { try? FileManager.default.removeItem(atPath: root) }

        func directory(_ name: String, mode: mode_t, owner: uid_t = 0, group: gid_t = 0) -> String {
            let path = root + "/" + name
            mkdir(path, 0o700)
            chown(path, owner, group)
            chmod(path, mode)
            return path
        }

        func binary(_ path: String, owner: uid_t = 0, group: gid_t = 0, mode: mode_t = 0o755) throws -> String {
            try copyExecutable("/usr/bin/head", to: path)
            chown(path, owner, group)
            chmod(path, mode)
            return path
        }
    }

    @Test func allowRefusesWhatAnotherUserCouldReplaceUnlessForced() throws {
        let f = try CLIFixture()
        try f.cli(["mkdir", "app"])
        let tree = Tree()
        let safe = tree.directory("safe", mode: 0o755)
        let theirs = tree.directory("theirs", mode: 0o755, owner: nobody, group: nogroup)
        let open = tree.directory("open", mode: 0o777)
        let groupOpen = tree.directory("group", mode: 0o775, group: nogroup)
        let sticky = tree.directory("sticky", mode: 0o1777)
        let cases: [(String, String)] = [
            (try tree.binary(safe + "/owned-by-nobody", owner: nobody, group: nogroup), "belongs to user \(nobody)"),
            (try tree.binary(safe + "/group-writable", group: nogroup, mode: 0o775), "is writable by group"),
            (try tree.binary(safe + "/world-writable", mode: 0o757), "is writable by everyone"),
            (try tree.binary(theirs + "/tool"), "\(theirs) belongs to user \(nobody)"),
            (try tree.binary(open + "/tool"), "\(open) is writable by everyone"),
            (try tree.binary(groupOpen + "/tool"), "\(groupOpen) is writable by group"),
            (try tree.binary(sticky + "/theirs", owner: nobody, group: nogroup), "belongs to user \(nobody)"),
        ]
        let link = safe + "/link"
        #expect(symlink(theirs + "/tool", link) == 0)
        for (path, reason) in cases + [(link, "\(theirs) belongs to user \(nobody)")] {
            let refused = try f.cli(["allow", "app", "--exe", path])
            #expect(refused.exitStatus == .invalidInput && refused.stderr.contains(reason) && refused.stderr.contains("--force"),
                    "\(path): \(refused.stderr)")
        }
        #expect(try f.cli(["rules"]).stdoutText == "", "nothing refused was recorded")

        // The attack each refusal is about: nobody changes what the path runs.
        let attack = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c",
                                                  "cp /bin/true \"$1.new\" && mv -f \"$1.new\" \"$1\" && cat /bin/true > \"$2\"",
                                                  "sh", theirs + "/tool", safe + "/owned-by-nobody"])
        #expect(attack.status == 0, "\(attack.stderr)")

        // Root's own, in root's directories, through the sticky one as well: admitted.
        for path in [try tree.binary(safe + "/tool"), try tree.binary(sticky + "/tool")] {
            let allowed = try f.cli(["allow", "app", "--exe", path])
            #expect(allowed.exitStatus == .success, "\(path): \(allowed.stderr)")
        }
        let forced = try f.cli(["allow", "app", "--exe", theirs + "/tool", "--force"])
        #expect(forced.exitStatus == .success, "\(forced.stderr)")
        #expect(try f.cli(["rules"]).stdoutText.contains("--exe \(theirs)/tool"))
    }

    /// For a user other than root, the user's own program (its own file, or in its own
    /// directory) is refused: every program of the user could rewrite it.
    @Test func aUsersOwnProgramIsRefusedToThatUser() throws {
        let f = try CLIFixture()
        try f.cli(["mkdir", "app"])
        let tree = Tree()
        let home = tree.directory("home", mode: 0o755, owner: nobody, group: nogroup)
        let own = try tree.binary(home + "/tool", owner: nobody, group: nogroup)
        let rootTool = try tree.binary(tree.directory("bin", mode: 0o755) + "/tool")
        #expect(chown(f.directory, nobody, nogroup) == 0 && chmod(f.directory, 0o700) == 0)
        _ = try run("/bin/chown", ["-R", "nobody:nogroup", f.directory])
        func allow(_ path: String, _ extra: [String] = []) throws -> RunResult {
            try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", keychainfsBinary, "allow",
                                         "--vault", f.vault, "--passphrase-file", f.passphraseFile, "app", "--exe", path] + extra,
                    environment: ["HOME": f.directory])
        }
        let refused = try allow(own)
        #expect(refused.exitStatus == .invalidInput && refused.stderr.contains("belongs to you"), "\(refused.stderr)")
        let allowed = try allow(rootTool)
        #expect(allowed.exitStatus == .success, "\(allowed.stderr)")
        #expect(try allow(own, ["--force"]).exitStatus == .success)
    }
}
