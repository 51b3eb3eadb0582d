import Foundation
import Glibc
import Testing

/// The routes an ordinary program of the mounting user took around the access rules (issue
/// 21), each tried through a real mount that user made, by that user's own programs. Each
/// test first shows the admitted program reading, so a refusal means the attack, not a
/// broken setup.
@Suite(.serialized, .tags(.mount, .slow))
struct AttackTests {
    static let secret = "s3cret-token"

    /// A user mount with `app/token` readable only by a root-owned copy of dash.
    final class Scene {
        let m: UserMount
        let admitted: String

        init() throws {
            m = try UserMount()
            admitted = try m.install("/bin/dash", as: "admitted-dash")
            try m.guardItem("app/token", AttackTests.secret, allow: ["--exe", admitted])
            let honest = try m.run(admitted, ["-c", "read -r x < mnt/app/token; printf %s \"$x\""])
            #expect(honest.stdoutText == AttackTests.secret, "the admitted program itself: \(honest.stderr)")
        }
    }

    @Test func aFakedExecutableInAnotherUserNamespaceIsRefused() throws {
        let s = try Scene()
        let masquerade = try s.m.build("masquerade", libraries: ["masquerade"])
        let faked = try s.m.run(masquerade, [s.admitted, s.m.path("app/token")])
        #expect(faked.stdoutText == "refused: \(EACCES)\n", "\(faked.stdoutText) \(faked.stderr)")
        #expect(!faked.stdoutText.contains(AttackTests.secret))
    }

    @Test func connectThenExecOnTheControlSocketIsJudgedAsTheWriter() throws {
        let s = try Scene()
        let script = try s.m.script("connect_then_exec.py")
        let attack = try s.m.run("/usr/bin/python3", [script, s.admitted, "app/token"])
        #expect(attack.status == 0, "\(attack.stderr)")
        #expect(attack.stdoutText.hasPrefix("error "), "\(attack.stdoutText)")
        #expect(attack.stdoutText.contains("no access rule admits process"), "\(attack.stdoutText)")
        #expect(!attack.stdoutText.contains(AttackTests.secret))
    }

    /// The command line without a passphrase (`keychainfs get`) is a program the rules judge
    /// like any other, and a request written after connect-then-exec is judged as its writer.
    @Test func theCommandLineThroughTheDaemonIsJudgedAsItsOwnProgram() throws {
        let s = try Scene()
        let refused = try s.m.run(keychainfsBinary, ["get", "--vault", s.m.vault, "app/token"])
        #expect(refused.exitStatus == .accessDenied, "\(refused.stderr)")
        #expect(refused.stderr.contains("no access rule admits process"), "\(refused.stderr)")
        #expect(!refused.stdoutText.contains(AttackTests.secret))
        let script = try s.m.script("connect_then_exec_command.py")
        let attack = try s.m.run("/usr/bin/python3", [script, s.admitted, "app", "token"])
        #expect(attack.status == 0, "\(attack.stderr)")
        #expect(attack.stdoutText.hasPrefix("error 12 "), "\(attack.stdoutText)")
        #expect(attack.stdoutText.contains("no access rule admits process"), "\(attack.stdoutText)")
        #expect(!attack.stdoutText.contains(AttackTests.secret))
    }

    @Test func aProgramStartedWithLoaderVariablesIsRefused() throws {
        let s = try Scene()
        _ = try s.m.build("takefd")  // builds the programs directory's compiler output once
        let library = s.m.programs + "/libannounce.so"
        let source = UserMount.attacks + "/libannounce.c"
        #expect(try run("/usr/bin/gcc", ["-fPIC", "-shared", "-o", library, source]).status == 0)
        for variable in ["LD_PRELOAD=\(library)", "LD_AUDIT=\(library)", "LD_LIBRARY_PATH=\(s.m.programs)"] {
            let parts = variable.split(separator: "=", maxSplits: 1).map(String.init)
            let attempt = try s.m.run(s.admitted, ["-c", "read -r x < mnt/app/token; printf %s \"$x\""],
                                      environment: [parts[0]: parts[1]])
            #expect(attempt.stderr.contains("Permission denied"), "\(variable): \(attempt.stderr)")
            #expect(!attempt.stdoutText.contains(AttackTests.secret))
        }
    }

