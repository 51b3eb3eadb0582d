import CSystemd
import Glibc

/// The background daemon's standard error, which nothing reads once the launcher has returned:
/// a stream to the journal when journald runs, so that what the Swift runtime writes as the
/// process dies (a trap's "Fatal error: ...") is kept with the daemon's other lines; else
/// /dev/null, as the launcher set it.
enum JournalStderr {
    /// Before any thread starts: fd 2 changes under no one.
    static func attach() {
        // LOG_ERR: only what goes wrong reaches stderr; no level prefixes, the runtime writes none.
        let stream = sd_journal_stream_fd("keychainfs", LOG_ERR, 0)
        guard stream >= 0 else { return }
        if stream != 2 {
            _ = dup2(stream, 2)
            close(stream)
        }
    }
}
