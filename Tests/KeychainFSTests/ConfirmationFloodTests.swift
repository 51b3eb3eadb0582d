import Foundation
import Glibc
import Testing

/// A flood of readers against a `--confirm` rule, through a real mount: the dialogs on the
/// screen, the daemon's threads and the answers asked for stay bounded.
@Suite(.serialized, .tags(.mount, .slow))
struct ConfirmationFloodTests {
    /// 40 readers, 5 of each of 8 executables (copies of cat in a root-owned 0755 directory,
    /// each with its own --confirm rule), all waiting at once. The dialog records itself, holds
    /// until the test lets it go, then allows r0..r3 and refuses r4..r7.
    @Test func fortyReadersGetFourDialogsAtMostOnePerExecutableAndARefusalSticks() throws {
        let work = NSTemporaryDirectory() + "kcfs-flood-" + UUID().uuidString
        let bin = work + "/bin", answers = work + "/answers"
        #expect(mkdir(work, 0o755) == 0 && mkdir(bin, 0o755) == 0 && mkdir(answers, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let readers = (0..<8).map { bin + "/r\($0)" }
        for reader in readers { try copyExecutable("/bin/cat", to: reader) }

        let script = """
            echo "$KEYCHAINFS_EXE $KEYCHAINFS_PID" >> \(answers)/asked
            mkdir \(answers)/running.$$
            ls -d \(answers)/running.* | wc -l >> \(answers)/concurrent
            while [ ! -e \(answers)/go ]; do sleep 0.02; done
            rmdir \(answers)/running.$$
            case "$KEYCHAINFS_EXE" in */r[0-3]) exit 0 ;; *) exit 1 ;; esac
            """
        let m = try MountFixture()
        try m.unmount()
        try #require(try m.mount(extra: ["--confirm-with", script, "--confirm-timeout", "30", "--confirm-remember", "60s"]).exitStatus == .success)
        #expect(mkdir(m.path("app"), 0o700) == 0)
        #expect(writeFile(m.path("app/token"), Array("s3cret".utf8)) == 0)
        for reader in readers {
            let allowed = try m.cli.cli(["allow", "app", "--exe", reader, "--confirm"])
            try #require(allowed.exitStatus == .success, "\(allowed.stderr)")
        }
        // The mount reads all rules at once: once a last rule, without --confirm, admits a probe,
        // every rule above applies.
        let probe = bin + "/probe"
        try copyExecutable("/bin/cat", to: probe)
        try #require(try m.cli.cli(["allow", "app", "--exe", probe]).exitStatus == .success)
        #expect(eventually(within: 2) { (try? run(probe, [m.path("app/token")]).status) == 0 })
        let daemon = try status(m.mountpoint).pid
        func threads() -> Int {
            procText("/proc/\(daemon)/status").split(separator: "\n").first { $0.hasPrefix("Threads:") }
                .flatMap { Int($0.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) } ?? -1
        }
        func lines(_ name: String) -> [String] { procText(answers + "/" + name).split(separator: "\n").map(String.init) }
        let before = threads()

        let flood = try (0..<40).map { index -> Process in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: readers[index % 8])
            process.arguments = [m.path("app/token")]
            process.standardOutput = Pipe()
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }
        defer {
            FileManager.default.createFile(atPath: answers + "/go", contents: nil)
            for process in flood where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        // Every reader waits in the kernel for the mount's answer to its open.
        func waitingInFUSE(_ process: Process) -> Bool {
            let wchan = procText("/proc/\(process.processIdentifier)/wchan")
            return wchan.contains("fuse") || wchan.contains("request_wait_answer")
        }
        #expect(eventually(within: 10) { flood.allSatisfy(waitingInFUSE) && lines("asked").count == 4 },
                "\(flood.map { procText("/proc/\($0.processIdentifier)/wchan") }) asked \(lines("asked"))")
        let during = threads()
        #expect(during > 0 && during <= before + 4 + 1,
                "\(during) threads in the daemon with 40 readers waiting, \(before) before")
        #expect(lines("asked").count == 4, "a fifth dialog while four are open: \(lines("asked"))")

        #expect(FileManager.default.createFile(atPath: answers + "/go", contents: nil))
        for process in flood { process.waitUntilExit() }
        // One dialog per executable for the requests that waited together. A reader whose open
        // the daemon reads only after its executable's yes (a loaded machine) is asked again:
        // a yes holds for the processes that waited for it, a no for the executable.
        let asked = lines("asked").map { String($0.split(separator: " ")[0]) }
        #expect(Set(asked).count == 8, "every executable asked: \(asked)")
        for refused in readers[4...] { #expect(asked.filter { $0 == refused }.count == 1, "one dialog for \(refused): \(asked)") }
        #expect(lines("concurrent").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.allSatisfy { $0 <= 4 },
                "\(lines("concurrent"))")
        for (index, process) in flood.enumerated() {
            let output = (process.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
            if index % 8 < 4 {
                #expect(process.terminationStatus == 0 && output == Data("s3cret".utf8), "reader \(index)")
            } else {
                #expect(process.terminationStatus != 0 && output.isEmpty, "reader \(index)")
            }
        }

        // A no is remembered for the executable: another process of it is refused at once.
        let again = try run(readers[5], [m.path("app/token")])
        #expect(again.status != 0 && again.stderr.contains("Permission denied"))
        #expect(lines("asked").count == asked.count)
    }
}
