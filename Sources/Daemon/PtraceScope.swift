import Glibc
import SystemCalls
import SystemPackage

/// Yama's `kernel.yama.ptrace_scope`. Access rules refuse an admitted program while it is
/// traced, but below scope 2 a process of the same user can still write code into it without
/// tracing it (`/proc/PID/mem`, `process_vm_writev`: scope 0 any of them, scope 1 its parent,
/// which may also trace it), and make it read secrets on its behalf. Scope 2 (only root) or 3
/// (nobody) closes that, as does the setgid recipe in SECURITY.md for one program.
enum PtraceScope {
    static let file = "/proc/sys/kernel/yama/ptrace_scope"

    /// The scope (0 to 3), or nil when there is no Yama (or its setting cannot be read).
    static func current(file: String = file) -> Int? {
        guard let bytes = try? FileDescriptor.contents(of: file), !bytes.isEmpty else { return nil }
        return Int(String(decoding: bytes.filter { $0 != 0x0A }, as: UTF8.self))
    }

    /// What the mount says when access rules can be worked around through another process's
    /// memory; nil when ptrace is restricted to root (2) or to nobody (3).
    static func warning(scope: Int?) -> String? {
        switch scope {
        case .some(let scope) where scope >= 2:
            nil
        case .some(let scope):
            "kernel.yama.ptrace_scope is \(scope): "
                + (scope == 0 ? "any process of the mounting user" : "the parent of a program that access rules admit")
                + " can write code into it through /proc/PID/mem and read secrets through it; set it to 2 (sysctl kernel.yama.ptrace_scope=2), or install such programs setgid to a group of their own (SECURITY.md)"
        case .none:
            "the kernel has no Yama ptrace restriction (kernel.yama.ptrace_scope is absent): any process of the mounting user can write code into a program that access rules admit through /proc/PID/mem and read secrets through it; install such programs setgid to a group of their own (SECURITY.md)"
        }
    }
}
