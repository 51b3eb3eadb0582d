import Glibc
import VaultCore

/// The answers the user gave, each for one process, one rule and one kind of access, until it
/// expires. A process is its pid and its start time, so a pid given again to a new process
/// inherits nothing. A yes to reading is not a yes to writing.
struct RememberedConfirmations {
    struct Key: Hashable, Sendable {
        let processID: pid_t
        let startTime: UInt64
        let rule: AccessRule
        let write: Bool

        init(processID: pid_t, startTime: UInt64, rule: AccessRule, access: Access) {
            self.processID = processID
            self.startTime = startTime
            self.rule = rule
            write = access == .write
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
