@testable import Daemon
import Foundation
import Glibc
@testable import Support
import Testing

@Suite struct PtraceScopeTests {
    @Test func aMissingOrZeroScopeIsWarnedAbout() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/kcfs-yama-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func scope(_ text: String) throws -> Int? {
            try text.write(toFile: directory + "/ptrace_scope", atomically: true, encoding: .utf8)
            return PtraceScope.current(file: directory + "/ptrace_scope")
        }
        #expect(try scope("0\n") == 0)
        #expect(try scope("2\n") == 2)
        #expect(PtraceScope.current(file: directory + "/absent") == nil)
        #expect(PtraceScope.warning(scope: 0)?.contains("ptrace_scope is 0") == true)
        #expect(PtraceScope.warning(scope: nil)?.contains("absent") == true)
        // Scope 1 leaves a parent able to write into its child's memory: only 2 and 3 hold.
        #expect(PtraceScope.warning(scope: 1)?.contains("ptrace_scope is 1: the parent") == true)
        for restricted in 2...3 { #expect(PtraceScope.warning(scope: restricted) == nil) }

        // This machine's own setting, whichever it is.
        let yama = FileManager.default.fileExists(atPath: PtraceScope.file)
        #expect((PtraceScope.current() == nil) == !yama)

        let line = DaemonLog.line(.ptraceUnrestricted(scope: nil), mountpoint: "/mnt/vault")
        #expect(line == "/mnt/vault: " + PtraceScope.warning(scope: nil)!)
        #expect(DaemonLog.Event.ptraceUnrestricted(scope: 0).priority == LOG_WARNING)
    }
}