    @Test func anAttachedTracerMakesTheAdmittedProgramRefused() throws {
        let s = try Scene()
        let tracer = try s.m.build("tracer")
        // The admitted program waits on a FIFO; the tracer attaches; then it reads.
        let attack = try s.m.shell("""
            mkfifo go
            \(s.admitted) -c 'read g < go; read -r x < mnt/app/token; printf %s "$x"' > out 2> err &
            pid=$!
            \(tracer) $pid | { read attached; echo "$attached" > attached; echo go > go; }
            wait $pid; echo "status=$?" >> out
            cat attached out err
            """)
        #expect(attack.stdoutText.hasPrefix("attached\n"), "\(attack.stdoutText) \(attack.stderr)")
        #expect(attack.stdoutText.contains("Permission denied"), "\(attack.stdoutText)")
        #expect(!attack.stdoutText.contains(AttackTests.secret))
    }

    @Test func aDescriptorTakenOrKeptAcrossExecReadsNothing() throws {
        let s = try Scene()
        let takefd = try s.m.build("takefd")
        // pidfd_getfd: the admitted program opens the item and waits; another program takes
        // its descriptor and reads.
        let taken = try s.m.shell("""
            mkfifo go opened
            \(s.admitted) -c 'exec 3< mnt/app/token; echo > opened; read g < go' &
            pid=$!
            read o < opened
            \(takefd) $pid 3
            echo go > go
            wait $pid
            """)
        #expect(taken.stdoutText == "refused: \(EACCES)\n", "\(taken.stdoutText) \(taken.stderr)")
        // The admitted program opens it and execs another program, which inherits it.
        let kept = try s.m.run(s.admitted, ["-c", "exec 3< mnt/app/token; exec /bin/cat <&3"])
        #expect(kept.status != 0 && kept.stderr.contains("Permission denied"), "\(kept.stderr)")
        #expect(!kept.stdoutText.contains(AttackTests.secret))
        // The access log records the refused reads (the mount writes it in batches).
        let logged = try eventually(within: 5) { try s.m.cli(["log"]).stdoutText.contains("denied") }
        #expect(logged)
    }

    /// An admitted program that runs code from a file the user can change (a library it was
    /// talked into loading) is refused: that code is the user's, not the program's.
    @Test func anAdmittedProgramRunningCodeTheUserCanChangeIsRefused() throws {
        let m = try UserMount()
        let python = try m.install("/usr/bin/python3", as: "admitted-python")
        try m.guardItem("app/token", AttackTests.secret, allow: ["--exe", python])
        let source = UserMount.attacks + "/libannounce.c"
        // Built by root (the sources may be out of the user's reach), then given to the user.
        let built = try run("/usr/bin/gcc", ["-fPIC", "-shared", "-o", m.home + "/libmine.so", source])
        #expect(built.status == 0 && chown(m.home + "/libmine.so", m.uid, m.gid) == 0, "\(built.stderr)")
        let read = "import ctypes, sys\nif len(sys.argv) > 2: ctypes.CDLL(sys.argv[2])\nprint(open(sys.argv[1]).read())"
        let honest = try m.run(python, ["-c", read, m.path("app/token")])
        #expect(honest.stdoutText == AttackTests.secret + "\n", "\(honest.stderr)")
        let loaded = try m.run(python, ["-c", read, m.path("app/token"), m.home + "/libmine.so"])
        #expect(loaded.stderr.contains("preloaded") && loaded.stderr.contains("PermissionError"), "\(loaded.stderr)")
        #expect(!loaded.stdoutText.contains(AttackTests.secret))
    }

