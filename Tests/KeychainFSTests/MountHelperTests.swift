import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// `mount -t fuse.keychainfs` and fstab lines, through fuse3's mount.fuse3 as a system runs them.
/// mount(8) clears PATH for its helpers, so `sh` finds `keychainfs` in its default PATH, whose
/// first directory is /usr/local/sbin: each test runs in a mount namespace of its own where that
/// directory is a bind mount of one holding this build as `keychainfs`. Its mounts live in that
/// namespace only, and go when their daemon does.
@Suite(.tags(.mount, .slow)) struct MountHelperTests {
    /// A vault with one item, a mountpoint, and a directory with `keychainfs` for mount.fuse3.
    final class Setup {
        let cli: CLIFixture
        let mountpoint: String
        let programs: String

        init(vault: String? = nil) throws {
            cli = try CLIFixture(vault: vault)
            let stored = try cli.cli(["set", "app/token", "s3cret"])
            guard stored.exitStatus == .success else { throw FixtureError("set failed: \(stored.stderr)") }
            mountpoint = cli.directory + "/mnt"
            programs = cli.directory + "/bin"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: programs, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: programs + "/keychainfs", withDestinationPath: keychainfsBinary)
        }

        /// Runs `script` (sh -e) in a new mount namespace where mount(8) finds this build.
        func inNamespace(_ script: String, extra: [String: String] = [:]) throws -> RunResult {
            try run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-ec",
                                         releaseOtherTestsMounts + "mount --bind \"$PROGRAMS\" /usr/local/sbin\n" + script],
                    environment: ["PROGRAMS": programs, "VAULT": cli.vault, "MNT": mountpoint, "PW": cli.passphraseFile]
                        .merging(extra) { $1 })
        }

        /// The daemon serving the mount, which the namespace's last script left running: it must
        /// exit on its own after `umount`; a failed test ends it (SIGTERM unmounts).
        func daemonExits(_ pid: pid_t) -> Bool {
            let exited = eventually(within: 30) { kill(pid, 0) != 0 }
            if !exited { kill(pid, SIGTERM) }
            return exited
        }
    }

    /// Mounts with `mount`, reads, writes, notes the daemon, and unmounts with `umount`.
    private static let mountReadWriteUnmount = """
        cat "$MNT/app/token"; echo
        grep " $MNT " /proc/self/mounts
        printf written > "$MNT/app/new"
        pgrep -f "[k]eychainfs mount .*$MNT"
        umount "$MNT"
        if grep -q " $MNT " /proc/self/mounts; then echo "still mounted"; exit 1; fi
        """

    private static func check(_ result: RunResult, _ setup: Setup, kernelOption: String? = nil) throws {
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        try #require(lines.count == 3, "\(result.stdoutText) \(result.stderr)")
        #expect(lines[0] == "s3cret")
        let fields = lines[1].split(separator: " ")
        #expect(fields.count > 3 && fields[2] == "fuse.keychainfs", "\(lines[1])")
        if let kernelOption { #expect(fields.count > 3 && fields[3].split(separator: ",").contains(Substring(kernelOption)), "\(lines[1])") }
        let pid = try #require(pid_t(lines[2]))
        #expect(setup.daemonExits(pid))
        #expect(try setup.cli.cli(["get", "app/new"]).stdoutText == "written")
    }

    @Test func mountWithTheTypeMountsReadsAndUmountUnmounts() throws {
        let setup = try Setup()
        let result = try setup.inNamespace("""
            mount -t fuse.keychainfs "$VAULT" "$MNT" -o "passfile=$PW,idle_lock=15m,noexec"
            """ + "\n" + Self.mountReadWriteUnmount)
        try Self.check(result, setup, kernelOption: "noexec")
    }

    /// ro goes to the kernel: reads work, writes fail with EROFS before the daemon sees them.
    @Test func aReadOnlyMountRefusesWrites() throws {
        let setup = try Setup()
        let result = try setup.inNamespace("""
            mount -t fuse.keychainfs "$VAULT" "$MNT" -o "passfile=$PW,ro"
            cat "$MNT/app/token"; echo
            if printf x > "$MNT/app/new"; then echo "written"; fi
            pgrep -f "[k]eychainfs mount .*$MNT"
            umount "$MNT"
            """)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "\(result.stdoutText) \(result.stderr)")
        #expect(lines[0] == "s3cret")
        #expect(result.stderr.contains("Read-only file system"), "\(result.stderr)")
        #expect(setup.daemonExits(try #require(pid_t(lines[1]))))
        #expect(try setup.cli.cli(["ls"]).stdoutText == "app/\n")
        #expect(try setup.cli.cli(["ls", "app"]).stdoutText == "token\n")
    }

    @Test func anFstabLineWithNoautoMountsByItsMountpoint() throws {
        let setup = try Setup()
        let fstab = setup.cli.directory + "/fstab"
        try "# a test's own fstab\n\(setup.cli.vault) \(setup.mountpoint) fuse.keychainfs noauto,passfile=\(setup.cli.passphraseFile),x-systemd.automount,nofail 0 0\n"
            .write(toFile: fstab, atomically: true, encoding: .utf8)
        let result = try setup.inNamespace("mount -T \"\(fstab)\" \"$MNT\"\n" + Self.mountReadWriteUnmount)
        try Self.check(result, setup)
    }

    @Test func anUnknownOptionIsRefusedWithOneLine() throws {
        let setup = try Setup()
        let direct = try run(keychainfsBinary, [setup.cli.vault, setup.mountpoint, "-o", "rw,passfile=\(setup.cli.passphraseFile),frobnicate=1,dev,suid"])
        #expect(direct.exitStatus == .usage)
        #expect(direct.stderr == "keychainfs: unknown mount option 'frobnicate=1'\n", "\(direct.stderr)")
        let mounted = try setup.inNamespace("""
            if mount -t fuse.keychainfs "$VAULT" "$MNT" -o "passfile=$PW,allow_other"; then exit 1; fi
            grep -c " $MNT " /proc/self/mounts || true
            """)
        #expect(mounted.status == 0, "\(mounted.stderr)")
        #expect(mounted.stdoutText == "0\n")
        #expect(mounted.stderr.contains("keychainfs: unknown mount option 'allow_other'\n"), "\(mounted.stderr)")
        #expect(!isMounted(setup.mountpoint))
    }

    /// The helper's form typed by hand mounts as well, and the mountpoint alone still does.
    @Test func bothFormsMountWithoutMount8() throws {
        let setup = try Setup()
        for arguments in [[setup.cli.vault, setup.mountpoint, "-o", "passfile=\(setup.cli.passphraseFile)"],
                          [setup.mountpoint, "--vault", setup.cli.vault, "--passphrase-file", setup.cli.passphraseFile]] {
            let mounted = try run(keychainfsBinary, arguments)
            #expect(mounted.exitStatus == .success, "\(arguments): \(mounted.stderr)")
            #expect(readFile(setup.mountpoint + "/app/token") == Array("s3cret".utf8))
            #expect(try run(keychainfsBinary, ["unmount", setup.mountpoint]).exitStatus == .success)
            #expect(!isMounted(setup.mountpoint))
        }
    }

    /// mount(8) helpers print nothing on success; the mount names the vault, where `findmnt -S`
    /// and `umount VAULT` find it, with the kernel's escapes for a space (a comma needs none
    /// there, but libfuse's option list needs one).
    @Test func theHelperIsSilentAndTheVaultNamesTheMount() throws {
        let base = NSTemporaryDirectory() + "keychainfs-named-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: base) }
        let setup = try Setup(vault: base + "/a vault, named/test.vault")
        let output = setup.cli.directory + "/output"
        let result = try setup.inNamespace("""
            mount -t fuse.keychainfs "$VAULT" "$MNT" -o "passfile=$PW" >"$OUTPUT" 2>&1
            findmnt -n -o TARGET,FSTYPE -S "$VAULT" || echo "findmnt found nothing"
            grep " $MNT " /proc/self/mounts | cut -d' ' -f1
            pgrep -f "[k]eychainfs mount .*$MNT"
            umount "$VAULT" || { umount "$MNT"; echo "umount VAULT failed"; }
            if grep -q " $MNT " /proc/self/mounts; then echo "still mounted"; exit 1; fi
            """, extra: ["OUTPUT": output])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "", "mount(8) printed something")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        try #require(lines.count == 3, "\(result.stdoutText) \(result.stderr)")
        #expect(lines[0] == setup.mountpoint + " fuse.keychainfs")
        #expect(lines[1] == setup.cli.vault.replacingOccurrences(of: " ", with: "\\040"))
        #expect(setup.daemonExits(try #require(pid_t(lines[2]))))
    }

    /// What scripts and service managers do: `umount` (or `fusermount3 -u`), then `mount` at
    /// once, while the previous daemon still stores what was written and wipes: every mount
    /// waits for it and succeeds, and nothing written is lost.
    @Test func umountThenMountAtOnceMountsEveryTime() throws {
        let setup = try Setup()
        let result = try setup.inNamespace("""
            mounted=0
            for round in $(seq 1 20); do
                if mount -t fuse.keychainfs "$VAULT" "$MNT" -o "passfile=$PW"; then mounted=$((mounted + 1)); else break; fi
                for file in $(seq 1 50); do echo "$round.$file" > "$MNT/app/f$file"; done
                if [ $((round % 2)) = 0 ]; then umount "$MNT"; else fusermount3 -u "$MNT"; fi
            done
            echo "$mounted"
            """)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "20\n", "\(result.stderr)")
        // Every daemon has gone, the last having stored its round.
        #expect(eventually(within: 30) { (try? sh("pgrep -f '[k]eychainfs mount .*\(setup.mountpoint)'").status) == 1 })
        #expect(try setup.cli.cli(["get", "app/f50"]).stdoutText == "20.50\n")
    }

    @Test func theHelperFormBecomesTheMountCommand() throws {
        let names: Set<String> = ["mount", "get", "help"]
        #expect(try MountHelperArguments.translate(["/v", "/m", "-o", "rw,passfile=/p,idle_lock=15m,secret_service,dev,suid,ro"], subcommands: names)
            == ["mount", "--quiet", "--vault", "/v", "--passphrase-file", "/p", "--idle-lock", "15m", "--secret-service", "--kernel-option", "ro", "/m"])
        #expect(try MountHelperArguments.translate(["/v", "/m", "-onoexec,log_days=3", "-o", "log_entries=10"], subcommands: names)
            == ["mount", "--quiet", "--vault", "/v", "--kernel-option", "noexec", "--log-days", "3", "--log-entries", "10", "/m"])
        #expect(try MountHelperArguments.translate(["/v", "/m", "-o", "busy_poll_us=0,remount_wait=30s"], subcommands: names)
            == ["mount", "--quiet", "--vault", "/v", "--busy-poll-us", "0", "--remount-wait", "30s", "/m"])
        #expect(try MountHelperArguments.translate(["/v", "/m"], subcommands: names) == ["mount", "--quiet", "--vault", "/v", "/m"])
        // Every other command line is the ordinary parser's.
        for arguments in [["/m"], ["mount", "/m"], ["get", "a/b"], ["/m", "--passphrase-file", "p"], ["/v", "/m", "-f"], ["/v", "/m", "-o"]] {
            #expect(try MountHelperArguments.translate(arguments, subcommands: names) == nil, "\(arguments)")
        }
        for (options, refusal) in [("idle_lock=soon", "mount option idle_lock takes a duration such as 30s, 15m or 1h, not 'soon'"),
                                   ("passfile", "mount option passfile needs a value (passfile=...)"),
                                   ("secret_service=yes", "mount option secret_service takes no value"),
                                   ("log_days=-1", "mount option log_days takes a number, 0 or more, not '-1'"),
                                   ("busy_poll_us=lots", "mount option busy_poll_us takes a number from 0 to 1000000, not 'lots'"),
                                   ("remount_wait=soon", "mount option remount_wait takes 0 or a duration such as 10s or 1m, not 'soon'"),
                                   ("ro=1", "unknown mount option 'ro=1'")] {
            #expect(throws: MountHelperArguments.Refusal.self) { try MountHelperArguments.translate(["/v", "/m", "-o", options], subcommands: names) }
            do {
                _ = try MountHelperArguments.translate(["/v", "/m", "-o", options], subcommands: names)
            } catch {
                #expect(error.message == refusal)
            }
        }
    }
}
