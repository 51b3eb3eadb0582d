import Glibc
import VaultCore

/// The answers the user gave, until each expires. A yes holds for one process (its pid and
/// start time, so a pid given again to a new process inherits nothing), one rule and one kind
/// of access. A no holds for every process of the executable that was refused (its file, as
/// `Subject` says), so a program that starts itself again and again cannot bring the dialog
/// back. A yes to reading is not a yes to writing, nor a no to reading a no to writing.
struct RememberedConfirmations {
    /// Who a dialog is about: the executable file when the kernel names it, else the process.
    enum Subject: Hashable, Sendable {
        case executable(FileIdentity)
        case process(pid_t, startTime: UInt64)
    }

    struct Key: Hashable, Sendable {
        let subject: Subject
        let rule: AccessRule
        let write: Bool

        init(subject: Subject, rule: AccessRule, access: Access) {
            self.subject = subject
            self.rule = rule
            write = access == .write
        }

        init(processID: pid_t, startTime: UInt64, rule: AccessRule, access: Access) {
            self.init(subject: .process(processID, startTime: startTime), rule: rule, access: access)
        }
    }

    private var answers: [Key: (answer: ConfirmationAnswer, expires: ContinuousClock.Instant)] = [:]

    /// The answer that still stands for `key` at `now`.
    func answer(for key: Key, at now: ContinuousClock.Instant) -> ConfirmationAnswer? {
        guard let entry = answers[key], entry.expires > now else { return nil }
        return entry.answer
    }

    /// Also drops every answer that expired, so the table holds no more than the answers given
    /// within one remember duration.
    mutating func remember(_ answer: ConfirmationAnswer, for key: Key, until expires: ContinuousClock.Instant,
                           at now: ContinuousClock.Instant) {
        answers = answers.filter { $0.value.expires > now }
        answers[key] = (answer, expires)
    }

    mutating func forgetAll() {
        answers.removeAll()
    }

    var count: Int { answers.count }
}