    /// The recipe of SECURITY.md: the admitted program installed setgid to a
    /// group of its own. The kernel runs it with AT_SECURE (the loader ignores LD_PRELOAD) and
    /// keeps it from its own user (no tracer, no pidfd_getfd), and the daemon admits it by its
    /// effective group, since its /proc/PID/exe is no longer the user's to read. Through the
    /// control socket (what `keychainfs exec` uses): FUSE itself refuses the mount to a process
    /// whose groups are not all the mounting user's.
    @Test func theSetgidRecipeIsAdmittedAndClosesPreloadAndTracers() throws {
        let m = try UserMount()
        let group = "keychainfs-admitted"
        if getgrnam(group) == nil { _ = try run("/usr/sbin/groupadd", ["--system", group]) }
        let gid = try #require(getgrnam(group)).pointee.gr_gid
        let admitted = try m.install("/usr/bin/python3", as: "admitted-python", mode: 0o2755, group: gid)
        try m.guardItem("app/token", AttackTests.secret, allow: ["--exe", admitted])
        let attacks = UserMount.attacks
        let script = try m.script("read_through_socket.py")
        let read = try m.run(admitted, [script, "app/token"], stdin: Data("go\n".utf8))
        #expect(read.stdoutText == "ok \(AttackTests.secret.utf8.count)\n\(AttackTests.secret)", "\(read.stdoutText) \(read.stderr)")
        // The same script run by the system's python, which no rule admits.
        let other = try m.run("/usr/bin/python3", [script, "app/token"], stdin: Data("go\n".utf8))
        #expect(other.stdoutText.hasPrefix("error ") && !other.stdoutText.contains(AttackTests.secret), "\(other.stdoutText)")

        let library = m.programs + "/libannounce.so"
        #expect(try run("/usr/bin/gcc", ["-fPIC", "-shared", "-o", library, attacks + "/libannounce.c"]).status == 0)
        let preloaded = try m.run(admitted, [script, "app/token"], environment: ["LD_PRELOAD": library], stdin: Data("go\n".utf8))
        #expect(preloaded.stdoutText.hasSuffix(AttackTests.secret) && !preloaded.stderr.contains("preloaded"), "\(preloaded.stderr)")

        let tracer = try m.build("tracer")
        let takefd = try m.build("takefd")
        // The program says it runs (after its exec, so after the kernel made it non-dumpable)
        // before anyone tries it; a tracer that did attach gives up after 10 s.
        let traced = try m.shell("""
            mkfifo go ready
            \(admitted) -c 'import sys; f = open(sys.argv[1]); print("ready", flush=True); sys.stdin.readline()' \(script) < go > ready &
            pid=$!
            exec 4> go
            read started < ready
            timeout 10 \(tracer) $pid; echo "tracer=$?"
            \(takefd) $pid 0; echo "takefd=$?"
            echo >&4
            wait $pid
            """)
        #expect(traced.stdoutText.contains("tracer=1") && traced.stderr.contains("Operation not permitted"),
                "\(traced.stdoutText) \(traced.stderr)")
        #expect(traced.stdoutText.contains("cannot take: \(EPERM)"), "\(traced.stdoutText)")

        // Through the mount the kernel refuses a setgid program before the daemon hears of it.
        let throughMount = try m.run(admitted, ["-c", "import sys; open(sys.argv[1]).read()", m.path("app/token")])
        #expect(throughMount.status != 0 && throughMount.stderr.contains("PermissionError"), "\(throughMount.stderr)")
    }
}

/// The same route on D-Bus: the bus names only the process that opened a connection.
@Suite(.serialized, .tags(.mount, .bus))
struct BusAttackTests {
    @Test func connectThenExecOnTheBusIsRefusedWithoutConfirm() throws {
        let m = try UserMount(secretService: true)
        let admitted = try m.install("/bin/dash", as: "admitted-dash")
        try m.guardItem("login/token", AttackTests.secret, allow: ["--exe", admitted])
        let script = try m.script("connect_then_exec_bus.py")
        let attack = try m.run("/usr/bin/python3", [script, admitted], environment: m.busEnvironment)
        // The calls are made and answered; the secret is not in the answer.
        #expect(attack.status == 0 && attack.stdoutText.hasPrefix("items="), "\(attack.stdoutText) \(attack.stderr)")
        #expect(!attack.stdoutText.contains(AttackTests.secret), "\(attack.stdoutText)")
        // With --confirm the user is asked, and sees which program the bus names.
        let asked = try m.cli(["allow", "login", "--exe", admitted, "--confirm"])
        #expect(asked.status == 0, "\(asked.stderr)")
    }
}
